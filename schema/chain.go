package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/chainhash"
)

// The two hash chains (ledger rows and receipts) and the one-row chain_head
// table where both end. Every write batch reads the head once and advances
// it once inside its transaction: free under SQLite's single writer, and on
// a shared database the row lock orders batches (never single rows) across
// writers. The ledger computes the hashes; storage keeps and reads them.

// ChainHead is the chain_head row: the last id and row_hash of each chain
// (id 0 and chainhash.Genesis for an empty chain).
type ChainHead struct {
	LedgerID    int64
	LedgerHash  []byte
	ReceiptID   int64
	ReceiptHash []byte
}

// ErrNotChained means the database predates the chain_head table.
var ErrNotChained = errors.New("the database predates the receipts chain (migration 0005): run `hookledger migrate`")

// saveHeadSQL stores a batch's head (the writer prepares it, stmtCache). A trigger
// refuses to move either chain backwards.
const saveHeadSQL = `UPDATE chain_head SET ledger_id = ?, ledger_hash = ?, receipt_id = ?, receipt_hash = ? WHERE id = 1`

const latestHeadSQL = `SELECT ledger_id, ledger_hash, receipt_id, receipt_hash FROM chain_head WHERE id = 1`

func latestHead(ctx context.Context, q sqlx.QueryerContext) (ChainHead, error) {
	return readHead(ctx, q, latestHeadSQL)
}

func readHead(ctx context.Context, q sqlx.QueryerContext, query string) (ChainHead, error) {
	var h ChainHead
	if err := q.QueryRowxContext(ctx, query).Scan(&h.LedgerID, &h.LedgerHash, &h.ReceiptID, &h.ReceiptHash); err != nil {
		return h, headError(ctx, q, err)
	}
	return h, nil
}

// headError is a failed read of the chain head: ErrNotChained if the
// database predates it.
func headError(ctx context.Context, q sqlx.QueryerContext, err error) error {
	if predates(ctx, q, versionChained) {
		return ErrNotChained
	}
	return fmt.Errorf("load chain head: %w", err)
}

// The writer's batch (Batch, batch.go) reads the head and resolves
// adjustments' refs here.

// LatestHead reads the chain head. The writer calls it once per batch, after
// BEGIN IMMEDIATE, so no other writer can move the head until it commits; on
// PostgreSQL it is the head the batch read as it locked the row.
func (b Batch) LatestHead(ctx context.Context) (ChainHead, error) {
	if b.pg != nil {
		err := b.pg.begin(ctx)
		return b.pg.start, err
	}
	var h ChainHead
	if err := b.tx.QueryRowContext(ctx, latestHeadSQL).Scan(&h.LedgerID, &h.LedgerHash, &h.ReceiptID, &h.ReceiptHash); err != nil {
		return h, headError(ctx, b.tx, err)
	}
	return h, nil
}

// SaveHead advances the chain head to h, once per batch before COMMIT: one
// UPDATE of one row however many receipts and rows the batch appended.
func (b Batch) SaveHead(ctx context.Context, h ChainHead) error {
	if b.pg != nil {
		b.pg.head = &h // sent with the batch's other writes (pgbatch.go)
		return nil
	}
	_, err := b.tx.ExecContext(ctx, saveHeadSQL, h.LedgerID, h.LedgerHash, h.ReceiptID, h.ReceiptHash)
	return err
}

// LedgerRowOwner returns the customer and event time of ledger row id.
func (b Batch) LedgerRowOwner(ctx context.Context, id int64) (string, int64, error) {
	return rowOwner(ctx, b.tx, id)
}

// InvoiceOwner returns the customer and period start of invoice id.
func (b Batch) InvoiceOwner(ctx context.Context, id int64) (string, int64, error) {
	return invoiceOwner(ctx, b.tx, id)
}

// EventOwner returns the customer and event time of an event's ledger row,
// its row for meter if it has one.
func (b Batch) EventOwner(ctx context.Context, provider, eventID, meter string) (string, int64, error) {
	return eventOwner(ctx, b.tx, provider, eventID, meter)
}

// Link is one ledger row's place in the hash chain.
type Link struct {
	ID       int64
	PrevHash []byte
	RowHash  []byte
}

// linkChunk keeps an IN list well under SQLite's bound on variables.
const linkChunk = 500

