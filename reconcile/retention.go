package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/schema"
)

// Retention is how long stored custody is kept; zero keeps forever.
//
// After Payload a receipt's raw body (and the signature headers, useless
// without it) is deleted; the receipt stays as a tombstone: provider, event
// id, body digest, received_at, status. While the tombstone exists a
// redelivery is still a duplicate. After Keys the tombstone goes too, with its
// delivery attempts and replays. Ledger rows are never pruned (they are
// append-only by trigger, and metered_usage's UNIQUE (provider, event_id,
// meter) still refuses a second charge for a forgotten event).
//
// Receipts with status failed are kept whole at any age: they hold an event
// whose usage is not yet in the ledger, and deleting the body would lose it.
// Replay them (or accept their loss by hand); prune counts them.
type Retention struct {
	Payload time.Duration
	Keys    time.Duration
}

// PruneReport counts what Prune did, or would do in a dry run.
type PruneReport struct {
	DryRun        bool       `json:"dry_run"`
	PayloadBefore *time.Time `json:"payload_before,omitempty"` // bodies received before this are pruned
	KeysBefore    *time.Time `json:"keys_before,omitempty"`    // receipts received before this are deleted
	BodiesPruned  int64      `json:"bodies_pruned"`
	KeysDeleted   int64      `json:"keys_deleted"`
	// RedeliveryRequestsDeleted are redelivery records older than Keys.
	RedeliveryRequestsDeleted int64 `json:"redelivery_requests_deleted"`
	// FailedKept are failed receipts older than the payload cutoff, kept
	// whole until replayed.
	FailedKept int64 `json:"failed_kept"`
}

// pruneBatch is how many receipts one writer op changes: small enough that a
// prune never holds the writer long enough to delay webhooks noticeably.
// A variable so tests can make batches small.
var pruneBatch = 500

// Prune applies p at now. Each batch is its own writer op (and so shares
// commits with webhooks); an error stops Prune with what was done so far
// counted and durable.
func Prune(ctx context.Context, db *schema.DB, w *custody.Writer, p Retention, now time.Time, dryRun bool) (*PruneReport, error) {
	rep := &PruneReport{DryRun: dryRun}
	now = time.UnixMilli(now.UnixMilli()) // as stored
	if p.Payload > 0 {
		cut := now.Add(-p.Payload).UTC()
		rep.PayloadBefore = &cut
		if err := db.Read.GetContext(ctx, &rep.FailedKept, `SELECT COUNT(*) FROM receipts
			WHERE status = 'failed' AND received_at < ?`, cut.UnixMilli()); err != nil {
			return rep, fmt.Errorf("count failed receipts: %w", err)
		}
		n, err := pruneEach(ctx, db.Read, w, dryRun, cut.UnixMilli(), "body IS NOT NULL",
			`UPDATE receipts SET body = NULL, signature_headers = '' WHERE id IN (?) AND body IS NOT NULL
				AND status IN ('applied', 'ignored') AND received_at < ? RETURNING id`, nil)
		rep.BodiesPruned = n
		if err != nil {
			return rep, fmt.Errorf("prune bodies: %w", err)
		}
	}
	if p.Keys > 0 {
		cut := now.Add(-p.Keys).UTC()
		rep.KeysBefore = &cut
		// delivery_attempts and replays go with their receipt (ON DELETE CASCADE).
		n, err := pruneEach(ctx, db.Read, w, dryRun, cut.UnixMilli(), "1 = 1",
			`DELETE FROM receipts WHERE id IN (?) AND status IN ('applied', 'ignored') AND received_at < ? RETURNING id`,
			markReceiptsPruned)
		rep.KeysDeleted = n
		if err != nil {
			return rep, fmt.Errorf("prune keys: %w", err)
		}
		if dryRun {
			err = db.Read.GetContext(ctx, &rep.RedeliveryRequestsDeleted, `SELECT COUNT(*) FROM redelivery_requests WHERE requested_at < ?`, cut.UnixMilli())
		} else {
			var n int64 // reported only once the delete has committed
			err = w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
				res, err := tx.ExecContext(ctx, `DELETE FROM redelivery_requests WHERE requested_at < ?`, cut.UnixMilli())
				if err == nil {
					n, err = res.RowsAffected()
				}
				return err
			}))
			if err == nil {
				rep.RedeliveryRequestsDeleted = n
			}
		}
		if err != nil {
			return rep, fmt.Errorf("prune redelivery requests: %w", err)
		}
	}
	if !dryRun && rep.BodiesPruned+rep.KeysDeleted > 0 {
		if err := w.Submit(ctx, recordPrune(rep, now)); err != nil {
			return rep, fmt.Errorf("record prune: %w", err)
		}
	}
	return rep, nil
}

