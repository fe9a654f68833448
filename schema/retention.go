package schema

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Prune is what a retention step removes from old applied and ignored
// receipts. Failed receipts are never pruned: they hold usage not yet in the
// ledger.
type Prune int

const (
	// PruneBodies deletes the raw body and the signature headers; the
	// receipt stays as a tombstone.
	PruneBodies Prune = iota + 1
	// PruneKeys deletes the receipt itself; its delivery attempts and
	// replays go with it (ON DELETE CASCADE).
	PruneKeys
)

// cond is the SQL condition a receipt must still meet to be pruned by p.
func (p Prune) cond() (string, error) {
	switch p {
	case PruneBodies:
		return "body IS NOT NULL" + notForwarding, nil
	case PruneKeys:
		return "1 = 1" + notForwarding, nil
	}
	return "", fmt.Errorf("schema: unknown prune %d", int(p))
}

// notForwarding keeps, at any age, the body and key of a receipt the outbox
// still has to deliver (pending) or holds as dead: the relay sends the
// receipt's body, and `forward retry` needs it (outbox.go).
const notForwarding = ` AND NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.receipt_id = receipts.id AND outbox.status != 'delivered')`

// CountFailedReceipts counts the receipts in status failed received before
// (unix ms).
func (db *DB) CountFailedReceipts(ctx context.Context, before int64) (int64, error) {
	var n int64
	err := db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM receipts WHERE status = 'failed' AND received_at < ?`, before)
	return n, err
}

// CountPrunable counts the receipts in status (applied or ignored) received
// before (unix ms) that p would change.
func (db *DB) CountPrunable(ctx context.Context, p Prune, status string, before int64) (int64, error) {
	cond, err := p.cond()
	if err != nil {
		return 0, err
	}
	var n int64
	err = db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM receipts WHERE status = ? AND received_at < ? AND `+cond, status, before)
	if err != nil && predates(ctx, db.Read, versionOutbox) { // a dry run opens read-only: no outbox yet
		err = db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM receipts WHERE status = ? AND received_at < ? AND `+
			strings.TrimSuffix(cond, notForwarding), status, before)
	}
	return n, err
}

// EachPrunable walks the receipts in status (applied or ignored) received
// before (unix ms) that p would change, oldest first, calling fn with the
// ids of at most batch receipts at a time. It reads in keyset order on the
// (status, received_at) index, so no batch rescans the receipts before it,
// and it does not hold a read transaction across calls: fn may write (and
// change the rows it was given) before the next batch is read.
func (db *DB) EachPrunable(ctx context.Context, p Prune, status string, before int64, batch int, fn func(ids []int64) error) error {
	cond, err := p.cond()
	if err != nil {
		return err
	}
	lastAt, lastID := int64(math.MinInt64), int64(0)
	for {
		var rows []struct {
			ID         int64 `db:"id"`
			ReceivedAt int64 `db:"received_at"`
		}
		if err := sqlx.SelectContext(ctx, db.Read, &rows, `SELECT id, received_at FROM receipts
			WHERE status = ? AND received_at < ? AND (received_at > ? OR (received_at = ? AND id > ?)) AND `+cond+`
			ORDER BY received_at, id LIMIT ?`, status, before, lastAt, lastAt, lastID, batch); err != nil {
			return err
		}
		if len(rows) == 0 {
			return nil
		}
		ids := make([]int64, len(rows))
		for i, r := range rows {
			ids[i] = r.ID
		}
		lastAt, lastID = rows[len(rows)-1].ReceivedAt, rows[len(rows)-1].ID
		if err := fn(ids); err != nil {
			return err
		}
		if len(rows) < batch {
			return nil
		}
	}
}

// PruneReceipts applies p to the receipts ids that, inside this
// transaction, are still applied or ignored, received before (unix ms) and
// not yet pruned by p: one replayed or pruned since it was listed is left
// alone. It returns the ids it changed, and those it kept whole because their
// stored body no longer hashes to its body_sha256: pruning them would erase
// the evidence that the body was changed (verify reports them).
func (b Batch) PruneReceipts(ctx context.Context, p Prune, ids []int64, before int64) (changed, tampered []int64, err error) {
	if tampered, err = b.tamperedBodies(ctx, ids); err != nil {
		return nil, nil, err
	}
	ids = slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return slices.Contains(tampered, id) })
	if len(ids) == 0 {
		return nil, tampered, nil
	}
	var q string
	switch p {
	case PruneBodies:
		q = `UPDATE receipts SET body = NULL, signature_headers = '' WHERE id IN (?) AND body IS NOT NULL
			AND status IN ('applied', 'ignored') AND received_at < ?` + notForwarding + ` RETURNING id`
	case PruneKeys:
		q = `DELETE FROM receipts WHERE id IN (?) AND status IN ('applied', 'ignored') AND received_at < ?` + notForwarding + ` RETURNING id`
	default:
		return nil, nil, fmt.Errorf("schema: unknown prune %d", int(p))
	}
	q, args, err := sqlx.In(q, ids, before)
	if err != nil {
		return nil, nil, err
	}
	if err := b.tx.SelectContext(ctx, &changed, q, args...); err != nil {
		return nil, nil, err
	}
	return changed, tampered, nil
}

// tamperedBodies returns those of the receipts ids whose stored body does not
// hash to their body_sha256.
func (b Batch) tamperedBodies(ctx context.Context, ids []int64) ([]int64, error) {
	q, args, err := sqlx.In(`SELECT id, body, body_sha256 FROM receipts WHERE id IN (?) AND body IS NOT NULL`, ids)
	if err != nil {
		return nil, err
	}
	var rows []StoredBody
	if err := b.tx.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, err
	}
	var tampered []int64
	for _, r := range rows {
		if sum := sha256.Sum256(r.Body); !bytes.Equal(sum[:], r.BodySHA256) {
			tampered = append(tampered, r.ID)
		}
	}
	return tampered, nil
}

// MarkReceiptsPruned records that receipts up to throughID may be missing on
// purpose (deleted by retention), in the transaction that deleted them: the
// receipts chain cannot link across them any more, and verify must tell that
// from a deletion.
func (b Batch) MarkReceiptsPruned(ctx context.Context, throughID int64) error {
	// Only forward (the CASE is SQLite's two-argument max and PostgreSQL's GREATEST).
	_, err := b.tx.ExecContext(ctx, `UPDATE chain_head SET receipts_pruned_through =
		CASE WHEN receipts_pruned_through > ? THEN receipts_pruned_through ELSE ? END WHERE id = 1`, throughID, throughID)
	return err
}

// MarkBodiesPruned records that receipts received before (unix ms) may
// have lost their bodies on purpose (retention.payload), in the transaction
// that cleared them: verify and dispute must tell that from a body deleted
// some other way.
func (b Batch) MarkBodiesPruned(ctx context.Context, before int64) error {
	_, err := b.tx.ExecContext(ctx, `UPDATE chain_head SET payload_pruned_before =
		CASE WHEN payload_pruned_before > ? THEN payload_pruned_before ELSE ? END WHERE id = 1`, before, before)
	return err
}

// CountRedeliveryRequests counts the redelivery requests made before (unix ms).
func (db *DB) CountRedeliveryRequests(ctx context.Context, before int64) (int64, error) {
	var n int64
	err := db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM redelivery_requests WHERE requested_at < ?`, before)
	return n, err
}

// DeleteRedeliveryRequests deletes the redelivery requests made before (unix
// ms) and returns how many there were.
func (b Batch) DeleteRedeliveryRequests(ctx context.Context, before int64) (int64, error) {
	res, err := b.tx.ExecContext(ctx, `DELETE FROM redelivery_requests WHERE requested_at < ?`, before)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// PruneRun is one prune, as prune_runs logs it (times in unix ms).
type PruneRun struct {
	PrunedAt      int64
	PayloadBefore *int64 // nil when bodies were kept
	KeysBefore    *int64 // nil when receipts were kept
	BodiesPruned  int64
	KeysDeleted   int64
}

// RecordPrune logs r with the ledger head as this transaction sees it: a
// usage row above the head of every key-deleting prune must have its receipt.
func (b Batch) RecordPrune(ctx context.Context, r PruneRun) error {
	_, err := b.tx.ExecContext(ctx, `INSERT INTO prune_runs (pruned_at, payload_before, keys_before, bodies_pruned, keys_deleted, ledger_head_id)
		VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(id), 0) FROM metered_usage))`,
		r.PrunedAt, r.PayloadBefore, r.KeysBefore, r.BodiesPruned, r.KeysDeleted)
	return err
}
