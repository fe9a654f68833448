package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// The ledger's rows (metered_usage): append-only, hash-chained. The ledger
// computes ids and hashes; these methods store and read them.

// ErrNotFound means no row has the key asked for.
var ErrNotFound = errors.New("not found")

// LedgerRow is one metered_usage row as stored. Its quantity is Quantity ×
// 10^-Decimals: 6 decimals (micro-units) for every ordinary row, fewer for a
// row too large for micro-units in an int64 (migration 0014).
type LedgerRow struct {
	ID         int64  `db:"id"`
	Kind       string `db:"kind"` // usage | adjustment | void
	Provider   string `db:"provider"`
	EventID    string `db:"event_id"`
	Customer   string `db:"customer_id"`
	Meter      string `db:"meter"`
	Quantity   int64  `db:"quantity"`
	Decimals   int64  `db:"decimals"`
	Properties string `db:"properties"`
	Reason     string `db:"reason"`
	Ref        string `db:"ref"`
	OccurredAt int64  `db:"occurred_at"`
	RecordedAt int64  `db:"recorded_at"`
	PrevHash   []byte `db:"prev_hash"`
	RowHash    []byte `db:"row_hash"`
	// ReceiptID is the receipt that applied the row (0: none, an
	// adjustment), its key in metered_usage_receipt (migration 0015). It is
	// no part of the row's hash.
	ReceiptID int64 `db:"receipt_id"`
}

// LedgerFilter selects ledger rows; zero fields do not filter. Event time is
// half-open: From <= occurred_at < To.
type LedgerFilter struct {
	From, To       int64 // event time, unix ms
	Customer       string
	Meter          string
	RecordedBefore int64 // recorded_at < RecordedBefore
	AfterID        int64 // id > AfterID
	ThroughID      int64 // id <= ThroughID
	// NoIndex reads the table without its indexes (NOT INDEXED), so
	// benchmarks can compare against a table scan.
	NoIndex bool
}

// where is the FROM and WHERE clause of f. The conditions keep this order:
// the statements (and so their plans) are the ones the 10M-row benchmark
// measured.
func (f LedgerFilter) where() (string, []any) {
	var where []string
	var args []any
	add := func(cond string, arg any) { where, args = append(where, cond), append(args, arg) }
	if f.Customer != "" {
		add("customer_id = ?", f.Customer)
	}
	if f.Meter != "" {
		add("meter = ?", f.Meter)
	}
	if f.From != 0 {
		add("occurred_at >= ?", f.From)
	}
	if f.To != 0 {
		add("occurred_at < ?", f.To)
	}
	if f.RecordedBefore != 0 {
		add("recorded_at < ?", f.RecordedBefore)
	}
	if f.AfterID != 0 {
		add("id > ?", f.AfterID)
	}
	if f.ThroughID != 0 {
		add("id <= ?", f.ThroughID)
	}
	from := " FROM metered_usage"
	switch {
	case f.NoIndex:
		from += " NOT INDEXED"
	case f.Customer != "" && f.AfterID == 0 && (f.Meter != "" || f.From != 0 || f.To != 0):
		from += customerTimeIndex
	}
	if len(where) == 0 {
		return from, nil
	}
	return from + " WHERE " + strings.Join(where, " AND "), args
}

// customerTimeIndex steers SQLite's read of a customer's rows by meter or
// event time to metered_usage_customer (customer_id, meter, occurred_at),
// which tests the time in the index and fetches only the rows in range.
// Without statistics the planner ties it with 0020's (customer_id, id) and
// took that one, which fetches every row the customer has to test its time:
// a customer's month at 10,000,000 rows went from 0.6 ms to 6.9 ms. A read
// with a lower id bound (late usage) keeps the planner's choice, the id
// index, since its rows are the few newest. PostgreSQL has no such clause,
// nor the index (0025): byCustomerKey removes it there.
const customerTimeIndex = " INDEXED BY metered_usage_customer"

