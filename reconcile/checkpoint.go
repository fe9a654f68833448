package reconcile

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/custody"
)

// Checkpoint is where a provider's reconciliation stands. It moves only after
// a page has been fully handled (every missing event durable or asked for),
// so a run that fails resumes at the first page it did not finish.
type Checkpoint struct {
	Provider         string `db:"provider" json:"provider"`
	WindowStart      int64  `db:"window_start" json:"window_start_ms"`
	WindowEnd        int64  `db:"window_end" json:"window_end_ms"`
	Cursor           string `db:"cursor" json:"cursor,omitempty"` // "" when no run is in progress
	Pages            int    `db:"pages" json:"pages"`
	CompletedThrough int64  `db:"completed_through" json:"completed_through_ms"`
	UpdatedAt        int64  `db:"updated_at" json:"updated_at_ms"`
}

// LoadCheckpoint reads provider's checkpoint; found is false when it has none
// (or the database predates the table, as a read-only dry run may see).
func LoadCheckpoint(ctx context.Context, q sqlx.QueryerContext, provider string) (cp Checkpoint, found bool, err error) {
	err = sqlx.GetContext(ctx, q, &cp, `SELECT provider, window_start, window_end, cursor, pages, completed_through, updated_at
		FROM reconcile_checkpoints WHERE provider = ?`, provider)
	switch {
	case errors.Is(err, sql.ErrNoRows), err != nil && strings.Contains(err.Error(), "no such table"):
		return Checkpoint{Provider: provider}, false, nil
	case err != nil:
		return cp, false, fmt.Errorf("read checkpoint %s: %w", provider, err)
	}
	return cp, true, nil
}

// saveCheckpoint is the writer op that stores cp.
func saveCheckpoint(cp Checkpoint) custody.Op {
	return custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO reconcile_checkpoints
			(provider, window_start, window_end, cursor, pages, completed_through, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (provider) DO UPDATE SET window_start = excluded.window_start, window_end = excluded.window_end,
				cursor = excluded.cursor, pages = excluded.pages, completed_through = excluded.completed_through,
				updated_at = excluded.updated_at`,
			cp.Provider, cp.WindowStart, cp.WindowEnd, cp.Cursor, cp.Pages, cp.CompletedThrough, tx.Now())
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
		_, err := tx.ExecContext(ctx, `INSERT INTO redelivery_requests (provider, event_id, delivery_id, requested_at, status_code)
			VALUES (?, ?, ?, ?, ?) ON CONFLICT (provider, event_id) DO NOTHING`, provider, e.ID, e.DeliveryID, tx.Now(), code)
		if err != nil {
			return fmt.Errorf("record redelivery request %s/%s: %w", provider, e.ID, err)
		}
		return nil
	})
}
