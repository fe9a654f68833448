package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Closing a period: one write transaction that records the close, reads the
// ledger up to its head and writes the invoices, so the ingestion cutoff and
// the highest ledger id an invoice covers describe the same moment.

// PeriodClose is one period_closes row. Customer "" is a close for all customers.
type PeriodClose struct {
	ID          int64  `db:"id"`
	Customer    string `db:"customer_id"`
	Period      string `db:"period"`
	TZ          string `db:"tz"`
	PeriodStart int64  `db:"period_start"`
	PeriodEnd   int64  `db:"period_end"`
	GraceMS     int64  `db:"grace_ms"`
	Cutoff      int64  `db:"cutoff"`
	LedgerHead  int64  `db:"ledger_head"`
	ClosedAt    int64  `db:"closed_at"`
}

const closeColumns = `id, customer_id, period, tz, period_start, period_end, grace_ms, cutoff, ledger_head, closed_at`

// periodCloses reads every close that applies to customer scope (its own and
// the closes for all), or every close when scope is "".
func periodCloses(ctx context.Context, q sqlx.QueryerContext, scope string) ([]PeriodClose, error) {
	query := `SELECT ` + closeColumns + ` FROM period_closes`
	var args []any
	if scope != "" {
		query, args = query+` WHERE customer_id IN ('', ?)`, append(args, scope)
	}
	var closes []PeriodClose
	err := sqlx.SelectContext(ctx, q, &closes, query, args...)
	return closes, err
}

// ErrRollback, returned by a CloseTx callback, ends the transaction without
// committing and without an error: a dry run, or a close that found its
// period already closed.
var ErrRollback = errors.New("roll back")

// CloseTx is the write transaction of one period close. It reads the ledger
// (the methods it shares with DB) as of its BEGIN IMMEDIATE: no row can
// commit until it ends.
type CloseTx struct {
	ledgerReads
	tx              *sqlx.Tx
	insInv, insLine *sqlx.Stmt // prepared on first use
}

// CloseTx runs fn in one write transaction (BEGIN IMMEDIATE), committing if
// fn returns nil and rolling back otherwise (ErrRollback: quietly). On
// PostgreSQL it first locks the chain head's row, which every write batch
// takes before it appends: no receiver appends while the close runs.
func (db *DB) CloseTx(ctx context.Context, fn func(*CloseTx) error) error {
	tx, err := db.Write.BeginTxx(ctx, nil) // BEGIN IMMEDIATE (DSN _txlock)
	if err != nil {
		return fmt.Errorf("close: begin: %w", err)
	}
	defer tx.Rollback()
	if db.Postgres() {
		if _, err := tx.ExecContext(ctx, latestHeadSQL+` FOR UPDATE`); err != nil {
			return fmt.Errorf("close: lock the chain head: %w", err)
		}
	}
	ct := &CloseTx{ledgerReads: ledgerReads{tx}, tx: tx}
	err = fn(ct)
	ct.closeStatements()
	if errors.Is(err, ErrRollback) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("close: commit: %w", err)
	}
	return nil
}

func (tx *CloseTx) closeStatements() {
	for _, st := range []*sqlx.Stmt{tx.insInv, tx.insLine} {
		if st != nil {
			st.Close()
		}
	}
}

// LatestHead reads the chain head inside the close.
func (tx *CloseTx) LatestHead(ctx context.Context) (ChainHead, error) { return latestHead(ctx, tx.tx) }

// OverlappingCloses reads every close whose period overlaps [start, end), in id order.
func (r ledgerReads) OverlappingCloses(ctx context.Context, start, end int64) ([]PeriodClose, error) {
	var closes []PeriodClose
	err := sqlx.SelectContext(ctx, r.q, &closes, `SELECT `+closeColumns+`
		FROM period_closes WHERE period_start < ? AND period_end > ? ORDER BY id`, end, start)
	return closes, err
}

// ClosedCustomers lists the customers whose period [start, end) was closed
// or invoiced by a close of their own.
func (r ledgerReads) ClosedCustomers(ctx context.Context, start, end int64) ([]string, error) {
	var done []string
	err := sqlx.SelectContext(ctx, r.q, &done, `SELECT customer_id FROM period_closes WHERE period_start = ? AND period_end = ? AND customer_id != ''
			UNION SELECT customer_id FROM invoices WHERE period_start = ? AND period_end = ?`, start, end, start, end)
	return done, err
}