// insertLedgerRowSQL appends one ledger row with the id and hashes the chain
// assigned (the writer prepares it, stmtCache).
const insertLedgerRowSQL = `INSERT INTO metered_usage
	(id, kind, provider, event_id, customer_id, meter, quantity, decimals, properties, reason, ref, occurred_at, recorded_at, prev_hash, row_hash, receipt_id)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULLIF(?, 0))`

// InsertLedgerRow stores a row the chain linked.
// r is passed by value: the writer calls this per row, and a value keeps it
// off the heap.
func (b Batch) InsertLedgerRow(ctx context.Context, r LedgerRow) error {
	if b.pg != nil {
		b.pg.rows = append(b.pg.rows, r)
		return nil
	}
	_, err := b.tx.ExecContext(ctx, insertLedgerRowSQL, r.ID, r.Kind, r.Provider, r.EventID, r.Customer, r.Meter, r.Quantity, r.Decimals,
		r.Properties, r.Reason, r.Ref, r.OccurredAt, r.RecordedAt, r.PrevHash, r.RowHash, r.ReceiptID)
	return err
}

// CountLedgerRows counts every ledger row, usage and adjustments.
func (db *DB) CountLedgerRows(ctx context.Context) (int64, error) {
	var n int64
	err := db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM metered_usage`)
	return n, err
}

// UsageScan is a read of the rows Filter selects with the columns
// aggregation needs. Properties and row hashes cost bytes on every row, so
// they are read only when asked for.
type UsageScan struct {
	Filter     LedgerFilter
	Properties bool // else UsageRow.Properties is ""
	Hashes     bool // else UsageRow.RowHash is nil
}

// UsageRow is the part of a ledger row aggregation and invoice digests read.
type UsageRow struct {
	ID         int64
	Kind       string
	Customer   string
	Meter      string
	Quantity   int64 // × 10^-Decimals
	Decimals   int64
	OccurredAt int64
	Properties string
	RowHash    []byte // a fresh slice per row: the caller may keep it
}

// UsageSQL is the statement ScanUsage runs for s (exposed for EXPLAIN QUERY
// PLAN in the benchmarks).
func UsageSQL(s UsageScan) (string, []any) {
	props := "''"
	if s.Properties {
		props = "properties"
	}
	query := "SELECT id, kind, customer_id, meter, quantity, decimals, occurred_at, " + props
	if s.Hashes {
		query += ", row_hash"
	}
	from, args := s.Filter.where()
	return query + from, args
}

// HoldsUsage says whether any ledger row's event time is in [from, to)
// (unix ms). It asks for one row: a scan of the window stopped at its first
// row read the month's rows on PostgreSQL, whose plan for the whole window
// was a sequential scan (0.87 s at 10,000,000 rows).
func (db *DB) HoldsUsage(ctx context.Context, from, to int64) (bool, error) {
	var found bool
	err := db.Read.GetContext(ctx, &found, db.Read.Rebind(`SELECT EXISTS (SELECT 1 FROM metered_usage WHERE occurred_at >= ? AND occurred_at < ?)`), from, to)
	return found, err
}

// versionWideQuantities is the migration that added metered_usage.decimals
// and invoice_lines.quantity_wide.
const versionWideQuantities = 14

// wideErr says, for a read that failed on a database a read-only open left
// unmigrated, which migration it lacks.
func wideErr(ctx context.Context, q sqlx.QueryerContext, err error) error {
	if err != nil && predates(ctx, q, versionWideQuantities) {
		return fmt.Errorf("%w (the database predates wide quantities: run hookledger migrate, which keeps every row and hash as it is)", err)
	}
	return err
}

func scanUsage(ctx context.Context, q sqlx.QueryerContext, s UsageScan, fn func(*UsageRow) error) error {
	query, args := UsageSQL(s)
	rows, err := q.QueryContext(ctx, byCustomerKey(q, query), args...)
	if err != nil {
		return wideErr(ctx, q, err)
	}
	defer rows.Close()
	var r UsageRow
	dst := []any{&r.ID, &r.Kind, &r.Customer, &r.Meter, &r.Quantity, &r.Decimals, &r.OccurredAt, &r.Properties}
	if s.Hashes {
		dst = append(dst, &r.RowHash)
	}
	for rows.Next() {
		// Scan copies a BLOB into a new slice every time, so the hash is
		// the caller's to keep.
		if err := rows.Scan(dst...); err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return rows.Err()
}

const ledgerColumns = `id, kind, provider, event_id, customer_id, meter, quantity, decimals, properties, reason, ref,
	occurred_at, recorded_at, prev_hash, row_hash, COALESCE(receipt_id, 0) AS receipt_id`

// scanLedger calls fn with every row f selects, in id order, all columns.
// The row is reused between calls; its strings and slices are fresh per row.
func scanLedger(ctx context.Context, q sqlx.QueryerContext, f LedgerFilter, fn func(*LedgerRow) error) error {
	from, args := f.where()
	rows, err := q.QueryContext(ctx, byCustomerKey(q, `SELECT `+ledgerColumns+from+` ORDER BY id`), args...)
	if err != nil {
		return wideErr(ctx, q, err)
	}
	defer rows.Close()
	var r LedgerRow
	for rows.Next() {
		if err := rows.Scan(&r.ID, &r.Kind, &r.Provider, &r.EventID, &r.Customer, &r.Meter, &r.Quantity, &r.Decimals, &r.Properties, &r.Reason, &r.Ref,
			&r.OccurredAt, &r.RecordedAt, &r.PrevHash, &r.RowHash, &r.ReceiptID); err != nil {
			return err
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return rows.Err()
}

func getLedgerRow(ctx context.Context, q sqlx.QueryerContext, id int64) (*LedgerRow, error) {
	var r LedgerRow
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+ledgerColumns+` FROM metered_usage WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// eventLedgerRows reads an event's rows in id order (eventRows).
func eventLedgerRows(ctx context.Context, q sqlx.QueryerContext, provider, eventID string) ([]LedgerRow, error) {
	query, args, err := eventRows(ctx, q, ledgerColumns, provider, eventID)
	if err != nil {
		return nil, err
	}
	var rows []LedgerRow
	err = sqlx.SelectContext(ctx, q, &rows, query+` ORDER BY id`, args...)
	return rows, err
}

// eventRows is a SELECT of cols from an event's ledger rows, found through
// its receipt (migration 0015: no index over usage rows holds the event
// id): the rows its receipt applied and those no receipt applied
// (adjustments, and usage rows whose receipt was already deleted when 0015
// ran), two index probes. An event without a receipt (deleted by retention
// or otherwise, or never received) is looked for in every row: a scan,
// seconds at 10,000,000 rows, that the lookup of a stored event never pays.
// The receipt is read first, so that the statement, and its plan, is the
// one for the case.
func eventRows(ctx context.Context, q sqlx.QueryerContext, cols, provider, eventID string) (string, []any, error) {
	var receiptID int64
	err := q.QueryRowxContext(ctx, byEventKey(q, `SELECT id FROM receipts WHERE provider = ? AND event_id = ?`), provider, eventID).Scan(&receiptID)
	if errors.Is(err, sql.ErrNoRows) {
		return `SELECT ` + cols + ` FROM metered_usage WHERE provider = ? AND event_id = ?`, []any{provider, eventID}, nil
	}
	if err != nil {
		return "", nil, err
	}
	return `SELECT ` + cols + ` FROM metered_usage WHERE receipt_id = ? AND provider = ? AND event_id = ?
		UNION ALL SELECT ` + cols + ` FROM metered_usage WHERE receipt_id IS NULL AND provider = ? AND event_id = ?`,
		[]any{receiptID, provider, eventID, provider, eventID}, nil
}

// adjustmentsOf reads customer's corrections (adjustments and voids) whose
// ref is one of refs, through the customer index.
func adjustmentsOf(ctx context.Context, q sqlx.QueryerContext, customer string, refs []string) ([]LedgerRow, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(refs)+1)
	args = append(args, customer)
	for _, r := range refs {
		args = append(args, r)
	}
	var rows []LedgerRow
	err := sqlx.SelectContext(ctx, q, &rows, byCustomerKey(q, `SELECT `+ledgerColumns+` FROM metered_usage
			WHERE customer_id = ? AND kind <> 'usage' AND ref IN (?`+strings.Repeat(", ?", len(refs)-1)+`)`), args...)
	return rows, err
}