// ledgerLinks reads the links of the rows with the given ids (missing ids are
// absent from the map).
func ledgerLinks(ctx context.Context, q sqlx.QueryerContext, ids []int64) (map[int64]Link, error) {
	ids = slices.Sorted(slices.Values(ids))
	out := make(map[int64]Link, len(ids))
	for len(ids) > 0 {
		n := min(linkChunk, len(ids))
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		rs, err := q.QueryContext(ctx, `SELECT id, prev_hash, row_hash FROM metered_usage WHERE id IN (?`+strings.Repeat(", ?", n-1)+`)`, args...)
		if err != nil {
			return nil, err
		}
		for rs.Next() {
			var l Link
			if err := rs.Scan(&l.ID, &l.PrevHash, &l.RowHash); err != nil {
				rs.Close()
				return nil, err
			}
			out[l.ID] = l
		}
		if err := rs.Close(); err != nil {
			return nil, err
		}
		ids = ids[n:]
	}
	return out, nil
}

// ledgerLinkBefore reads the nearest row below id; ok is false if there is none.
func ledgerLinkBefore(ctx context.Context, q sqlx.QueryerContext, id int64) (l Link, ok bool, err error) {
	err = q.QueryRowxContext(ctx, `SELECT id, prev_hash, row_hash FROM metered_usage WHERE id < ? ORDER BY id DESC LIMIT 1`, id).
		Scan(&l.ID, &l.PrevHash, &l.RowHash)
	if errors.Is(err, sql.ErrNoRows) {
		return Link{}, false, nil
	}
	return l, err == nil, err
}

// ledgerLinkAfter reads the nearest row above id; ok is false if there is none.
func ledgerLinkAfter(ctx context.Context, q sqlx.QueryerContext, id int64) (l Link, ok bool, err error) {
	err = q.QueryRowxContext(ctx, `SELECT id, prev_hash, row_hash FROM metered_usage WHERE id > ? ORDER BY id LIMIT 1`, id).
		Scan(&l.ID, &l.PrevHash, &l.RowHash)
	if errors.Is(err, sql.ErrNoRows) {
		return Link{}, false, nil
	}
	return l, err == nil, err
}

func lastLedgerID(ctx context.Context, q sqlx.QueryerContext) (int64, error) {
	var id int64
	err := q.QueryRowxContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM metered_usage`).Scan(&id)
	return id, err
}

// LastReceiptID is the highest receipt id (0: none).
func (db *DB) LastReceiptID(ctx context.Context) (int64, error) {
	var id int64
	err := db.Read.QueryRowxContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM receipts`).Scan(&id)
	return id, err
}

// LedgerRowHash is the stored row_hash of ledger row id (ErrNotFound: none).
func (db *DB) LedgerRowHash(ctx context.Context, id int64) ([]byte, error) {
	var h []byte
	err := db.Read.QueryRowxContext(ctx, `SELECT row_hash FROM metered_usage WHERE id = ?`, id).Scan(&h)
	return h, notFound(err)
}

// ReceiptRowHash is the stored row_hash of receipt id (ErrNotFound: none).
func (db *DB) ReceiptRowHash(ctx context.Context, id int64) ([]byte, error) {
	var h []byte
	err := db.Read.QueryRowxContext(ctx, `SELECT row_hash FROM receipts WHERE id = ?`, id).Scan(&h)
	return h, notFound(err)
}

// ReceiptsPrunedThrough is the highest receipt id retention (keys) has
// deleted: below it a receipt may be missing on purpose.
func (db *DB) ReceiptsPrunedThrough(ctx context.Context) (int64, error) {
	var n int64
	err := db.Read.QueryRowxContext(ctx, `SELECT receipts_pruned_through FROM chain_head WHERE id = 1`).Scan(&n)
	if err != nil && predates(ctx, db.Read, versionChained) {
		return 0, ErrNotChained
	}
	return n, err
}

// ScanReceiptLinks calls fn with the link of every receipt above afterID
// (0: every receipt) in id order (the link is reused between calls).
func (db *DB) ScanReceiptLinks(ctx context.Context, afterID int64, fn func(*chainhash.ReceiptLink) error) error {
	return scanReceiptLinks(ctx, db.Read, afterID, fn)
}

