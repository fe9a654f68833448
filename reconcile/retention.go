package reconcile

import (
	"context"
	"fmt"
	"slices"
	"time"

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
//
// Receipts the forwarding outbox still has to deliver, or holds as dead, are
// kept whole too. Delivered outbox messages go after Delivered.
type Retention struct {
	Payload   time.Duration
	Keys      time.Duration
	Delivered time.Duration
}

// PruneReport counts what Prune did, or would do in a dry run.
type PruneReport struct {
	DryRun        bool       `json:"dry_run"`
	PayloadBefore *time.Time `json:"payload_before,omitempty"` // bodies received before this are pruned
	KeysBefore    *time.Time `json:"keys_before,omitempty"`    // receipts received before this are deleted
	BodiesPruned  int64      `json:"bodies_pruned"`
	KeysDeleted   int64      `json:"keys_deleted"`
	// TamperedKept are receipts kept whole although due: their stored body
	// no longer hashes to its body_sha256, and pruning would erase that
	// evidence (verify reports them). Non-zero means someone changed a body.
	TamperedKept int64 `json:"tampered_kept"`
	// RedeliveryRequestsDeleted are redelivery records older than Keys.
	RedeliveryRequestsDeleted int64 `json:"redelivery_requests_deleted"`
	// FailedKept are failed receipts older than the payload cutoff, kept
	// whole until replayed.
	FailedKept int64 `json:"failed_kept"`
	// DeliveredBefore and DeliveredPruned: forwarded messages delivered
	// before this were deleted with their attempts.
	DeliveredBefore *time.Time `json:"delivered_before,omitempty"`
	DeliveredPruned int64      `json:"delivered_pruned"`
}

// RetentionStore is what Prune reads from storage (its writes go through
// the writer); *schema.DB satisfies it.
type RetentionStore interface {
	CountFailedReceipts(ctx context.Context, before int64) (int64, error)
	CountPrunable(ctx context.Context, p schema.Prune, status string, before int64) (int64, error)
	EachPrunable(ctx context.Context, p schema.Prune, status string, before int64, batch int, fn func(ids []int64) error) error
	CountRedeliveryRequests(ctx context.Context, before int64) (int64, error)
	CountDelivered(ctx context.Context, before int64) (int64, error)
}

// pruneBatch is how many receipts one writer op changes: small enough that a
// prune never holds the writer long enough to delay webhooks noticeably.
// A variable so tests can make batches small.
var pruneBatch = 500

// Prune applies p at now. Each batch is its own writer op (and so shares
// commits with webhooks); an error stops Prune with what was done so far
// counted and durable.
func Prune(ctx context.Context, db RetentionStore, w *custody.Writer, p Retention, now time.Time, dryRun bool) (*PruneReport, error) {
	rep := &PruneReport{DryRun: dryRun}
	// Both passes can meet a tampered receipt: each is counted once, however
	// Prune ends.
	tampered := map[int64]bool{}
	defer func() { rep.TamperedKept = int64(len(tampered)) }()
	now = time.UnixMilli(now.UnixMilli()) // as stored
	// Delivered messages first: a receipt retention.keys deletes takes its
	// delivered messages with it, and they are counted here.
	if p.Delivered > 0 {
		cut := now.Add(-p.Delivered).UTC()
		rep.DeliveredBefore = &cut
		n, err := pruneDelivered(ctx, db, w, dryRun, cut.UnixMilli())
		rep.DeliveredPruned = n
		if err != nil {
			return rep, fmt.Errorf("prune delivered messages: %w", err)
		}
	}
	if p.Payload > 0 {
		cut := now.Add(-p.Payload).UTC()
		rep.PayloadBefore = &cut
		var err error
		if rep.FailedKept, err = db.CountFailedReceipts(ctx, cut.UnixMilli()); err != nil {
			return rep, fmt.Errorf("count failed receipts: %w", err)
		}
		ms := cut.UnixMilli()
		n, err := pruneEach(ctx, db, w, tampered, dryRun, ms, schema.PruneBodies, func(ctx context.Context, b custody.Retention, _ []int64) error {
			return b.MarkBodiesPruned(ctx, ms)
		})
		rep.BodiesPruned = n
		if err != nil {
			return rep, fmt.Errorf("prune bodies: %w", err)
		}
	}
	if p.Keys > 0 {
		cut := now.Add(-p.Keys).UTC()
		rep.KeysBefore = &cut
		// delivery_attempts and replays go with their receipt.
		n, err := pruneEach(ctx, db, w, tampered, dryRun, cut.UnixMilli(), schema.PruneKeys, func(ctx context.Context, b custody.Retention, changed []int64) error {
			return b.MarkReceiptsPruned(ctx, slices.Max(changed))
		})
		rep.KeysDeleted = n
		if err != nil {
			return rep, fmt.Errorf("prune keys: %w", err)
		}
		if dryRun {
			rep.RedeliveryRequestsDeleted, err = db.CountRedeliveryRequests(ctx, cut.UnixMilli())
		} else {
			var n int64 // reported only once the delete has committed
			err = w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
				var err error
				n, err = tx.Retention().DeleteRedeliveryRequests(ctx, cut.UnixMilli())
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
	ms := func(t *time.Time) *int64 {
		if t == nil {
			return nil
		}
		ms := t.UnixMilli()
		return &ms
	}
	run := schema.PruneRun{PrunedAt: now.UnixMilli(), PayloadBefore: ms(rep.PayloadBefore), KeysBefore: ms(rep.KeysBefore),
		BodiesPruned: rep.BodiesPruned, KeysDeleted: rep.KeysDeleted}
	return custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		return tx.Retention().RecordPrune(ctx, run)
	})
}

// pruneEach walks the applied and ignored receipts received before cut that
// prune would change, oldest first, in batches read from the read pool, and
// prunes each batch inside the writer. The prune re-checks the conditions in
// its transaction: a receipt replayed or pruned meanwhile is left alone, and
// one whose body was changed is kept (added to tampered). then
// runs in the same transaction with the ids changed, if any: it records how
// far the prune went (verify must tell retention from a deletion).
func pruneEach(ctx context.Context, db RetentionStore, w *custody.Writer, tampered map[int64]bool, dryRun bool, cut int64, prune schema.Prune,
	then func(ctx context.Context, b custody.Retention, changed []int64) error) (int64, error) {
	var total int64
	for _, status := range []string{string(custody.StatusApplied), string(custody.StatusIgnored)} {
		if dryRun {
			n, err := db.CountPrunable(ctx, prune, status, cut)
			if err != nil {
				return total, err
			}
			total += n
			continue
		}
		err := db.EachPrunable(ctx, prune, status, cut, pruneBatch, func(ids []int64) error {
			var (
				n    int64
				kept []int64
			)
			if err := w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
				b := tx.Retention()
				changed, bad, err := b.PruneReceipts(ctx, prune, ids, cut)
				if err != nil {
					return err
				}
				n, kept = int64(len(changed)), bad
				if n == 0 {
					return nil
				}
				return then(ctx, b, changed)
			})); err != nil {
				return err
			}
			total += n
			for _, id := range kept {
				tampered[id] = true
			}
			return nil
		})
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// pruneDelivered deletes the outbox messages delivered before cut, pruneBatch
// per writer op.
func pruneDelivered(ctx context.Context, db RetentionStore, w *custody.Writer, dryRun bool, cut int64) (int64, error) {
	if dryRun {
		return db.CountDelivered(ctx, cut)
	}
	var total int64
	for {
		var n int64
		if err := w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
			var err error
			n, err = tx.Retention().PruneDelivered(ctx, cut, pruneBatch)
			return err
		})); err != nil {
			return total, err
		}
		total += n
		if n < int64(pruneBatch) {
			return total, nil
		}
	}
}
