package custody

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// ReplayOutcome is what one replay did.
type ReplayOutcome string

// Replay outcomes.
const (
	ReplayApplied        ReplayOutcome = "applied"         // the mapping now succeeds: usage rows written
	ReplayFailed         ReplayOutcome = "failed"          // the mapping still fails; the new error is stored
	ReplayIgnored        ReplayOutcome = "ignored"         // no mapping covers the event type any more
	ReplayAlreadyApplied ReplayOutcome = "already_applied" // nothing to do: applied once, never twice
	ReplayPruned         ReplayOutcome = "pruned"          // the body is gone (retention.payload); nothing to map
	ReplayNotFound       ReplayOutcome = "not_found"       // no receipt with that id
)

// Replay re-applies one stored receipt with the current mapping. It is an Op:
// it reads the receipt inside the writer's transaction, so the decision "is
// it already applied?" and the usage rows it writes commit together, and an
// event is never applied twice however many replays race.
//
// The receipt keeps its source (webhook or reconcile) and gets the new
// status, error, handler version and processed_at; the replays table records
// the replay itself.
type Replay struct {
	Provider       string
	EventID        string
	Mapper         *ledger.Mapper
	HandlerVersion string

	// Outcome is set by Apply (one of the Replay* constants), Error to the
	// mapping error when the outcome is failed.
	Outcome ReplayOutcome
	Error   string
}

// Apply implements Op.
func (r *Replay) Apply(ctx context.Context, tx *Tx) error {
	rc, err := tx.b.GetReceipt(ctx, r.Provider, r.EventID)
	switch {
	case errors.Is(err, schema.ErrNotFound):
		r.Outcome = ReplayNotFound
		return nil
	case err != nil:
		return err
	case Status(rc.Status) == StatusApplied:
		r.Outcome = ReplayAlreadyApplied
		return nil
	case rc.Pruned:
		r.Outcome = ReplayPruned
		return nil
	}
	d := &Delivery{Provider: r.Provider, EventID: r.EventID, EventType: rc.EventType, Body: rc.Body, Source: Source(rc.Source),
		ReceivedAt: time.UnixMilli(rc.ReceivedAt)}
	d.Classify(r.Mapper)
	if d.Status == StatusApplied {
		// The same rows a first delivery would have written; metered_usage's
		// UNIQUE (receipt_id, meter) backs up the status check above.
		if err := d.appendRows(ctx, tx, rc.ID); err != nil {
			return err
		}
	}
	if err := tx.b.UpdateReceiptStatus(ctx, schema.Receipt{Provider: r.Provider, EventID: r.EventID, Status: string(d.Status),
		Error: d.Error, HandlerVersion: r.HandlerVersion, ProcessedAt: tx.now}); err != nil {
		return fmt.Errorf("update receipt %s/%s: %w", r.Provider, r.EventID, err)
	}
	if err := tx.b.InsertReplay(ctx, schema.Replay{Provider: r.Provider, EventID: r.EventID, ReplayedAt: tx.now,
		FromStatus: rc.Status, ToStatus: string(d.Status), Error: d.Error, FromHandlerVersion: rc.HandlerVersion,
		HandlerVersion: r.HandlerVersion}); err != nil {
		return fmt.Errorf("record replay %s/%s: %w", r.Provider, r.EventID, err)
	}
	r.Outcome, r.Error = ReplayOutcome(d.Status), d.Error // applied, failed or ignored: the new status
	return nil
}

// ReplayFilter selects the receipts to replay: one event, or every receipt of
// the provider with Status received at or after Since.
type ReplayFilter struct {
	Provider string
	EventID  string
	Status   Status // failed or ignored, when EventID is empty
	Since    time.Time
}

// ReplayReport counts what a replay did.
type ReplayReport struct {
	Provider       string `json:"provider"`
	Selected       int    `json:"selected"`
	Applied        int    `json:"applied"`
	StillFailed    int    `json:"still_failed"`
	Ignored        int    `json:"ignored"`
	AlreadyApplied int    `json:"already_applied"`
	Pruned         int    `json:"pruned"`
	NotFound       int    `json:"not_found"`
	Errors         int    `json:"errors"`
	// Failures lists the event ids still failing with their mapping error
	// (at most 20), so the operator sees what to fix next.
	Failures []ReplayFailure `json:"failures,omitempty"`
}

// ReplayFailure is one event whose mapping still fails.
type ReplayFailure struct {
	EventID string `json:"event_id"`
	Error   string `json:"error"`
}

// replayChunk is how many replays are queued at once: they share the
// writer's batches (one commit for many) without flooding its queue.
const replayChunk = 256

// ReplayReceipts re-applies the receipts f selects (from src, the read pool)
// through w. Storage errors are counted and the first is returned; the other
// replays still run.
func ReplayReceipts(ctx context.Context, src ReplaySource, w *Writer, m *ledger.Mapper, version string, f ReplayFilter) (*ReplayReport, error) {
	rep := &ReplayReport{Provider: f.Provider}
	var ids []string
	if f.EventID != "" {
		ids = []string{f.EventID}
	} else {
		if f.Status != StatusFailed && f.Status != StatusIgnored {
			return nil, fmt.Errorf("status %q: replay selects failed or ignored receipts", f.Status)
		}
		var err error
		if ids, err = src.EventIDsWithStatus(ctx, f.Provider, string(f.Status), f.Since.UnixMilli()); err != nil {
			return nil, fmt.Errorf("select receipts: %w", err)
		}
	}
	rep.Selected = len(ids)
	var first error
	for start := 0; start < len(ids); start += replayChunk {
		chunk := ids[start:min(start+replayChunk, len(ids))]
		ops := make([]*Replay, len(chunk))
		errs := make([]error, len(chunk))
		var wg sync.WaitGroup
		for i, id := range chunk {
			ops[i] = &Replay{Provider: f.Provider, EventID: id, Mapper: m, HandlerVersion: version}
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = w.Submit(ctx, ops[i])
			}()
		}
		wg.Wait()
		for i, op := range ops {
			if errs[i] != nil {
				rep.Errors++
				if first == nil {
					first = fmt.Errorf("replay %s/%s: %w", op.Provider, op.EventID, errs[i])
				}
				continue
			}
			switch op.Outcome {
			case ReplayApplied:
				rep.Applied++
			case ReplayFailed:
				rep.StillFailed++
				if len(rep.Failures) < 20 {
					rep.Failures = append(rep.Failures, ReplayFailure{EventID: op.EventID, Error: op.Error})
				}
			case ReplayIgnored:
				rep.Ignored++
			case ReplayAlreadyApplied:
				rep.AlreadyApplied++
			case ReplayPruned:
				rep.Pruned++
			case ReplayNotFound:
				rep.NotFound++
			}
		}
	}
	return rep, first
}