// LedgerRowRecordedAt is the recorded_at of ledger row id.
func (r ledgerReads) LedgerRowRecordedAt(ctx context.Context, id int64) (int64, error) {
	var at int64
	err := r.q.QueryRowxContext(ctx, `SELECT recorded_at FROM metered_usage WHERE id = ?`, id).Scan(&at)
	return at, notFound(err)
}

// InsertPeriodClose records c (its ID is ignored) and returns its id: the
// next after the highest, chosen in the close's transaction (which no other
// close runs beside). Not a sequence: a dry run's rolled-back close must
// leave the id (and so the invoice digests) to the real close, and
// PostgreSQL's sequences do not roll back.
func (tx *CloseTx) InsertPeriodClose(ctx context.Context, c PeriodClose) (int64, error) {
	var id int64
	err := tx.tx.QueryRowxContext(ctx, `INSERT INTO period_closes
		(id, customer_id, period, tz, period_start, period_end, grace_ms, cutoff, ledger_head, closed_at)
		SELECT COALESCE(MAX(id), 0) + 1, ?, ?, ?, ?, ?, ?, ?, ?, ? FROM period_closes RETURNING id`,
		c.Customer, c.Period, c.TZ, c.PeriodStart, c.PeriodEnd, c.GraceMS, c.Cutoff, c.LedgerHead, c.ClosedAt).Scan(&id)
	return id, err
}

// NextInvoiceID is the id the next invoice gets.
func (r ledgerReads) NextInvoiceID(ctx context.Context) (int64, error) {
	var id int64
	err := r.q.QueryRowxContext(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM invoices`).Scan(&id)
	return id, err
}

// NextCloseID is the id InsertPeriodClose gives the next close: what an
// invoice preview, which writes nothing, shows as its close's id.
func (r ledgerReads) NextCloseID(ctx context.Context) (int64, error) {
	var id int64
	err := r.q.QueryRowxContext(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM period_closes`).Scan(&id)
	return id, err
}