// recordPrune logs a prune in prune_runs with the ledger head at its end: a
// usage row above the head of every key-deleting prune must have its receipt.
func recordPrune(rep *PruneReport, now time.Time) custody.Op {
	ms := func(t *time.Time) any {
		if t == nil {
			return nil
		}
		return t.UnixMilli()
	}
	return custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO prune_runs (pruned_at, payload_before, keys_before, bodies_pruned, keys_deleted, ledger_head_id)
			VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(id), 0) FROM metered_usage))`,
			now.UnixMilli(), ms(rep.PayloadBefore), ms(rep.KeysBefore), rep.BodiesPruned, rep.KeysDeleted)
		return err
	})
}

// markReceiptsPruned records, in the transaction that deleted them, that
// receipts up to maxID may be missing on purpose: the receipts chain cannot
// link across them any more, and verify must tell that from a deletion.
func markReceiptsPruned(ctx context.Context, tx *custody.Tx, maxID int64) error {
	_, err := tx.ExecContext(ctx, `UPDATE chain_head SET receipts_pruned_through = MAX(receipts_pruned_through, ?) WHERE id = 1`, maxID)
	return err
}

// pruneEach walks the applied and ignored receipts received before cut that
// match cond, oldest first, in batches of ids read from the read pool (keyset
// order on the (status, received_at) index, so no batch rescans the last),
// and runs change on each batch inside the writer. change re-checks the
// conditions in its transaction: a receipt replayed or pruned meanwhile is
// left alone. change returns the ids it changed (RETURNING id); then, when
// set, runs in the same transaction with the highest.
func pruneEach(ctx context.Context, read *sqlx.DB, w *custody.Writer, dryRun bool, cut int64, cond, change string,
	then func(ctx context.Context, tx *custody.Tx, maxID int64) error) (int64, error) {
	var total int64
	for _, status := range []custody.Status{custody.StatusApplied, custody.StatusIgnored} {
		if dryRun {
			var n int64
			if err := read.GetContext(ctx, &n, `SELECT COUNT(*) FROM receipts WHERE status = ? AND received_at < ? AND `+cond,
				status, cut); err != nil {
				return total, err
			}
			total += n
			continue
		}
		lastAt, lastID := int64(-1<<63), int64(0)
		for {
			var batch []struct {
				ID         int64 `db:"id"`
				ReceivedAt int64 `db:"received_at"`
			}
			if err := sqlx.SelectContext(ctx, read, &batch, `SELECT id, received_at FROM receipts
				WHERE status = ? AND received_at < ? AND (received_at > ? OR (received_at = ? AND id > ?)) AND `+cond+`
				ORDER BY received_at, id LIMIT ?`, status, cut, lastAt, lastAt, lastID, pruneBatch); err != nil {
				return total, err
			}
			if len(batch) == 0 {
				break
			}
			ids := make([]int64, len(batch))
			for i, b := range batch {
				ids[i] = b.ID
			}
			lastAt, lastID = batch[len(batch)-1].ReceivedAt, batch[len(batch)-1].ID
			q, args, err := sqlx.In(change, ids, cut)
			if err != nil {
				return total, err
			}
			var n int64
			if err := w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
				var changed []int64
				if err := tx.SelectContext(ctx, &changed, q, args...); err != nil {
					return err
				}
				n = int64(len(changed))
				if then == nil || n == 0 {
					return nil
				}
				return then(ctx, tx, slices.Max(changed))
			})); err != nil {
				return total, err
			}
			total += n
			if len(batch) < pruneBatch {
				break
			}
		}
	}
	return total, nil
}
