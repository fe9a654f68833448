package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/chainhash"
)

// Close seals (migration 0026): every close's count and digest of the
// invoices it wrote, chained close after close. The ledger computes the
// hashes (chainhash.CloseSeal); storage keeps and reads them.

// versionSealed is the migration that added close_seals.
const versionSealed = 26

// ErrNotSealed means the database predates close seals (migration 0026); a
// read-only open does not migrate.
var ErrNotSealed = errors.New("the database predates close seals (migration 0026): run `hookledger migrate`")

// SealedClose is one close with its seal (a zero Seal when it has none):
// what the closes' chain commits to, in close id order.
type SealedClose struct {
	PeriodClose
	Sealed bool // a close_seals row exists for it
	Seal   chainhash.CloseSeal
}

// Link is the close's fields with its seal's, as the chain hashes them.
func (c *SealedClose) Link() chainhash.CloseSeal {
	s := c.Seal
	s.CloseID, s.Customer, s.Period, s.TZ = c.ID, c.Customer, c.Period, c.TZ
	s.PeriodStart, s.PeriodEnd, s.GraceMS, s.Cutoff, s.LedgerHead, s.ClosedAt = c.PeriodStart, c.PeriodEnd, c.GraceMS, c.Cutoff, c.LedgerHead, c.ClosedAt
	return s
}

// SealedCloses reads every close with its seal, in close id order, and the
// seals whose close is missing (orphans, in close id order).
func (r ledgerReads) SealedCloses(ctx context.Context) (closes []SealedClose, orphans []chainhash.CloseSeal, err error) {
	return sealedCloses(ctx, r.q)
}

// SealedCloses reads every close with its seal (see ledgerReads).
func (db *DB) SealedCloses(ctx context.Context) ([]SealedClose, []chainhash.CloseSeal, error) {
	return db.reads().SealedCloses(ctx)
}

type sealRow struct {
	CloseID        int64  `db:"close_id"`
	Invoices       int64  `db:"invoices"`
	InvoicesDigest []byte `db:"invoices_digest"`
	PrevHash       []byte `db:"prev_hash"`
	RowHash        []byte `db:"row_hash"`
}

func (s sealRow) seal() chainhash.CloseSeal {
	return chainhash.CloseSeal{CloseID: s.CloseID, Invoices: s.Invoices, InvoicesDigest: s.InvoicesDigest, PrevHash: s.PrevHash, RowHash: s.RowHash}
}

func sealedCloses(ctx context.Context, q sqlx.QueryerContext) ([]SealedClose, []chainhash.CloseSeal, error) {
	var seals []sealRow
	if err := sqlx.SelectContext(ctx, q, &seals, `SELECT close_id, invoices, invoices_digest, prev_hash, row_hash
		FROM close_seals ORDER BY close_id`); err != nil {
		if predates(ctx, q, versionSealed) {
			return nil, nil, ErrNotSealed
		}
		return nil, nil, err
	}
	var plain []PeriodClose
	if err := sqlx.SelectContext(ctx, q, &plain, `SELECT `+closeColumns+` FROM period_closes ORDER BY id`); err != nil {
		return nil, nil, err
	}
	closes := make([]SealedClose, len(plain))
	for i, c := range plain {
		closes[i].PeriodClose = c
	}
	byID := make(map[int64]int, len(closes))
	for i, c := range closes {
		byID[c.ID] = i
	}
	var orphans []chainhash.CloseSeal
	for _, s := range seals {
		if i, ok := byID[s.CloseID]; ok {
			closes[i].Sealed, closes[i].Seal = true, s.seal()
		} else {
			orphans = append(orphans, s.seal())
		}
	}
	return closes, orphans, nil
}

// LastCloseSeal is the end of the closes' chain: the last seal's close id
// and row hash (0 and chainhash.Genesis when nothing was closed yet).
func (r ledgerReads) LastCloseSeal(ctx context.Context) (int64, []byte, error) {
	return lastCloseSeal(ctx, r.q)
}

// LastCloseSeal: see ledgerReads; on the read pool.
func (db *DB) LastCloseSeal(ctx context.Context) (int64, []byte, error) {
	return db.reads().LastCloseSeal(ctx)
}