// InsertInvoice writes an invoice row. A close writes many, so the
// statement is prepared once per transaction.
func (tx *CloseTx) InsertInvoice(ctx context.Context, inv Invoice) error {
	if tx.insInv == nil {
		st, err := tx.tx.PreparexContext(ctx, `INSERT INTO invoices
		(`+invoiceColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		tx.insInv = st
	}
	_, err := tx.insInv.ExecContext(ctx, inv.ID, inv.CloseID, inv.Customer, inv.Period, inv.TZ, inv.PeriodStart, inv.PeriodEnd,
		inv.Cutoff, inv.LedgerHead, inv.ClosedAt, inv.Digest,
		inv.Plan, inv.Currency, inv.PriceSnapshot, inv.PriceDigest, inv.Fee, inv.TrueUp, inv.Total, inv.Parts)
	return err
}

// InsertInvoiceLine writes an invoice line row (prepared once per transaction).
func (tx *CloseTx) InsertInvoiceLine(ctx context.Context, l InvoiceLine) error {
	if tx.insLine == nil {
		st, err := tx.tx.PreparexContext(ctx, `INSERT INTO invoice_lines
		(`+lineColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		tx.insLine = st
	}
	_, err := tx.insLine.ExecContext(ctx, l.InvoiceID, l.LineNo, l.Customer, l.Meter, l.Aggregation, l.Property, l.Unit,
		l.Late, l.Period, l.TZ, l.PeriodStart, l.PeriodEnd, l.AfterID, l.ThroughID, l.Quantity, l.QuantityWide, l.Rows, l.Adjustments,
		l.MaxID, l.Digest, l.BilledBefore, l.PlanVersion, l.AmountPrecise, l.Amount, l.Charge, l.Dimensions, l.PartStart, l.PartEnd)
	return err
}

// Closing a month for every customer reads the month's rows once: at 10M
// rows that is ~800k rows, so that read avoids per-row allocations (RawBytes)
// and reads either an id range in rowid order or through the event-time index.

// PeriodRangeSQL is the probe for the id range holding the rows f selects.
func PeriodRangeSQL(f LedgerFilter) (string, []any) {
	where, args := f.where()
	return "SELECT MIN(id), MAX(id), COUNT(*)" + where, args
}

// PeriodRange returns the lowest and highest id and the number of the rows f
// selects (lo is 0 when there are none).
func (r ledgerReads) PeriodRange(ctx context.Context, f LedgerFilter) (lo, hi, n int64, err error) {
	query, args := PeriodRangeSQL(f)
	var l, h sql.NullInt64
	if err := r.q.QueryRowxContext(ctx, byCustomerKey(r.q, query), args...).Scan(&l, &h, &n); err != nil {
		return 0, 0, 0, err
	}
	return l.Int64, h.Int64, n, nil
}

// PeriodScan is the read of a close's period: the rows Filter selects, or,
// when Ranged, the rows with ids Lo..Hi and event time in [Filter.From,
// Filter.To), read in rowid order.
type PeriodScan struct {
	Filter     LedgerFilter
	Lo, Hi     int64
	Ranged     bool
	Properties bool // else PeriodRow.Properties is empty
}

// PeriodRow is one row of a period scan. Its byte slices are valid only
// until the callback returns (they point into the driver's buffers).
type PeriodRow struct {
	ID         int64
	Adjustment bool
	Void       bool
	Customer   []byte
	Meter      []byte
	Quantity   int64 // × 10^-Decimals
	Decimals   int64
	OccurredAt int64
	Properties []byte
	RowHash    []byte
}

// PeriodScanSQL is the statement ScanPeriod runs for s.
func PeriodScanSQL(s PeriodScan) (string, []any) {
	props := "''"
	if s.Properties {
		props = "properties"
	}
	// The CASE gives an integer on both engines (PostgreSQL's = is boolean).
	query := "SELECT id, CASE kind WHEN 'usage' THEN 0 WHEN 'adjustment' THEN 1 ELSE 2 END, customer_id, meter, quantity, decimals, occurred_at, " + props + ", row_hash"
	if s.Ranged {
		// "+occurred_at" keeps the planner off the event-time index: the
		// range is read in rowid order, one page after the next.
		return query + " FROM metered_usage WHERE id BETWEEN ? AND ? AND +occurred_at >= ? AND +occurred_at < ?",
			[]any{s.Lo, s.Hi, s.Filter.From, s.Filter.To}
	}
	where, args := s.Filter.where()
	return query + where, args
}

// ScanPeriod calls fn with every row of s.
func (lr ledgerReads) ScanPeriod(ctx context.Context, s PeriodScan, fn func(*PeriodRow) error) error {
	query, args := PeriodScanSQL(s)
	rows, err := lr.q.QueryContext(ctx, byCustomerKey(lr.q, query), args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		r                      PeriodRow
		adj                    int64
		cust, meter, props, rh sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&r.ID, &adj, &cust, &meter, &r.Quantity, &r.Decimals, &r.OccurredAt, &props, &rh); err != nil {
			return err
		}
		r.Adjustment, r.Void, r.Customer, r.Meter, r.Properties, r.RowHash = adj == 1, adj == 2, cust, meter, props, rh
		if err := fn(&r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// versionCloseExclusions is the migration that created close_exclusions.
const versionCloseExclusions = 33

// CloseExclusion is a customer a close for all customers could not invoice,
// and why (close_exclusions, migration 0033).
type CloseExclusion struct {
	CloseID  int64  `db:"close_id"`
	Customer string `db:"customer_id"`
	Error    string `db:"error"`
}

// InsertCloseExclusion records, in the close's transaction, that it could
// not invoice e.Customer.
func (tx *CloseTx) InsertCloseExclusion(ctx context.Context, e CloseExclusion) error {
	_, err := tx.tx.ExecContext(ctx, `INSERT INTO close_exclusions (close_id, customer_id, error) VALUES (?, ?, ?)`,
		e.CloseID, e.Customer, e.Error)
	if err != nil {
		return fmt.Errorf("record that close %d did not invoice %s: %w", e.CloseID, e.Customer, err)
	}
	return nil
}

// CloseExclusions reads every customer a close for all customers could not
// invoice, by close and customer; none on a database from before 0033.
func (r ledgerReads) CloseExclusions(ctx context.Context) ([]CloseExclusion, error) {
	var out []CloseExclusion
	err := sqlx.SelectContext(ctx, r.q, &out, `SELECT close_id, customer_id, error FROM close_exclusions ORDER BY close_id, customer_id`)
	if err != nil && predates(ctx, r.q, versionCloseExclusions) {
		return nil, nil
	}
	return out, err
}

// CloseExclusions: see ledgerReads; on the read pool.
func (db *DB) CloseExclusions(ctx context.Context) ([]CloseExclusion, error) {
	return db.reads().CloseExclusions(ctx)
}