// HashBefore is the row nearest below id in the hash chain kept in table
// (metered_usage, receipts or credit_entries): its id and row_hash; ok is
// false when there is none. An incremental verify links its walk of a
// chain, from an anchored row on, to it.
func (db *DB) HashBefore(ctx context.Context, table string, id int64) (prevID int64, hash []byte, ok bool, err error) {
	var query string
	switch table {
	case "metered_usage":
		query = `SELECT id, row_hash FROM metered_usage WHERE id < ? ORDER BY id DESC LIMIT 1`
	case "receipts":
		query = `SELECT id, row_hash FROM receipts WHERE id < ? ORDER BY id DESC LIMIT 1`
	case "credit_entries":
		query = `SELECT id, row_hash FROM credit_entries WHERE id < ? ORDER BY id DESC LIMIT 1`
	default:
		return 0, nil, false, fmt.Errorf("hash before: %q is not a chained table", table)
	}
	err = db.Read.QueryRowxContext(ctx, query, id).Scan(&prevID, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, false, nil
	}
	return prevID, hash, err == nil, err
}

// scanReceiptLinks reads the link of every receipt above afterID in id order. The status as
// first stored is the from_status of the receipt's first replay, or its
// status if it was never replayed. The migration that chains existing
// receipts and verify both read links here, so they cannot disagree.
func scanReceiptLinks(ctx context.Context, q sqlx.QueryerContext, afterID int64, fn func(*chainhash.ReceiptLink) error) error {
	rows, err := q.QueryxContext(ctx, `SELECT r.id, r.provider, r.event_id, r.event_type, r.body_sha256,
		COALESCE((SELECT p.from_status FROM replays p WHERE p.provider = r.provider AND p.event_id = r.event_id ORDER BY p.id LIMIT 1), r.status),
		r.source, r.received_at, r.prev_hash, r.row_hash FROM receipts r WHERE r.id > ? ORDER BY r.id`, afterID)
	if err != nil {
		return fmt.Errorf("read receipts: %w", err)
	}
	defer rows.Close()
	var l chainhash.ReceiptLink
	for rows.Next() {
		if err := rows.Scan(&l.ID, &l.Provider, &l.EventID, &l.EventType, &l.BodySHA256, &l.Status, &l.Source, &l.ReceivedAt,
			&l.PrevHash, &l.RowHash); err != nil {
			return fmt.Errorf("read receipts: %w", err)
		}
		if err := fn(&l); err != nil {
			return err
		}
	}
	return rows.Err()
}

// migrationSteps are Go code a migration needs after its SQL, in the same
// transaction: SQLite has no SHA-256 to compute hashes with, nor a way to
// alter a CHECK constraint.
var migrationSteps = map[int]func(context.Context, *sqlx.Tx) error{
	5:  chainReceipts,
	17: loosenChecks(looseChecks0017),
	19: loosenChecks(looseChecks0019),
	26: sealCloses,
}

// postgresMigrationSteps are PostgreSQL's: the hashes the ledger computes
// are computed by the same Go code on both backends.
var postgresMigrationSteps = map[int]func(context.Context, *sqlx.Tx) error{
	26: sealCloses,
}

// chainReceipts links every existing receipt in id order, as the writer would
// have, and moves the chain head to the last. The order and the hashed facts
// depend only on the stored rows, so the same database always chains alike.
// Receipts deleted before (retention) leave id gaps; each receipt links to
// the one before it that exists, so verify sees the link hold across the gap.
func chainReceipts(ctx context.Context, tx *sqlx.Tx) error {
	update, err := tx.PreparexContext(ctx, `UPDATE receipts SET prev_hash = ?, row_hash = ? WHERE id = ?`)
	if err != nil {
		return err
	}
	defer update.Close()
	lastID, last := int64(0), chainhash.Genesis
	// Updating rows behind the rowid-ordered cursor is safe in SQLite: the
	// ids do not change, so no row moves ahead of the scan.
	err = scanReceiptLinks(ctx, tx, 0, func(l *chainhash.ReceiptLink) error {
		l.PrevHash = last
		l.RowHash = l.Hash(l.PrevHash)
		if _, err := update.ExecContext(ctx, l.PrevHash, l.RowHash, l.ID); err != nil {
			return fmt.Errorf("chain receipt %d: %w", l.ID, err)
		}
		lastID, last = l.ID, l.RowHash
		return nil
	})
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `UPDATE chain_head SET receipt_id = ?, receipt_hash = ? WHERE id = 1`, lastID, last)
	return err
}