func ledgerMeters(ctx context.Context, q sqlx.QueryerContext, f LedgerFilter) ([]string, error) {
	from, args := f.where()
	var meters []string
	err := sqlx.SelectContext(ctx, q, &meters, byCustomerKey(q, `SELECT DISTINCT meter`+from+` ORDER BY meter`), args...)
	return meters, err
}

// periodCustomers lists the distinct customers of the rows f selects, sorted.
func periodCustomers(ctx context.Context, q sqlx.QueryerContext, f LedgerFilter) ([]string, error) {
	from, args := f.where()
	var customers []string
	err := sqlx.SelectContext(ctx, q, &customers, byCustomerKey(q, `SELECT DISTINCT customer_id`+from+` ORDER BY customer_id`), args...)
	return customers, err
}

// What an adjustment's ref names, resolved inside the writer's transaction:
// the customer it belongs to and the event time it corrects. ErrNotFound
// when it does not exist.

func rowOwner(ctx context.Context, q sqlx.QueryerContext, id int64) (customer string, occurredAt int64, err error) {
	err = q.QueryRowxContext(ctx, `SELECT customer_id, occurred_at FROM metered_usage WHERE id = ?`, id).Scan(&customer, &occurredAt)
	return customer, occurredAt, notFound(err)
}

func invoiceOwner(ctx context.Context, q sqlx.QueryerContext, id int64) (customer string, periodStart int64, err error) {
	err = q.QueryRowxContext(ctx, `SELECT customer_id, period_start FROM invoices WHERE id = ?`, id).Scan(&customer, &periodStart)
	return customer, periodStart, notFound(err)
}

