package custody

import (
	"context"
	"errors"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// BulkResult counts what a bulk correction did.
type BulkResult struct {
	Corrected     int     `json:"corrected"`      // events voided (and amended)
	AlreadyVoided int     `json:"already_voided"` // voided since they were selected (a run resumed beside another)
	Failed        []error `json:"-"`              // each failed event's error; nothing was written for it
}

// bulkChunk is how many ops one SubmitAll hands the writer: each is its own
// savepoint when one fails, so a failing event is left out alone.
const bulkChunk = 256

// CorrectAll submits ops (VoidEvent or AmendEvent, one per event) through
// the writer, each applied whole or not at all. It stops between chunks when
// ctx ends; what it did is committed, and the same selection run again
// continues where it stopped.
func CorrectAll(ctx context.Context, w *Writer, ops []Op) (BulkResult, error) {
	var res BulkResult
	for start := 0; start < len(ops); start += bulkChunk {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		chunk := ops[start:min(start+bulkChunk, len(ops))]
		for _, err := range w.SubmitAll(ctx, chunk) {
			switch {
			case err == nil:
				res.Corrected++
			case errors.Is(err, ledger.ErrAlreadyVoided):
				res.AlreadyVoided++
			default:
				res.Failed = append(res.Failed, err)
			}
		}
	}
	return res, nil
}

// Remap is what amend --remap would do to provider's events ids: an
// AmendEvent per event whose stored body the mapping now maps to different
// rows (events it maps as before, and amendments made with it, are left
// alone), the change each makes, and the events it cannot amend (pruned
// body, a body the mapping now refuses) with why.
type Remap struct {
	Ops     []*AmendEvent
	Changes [][]ledger.Change // per op
	Refused []error
}

// PlanRemap reads ids' receipts and rows in one snapshot and plans the remap;
// tmpl gives the mapping, meters, handler version, reason and actor.
func PlanRemap(ctx context.Context, db *schema.DB, provider string, ids []string, tmpl AmendEvent, loc *time.Location) (*Remap, error) {
	plan := &Remap{}
	err := db.View(ctx, func(tx *schema.ReadTx) error {
		rcs, err := tx.EventReceipts(ctx, provider, ids)
		if err != nil {
			return err
		}
		byID := make(map[string]schema.Receipt, len(rcs))
		for _, rc := range rcs {
			byID[rc.EventID] = rc
		}
		for _, id := range ids {
			rc, ok := byID[id]
			if !ok {
				continue // rows without a receipt (pruned by retention): nothing to map
			}
			a := tmpl
			a.Void.Provider, a.Void.EventID = provider, id
			a.Body, a.Edit = nil, func(b []byte) ([]byte, error) { return b, nil }
			d, err := a.Corrected(rc)
			if err != nil {
				plan.Refused = append(plan.Refused, err)
				continue
			}
			recs, err := tx.EventLedgerRows(ctx, provider, id)
			if err != nil {
				return err
			}
			before, after := ledger.StoredRows(recs), ledger.UsageRows(d.Rows)
			if ledger.SameRows(before, after) {
				continue
			}
			plan.Ops = append(plan.Ops, &a)
			plan.Changes = append(plan.Changes, ledger.Changes(before, after, a.Meters, loc))
		}
		return nil
	})
	return plan, err
}
