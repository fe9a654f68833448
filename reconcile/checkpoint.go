package reconcile

import (
	"context"
	"fmt"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/schema"
)

// Checkpoint is where a provider's reconciliation stands. It moves only after
// a page has been fully handled (every missing event durable or asked for),
// so a run that fails resumes at the first page it did not finish.
type Checkpoint struct {
	Provider         string `json:"provider"`
	WindowStart      int64  `json:"window_start_ms"`
	WindowEnd        int64  `json:"window_end_ms"`
	Cursor           string `json:"cursor,omitempty"` // "" when no run is in progress
	Pages            int    `json:"pages"`
	CompletedThrough int64  `json:"completed_through_ms"`
	UpdatedAt        int64  `json:"updated_at_ms"`
}

// CheckpointReader is what LoadCheckpoint needs from storage; *schema.DB
// satisfies it.
type CheckpointReader interface {
	Checkpoint(ctx context.Context, provider string) (schema.Checkpoint, bool, error)
}

// LoadCheckpoint reads provider's checkpoint; found is false when it has none
// (or the database predates the table, as a read-only dry run may see).
func LoadCheckpoint(ctx context.Context, db CheckpointReader, provider string) (cp Checkpoint, found bool, err error) {
	s, found, err := db.Checkpoint(ctx, provider)
	switch {
	case err != nil:
		return Checkpoint{}, false, fmt.Errorf("read checkpoint %s: %w", provider, err)
	case !found:
		return Checkpoint{Provider: provider}, false, nil
	}
	return Checkpoint{Provider: s.Provider, WindowStart: s.WindowStart, WindowEnd: s.WindowEnd, Cursor: s.Cursor, Pages: s.Pages,
		CompletedThrough: s.CompletedThrough, UpdatedAt: s.UpdatedAt}, true, nil
}

// saveCheckpoint is the writer op that stores cp.
func saveCheckpoint(cp Checkpoint) custody.Op {
	return custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		err := tx.Reconcile().SaveCheckpoint(ctx, schema.Checkpoint{Provider: cp.Provider, WindowStart: cp.WindowStart, WindowEnd: cp.WindowEnd,
			Cursor: cp.Cursor, Pages: cp.Pages, CompletedThrough: cp.CompletedThrough, UpdatedAt: tx.Now()})
		if err != nil {
			return fmt.Errorf("save checkpoint %s: %w", cp.Provider, err)
		}
		return nil
	})
}

// recordRedelivery is the writer op that remembers a redelivery request, so
// no later run asks again for the same event.
func recordRedelivery(provider string, e Event, code int) custody.Op {
	return custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		err := tx.Reconcile().RecordRedelivery(ctx, schema.Redelivery{Provider: provider, EventID: e.ID, DeliveryID: e.DeliveryID,
			RequestedAt: tx.Now(), StatusCode: code})
		if err != nil {
			return fmt.Errorf("record redelivery request %s/%s: %w", provider, e.ID, err)
		}
		return nil
	})
}