// eventOwner prefers the event's row for meter, else its first row.
func eventOwner(ctx context.Context, q sqlx.QueryerContext, provider, eventID, meter string) (customer string, occurredAt int64, err error) {
	query, args, err := eventRows(ctx, q, `id, meter, customer_id, occurred_at`, provider, eventID)
	if err != nil {
		return "", 0, err
	}
	err = q.QueryRowxContext(ctx, `SELECT customer_id, occurred_at FROM (`+query+`) AS e ORDER BY meter = ? DESC, id LIMIT 1`,
		append(args, meter)...).Scan(&customer, &occurredAt)
	return customer, occurredAt, notFound(err)
}

func notFound(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// GrowWriteCache sets the write connection's page cache to kib KiB, for bulk
// appends (`dev seed`): a larger cache keeps the random-order index inserts
// of a large seed off the disk. It affects only this process.
func (db *DB) GrowWriteCache(ctx context.Context, kib int64) error {
	if db.Postgres() {
		return nil // the server's shared_buffers, not ours
	}
	_, err := db.Write.ExecContext(ctx, fmt.Sprintf(`PRAGMA cache_size = -%d`, kib))
	return err
}

// QueryPlan is SQLite's EXPLAIN QUERY PLAN of query, one step each: the
// large-ledger benchmarks log it beside their figures.
func (db *DB) QueryPlan(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := db.Read.QueryxContext(ctx, "EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return nil, err
		}
		out = append(out, detail)
	}
	return out, rows.Err()
}