func lastCloseSeal(ctx context.Context, q sqlx.QueryerContext) (int64, []byte, error) {
	var s sealRow
	err := sqlx.GetContext(ctx, q, &s, `SELECT close_id, invoices, invoices_digest, prev_hash, row_hash
		FROM close_seals ORDER BY close_id DESC LIMIT 1`)
	switch {
	case errors.Is(notFound(err), ErrNotFound):
		return 0, chainhash.Genesis, nil
	case err != nil && predates(ctx, q, versionSealed):
		return 0, nil, ErrNotSealed
	case err != nil:
		return 0, nil, fmt.Errorf("read the last close seal: %w", err)
	}
	return s.CloseID, s.RowHash, nil
}

// SealedInvoices reads the id, close and stored digest of every invoice of
// a close from fromClose on (0: every invoice), in id order: what the
// seals count.
func (r ledgerReads) SealedInvoices(ctx context.Context, fromClose int64) (map[int64][]chainhash.SealedInvoice, error) {
	return sealedInvoices(ctx, r.q, fromClose)
}

// SealedInvoices: see ledgerReads; on the read pool.
func (db *DB) SealedInvoices(ctx context.Context, fromClose int64) (map[int64][]chainhash.SealedInvoice, error) {
	return db.reads().SealedInvoices(ctx, fromClose)
}

func sealedInvoices(ctx context.Context, q sqlx.QueryerContext, fromClose int64) (map[int64][]chainhash.SealedInvoice, error) {
	var rows []struct {
		ID      int64  `db:"id"`
		CloseID int64  `db:"close_id"`
		Digest  []byte `db:"digest"`
	}
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT id, close_id, digest FROM invoices WHERE close_id >= ? ORDER BY id`, fromClose); err != nil {
		return nil, err
	}
	byClose := map[int64][]chainhash.SealedInvoice{}
	for _, r := range rows {
		byClose[r.CloseID] = append(byClose[r.CloseID], chainhash.SealedInvoice{ID: r.ID, Digest: r.Digest})
	}
	return byClose, nil
}

// InsertCloseSeal stores the seal of a close, in the close's transaction,
// after its invoices.
func (tx *CloseTx) InsertCloseSeal(ctx context.Context, s chainhash.CloseSeal) error {
	return insertSeal(ctx, tx.tx, s)
}

// LastCloseSeal reads the end of the closes' chain inside the close.
func (tx *CloseTx) LastCloseSeal(ctx context.Context) (int64, []byte, error) {
	return lastCloseSeal(ctx, tx.tx)
}

// sealCloses seals every close made before migration 0026, in close id
// order, from the invoices each holds now, as a close would have: the same
// database always seals alike.
func sealCloses(ctx context.Context, tx *sqlx.Tx) error {
	closes, _, err := sealedCloses(ctx, tx)
	if err != nil {
		return err
	}
	invs, err := sealedInvoices(ctx, tx, 0)
	if err != nil {
		return err
	}
	prev := chainhash.Genesis
	for i := range closes {
		c := &closes[i]
		s := c.Link()
		s.Invoices, s.InvoicesDigest = int64(len(invs[c.ID])), chainhash.InvoicesDigest(invs[c.ID])
		s.PrevHash = prev
		s.RowHash = s.Hash(prev)
		if err := insertSeal(ctx, tx, s); err != nil {
			return fmt.Errorf("seal close %d: %w", c.ID, err)
		}
		prev = s.RowHash
	}
	return nil
}

func insertSeal(ctx context.Context, x sqlx.ExecerContext, s chainhash.CloseSeal) error {
	_, err := x.ExecContext(ctx, `INSERT INTO close_seals (close_id, invoices, invoices_digest, prev_hash, row_hash)
		VALUES (?, ?, ?, ?, ?)`, s.CloseID, s.Invoices, s.InvoicesDigest, s.PrevHash, s.RowHash)
	return err
}

// CloseSealHash reads the row_hash of close id's seal (ErrNotFound: none).
func (db *DB) CloseSealHash(ctx context.Context, closeID int64) ([]byte, error) {
	var h []byte
	err := db.Read.QueryRowxContext(ctx, `SELECT row_hash FROM close_seals WHERE close_id = ?`, closeID).Scan(&h)
	if err != nil && !errors.Is(notFound(err), ErrNotFound) && predates(ctx, db.Read, versionSealed) {
		return nil, ErrNotSealed
	}
	return h, notFound(err)
}
