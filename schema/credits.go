package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookledger/hookledger/chainhash"
	"github.com/jmoiron/sqlx"
)

// The credit ledger (credit_entries, migration 0029): grants, burns, voids
// and expiries, appended in id order and chained. Grants, voids and
// expiries are written in the writer's transaction, burns in the close's;
// both hold the write lock (on PostgreSQL the chain head's row), so the
// next id and the previous hash read here are the chain's end.

// versionCredits is the migration that created credit_entries.
const versionCredits = 29

// CreditEntry is one credit_entries row.
type CreditEntry = chainhash.CreditEntry

// ErrNoCredits means the database predates credits (migration 0029); a
// read-only open does not migrate.
var ErrNoCredits = errors.New("the database predates credits (migration 0029): run hookledger migrate")

const creditColumns = `id, kind, grant_id, customer_id, currency, amount, balance, category, priority,
	effective_at, expires_at, invoice_id, reason, actor, recorded_at, prev_hash, row_hash`

// CreditFilter selects credit entries: a customer's ("" every customer's),
// one grant's ("" every grant's), or those recorded before a time (0: any).
type CreditFilter struct {
	Customer string
	GrantID  string
	Before   int64 // recorded_at < Before
	// Burns of the invoices FromInvoice..ToInvoice (both 0: no such bound).
	FromInvoice, ToInvoice int64
	AfterID                int64 // id > AfterID
}

func creditEntries(ctx context.Context, q sqlx.QueryerContext, f CreditFilter) ([]CreditEntry, error) {
	query, args := `SELECT `+creditColumns+` FROM credit_entries WHERE 1=1`, []any{}
	if f.Customer != "" {
		query, args = query+` AND customer_id = ?`, append(args, f.Customer)
	}
	if f.GrantID != "" {
		query, args = query+` AND grant_id = ?`, append(args, f.GrantID)
	}
	if f.ToInvoice != 0 {
		query, args = query+` AND kind = 'burn' AND invoice_id BETWEEN ? AND ?`, append(args, f.FromInvoice, f.ToInvoice)
	}
	if f.Before != 0 {
		query, args = query+` AND recorded_at < ?`, append(args, f.Before)
	}
	if f.AfterID != 0 {
		query, args = query+` AND id > ?`, append(args, f.AfterID)
	}
	var out []CreditEntry
	if err := sqlx.SelectContext(ctx, q, &out, query+` ORDER BY id`, args...); err != nil {
		if predates(ctx, q, versionCredits) {
			return nil, ErrNoCredits
		}
		return nil, fmt.Errorf("read credit entries: %w", err)
	}
	return out, nil
}

// lastCredit is the end of the credit chain: its last id, hash and
// recorded_at (0, Genesis, 0: no entry yet).
func lastCredit(ctx context.Context, q sqlx.QueryerContext) (CreditEntry, error) {
	var e CreditEntry
	err := sqlx.GetContext(ctx, q, &e, `SELECT `+creditColumns+` FROM credit_entries ORDER BY id DESC LIMIT 1`)
	if errors.Is(notFound(err), ErrNotFound) {
		return CreditEntry{RowHash: chainhash.Genesis}, nil
	}
	if err != nil {
		if predates(ctx, q, versionCredits) {
			return CreditEntry{}, ErrNoCredits
		}
		return CreditEntry{}, fmt.Errorf("read the credit chain's end: %w", err)
	}
	return e, nil
}

func insertCredit(ctx context.Context, q sqlx.ExecerContext, e CreditEntry) error {
	_, err := q.ExecContext(ctx, `INSERT INTO credit_entries (`+creditColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, e.Kind, e.GrantID, e.Customer, e.Currency, e.Amount, e.Balance, e.Category, e.Priority,
		e.EffectiveAt, e.ExpiresAt, e.InvoiceID, e.Reason, e.Actor, e.RecordedAt, e.PrevHash, e.RowHash)
	if err != nil {
		return fmt.Errorf("insert credit %s of grant %s: %w", e.Kind, e.GrantID, err)
	}
	return nil
}

// CreditEntries reads the entries f selects, in id order.
func (r ledgerReads) CreditEntries(ctx context.Context, f CreditFilter) ([]CreditEntry, error) {
	return creditEntries(ctx, r.q, f)
}

// LastCredit reads the end of the credit chain.
func (r ledgerReads) LastCredit(ctx context.Context) (CreditEntry, error) {
	return lastCredit(ctx, r.q)
}

// CreditEntries: see ledgerReads; on the read pool.
func (db *DB) CreditEntries(ctx context.Context, f CreditFilter) ([]CreditEntry, error) {
	return creditEntries(ctx, db.Read, f)
}

// LastCredit: see ledgerReads; on the read pool.
func (db *DB) LastCredit(ctx context.Context) (CreditEntry, error) { return lastCredit(ctx, db.Read) }

// CreditEntries reads the entries f selects in the writer's transaction.
func (b Batch) CreditEntries(ctx context.Context, f CreditFilter) ([]CreditEntry, error) {
	return creditEntries(ctx, b.tx, f)
}

// LastCredit reads the end of the credit chain in the writer's transaction.
func (b Batch) LastCredit(ctx context.Context) (CreditEntry, error) { return lastCredit(ctx, b.tx) }

// InsertCreditEntry appends e (linked by the caller) in the writer's transaction.
func (b Batch) InsertCreditEntry(ctx context.Context, e CreditEntry) error {
	return insertCredit(ctx, b.tx, e)
}

// InsertCreditEntry appends a burn (linked by the caller) in the close's
// transaction, with the invoice it pays.
func (tx *CloseTx) InsertCreditEntry(ctx context.Context, e CreditEntry) error {
	return insertCredit(ctx, tx.tx, e)
}

// LatestCloseCutoff is the highest cutoff of any close (0: none), in the
// writer's transaction: a credit entry is recorded no earlier, so that no
// close counts an entry written after it.
func (b Batch) LatestCloseCutoff(ctx context.Context) (int64, error) {
	var c int64
	if err := b.tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(cutoff), 0) FROM period_closes`).Scan(&c); err != nil {
		return 0, fmt.Errorf("read the latest close's cutoff: %w", err)
	}
	return c, nil
}

// CreditsDue lists the grants whose expiry has passed at now and that
// have neither an expiry nor a void row yet, in the writer's transaction.
func (b Batch) CreditsDue(ctx context.Context, now int64) ([]string, error) {
	var ids []string
	err := sqlx.SelectContext(ctx, b.tx, &ids, `SELECT g.grant_id FROM credit_entries g
		WHERE g.kind = 'grant' AND g.expires_at <> 0 AND g.expires_at <= ?
		AND NOT EXISTS (SELECT 1 FROM credit_entries e WHERE e.grant_id = g.grant_id AND e.kind IN ('void', 'expiry'))
		ORDER BY g.id`, now)
	if err != nil {
		return nil, fmt.Errorf("read the credits due to expire: %w", err)
	}
	return ids, nil
}

// CreditRowHash reads the row_hash of credit entry id (ErrNotFound: none).
func (db *DB) CreditRowHash(ctx context.Context, id int64) ([]byte, error) {
	var h []byte
	err := db.Read.QueryRowxContext(ctx, `SELECT row_hash FROM credit_entries WHERE id = ?`, id).Scan(&h)
	if err != nil && !errors.Is(notFound(err), ErrNotFound) && predates(ctx, db.Read, versionCredits) {
		return nil, ErrNoCredits
	}
	return h, notFound(err)
}
