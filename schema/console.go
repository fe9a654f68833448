package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
)

// The web console's reads (package console). Each is bounded by an index or
// by an explicit scan window, so a page costs the same on a large ledger as
// on a small one; the console's benchmark holds them to that.

// ReceiptSummary is one row of the console's event list: a receipt without
// its body, signature headers or chain link.
type ReceiptSummary struct {
	ID         int64  `db:"id"`
	Provider   string `db:"provider"`
	EventID    string `db:"event_id"`
	EventType  string `db:"event_type"`
	Status     string `db:"status"`
	Error      string `db:"error"`
	Source     string `db:"source"`
	ReceivedAt int64  `db:"received_at"`
	BodyBytes  *int64 `db:"body_bytes"` // nil when pruned
	// Usage is the event's usage rows in the ledger (none for an ignored or
	// failed event); with ReceiptPage.Customer, only that customer's rows on
	// the page.
	Usage []EventUsage `db:"-"`
}

// EventUsage is one usage row of an event, as the event list shows it: who,
// how much of what, and when it happened (event time).
type EventUsage struct {
	RowID      int64  `db:"row_id"`
	Provider   string `db:"provider"`
	EventID    string `db:"event_id"`
	Customer   string `db:"customer_id"`
	Meter      string `db:"meter"`
	Quantity   int64  `db:"quantity"` // × 10^-Decimals
	Decimals   int64  `db:"decimals"`
	OccurredAt int64  `db:"occurred_at"`
}

// ReceiptPage asks for receipts newest first (by id, the order custody
// stored them in) below Before, matching every non-zero filter.
//
// With Customer, the page walks that customer's usage rows in the ledger
// instead, newest first by ledger row id (migration 0020's index), and
// Before and ScannedTo are ledger row ids: the receipts shown are those
// rows' events, each with the customer's rows on the page.
type ReceiptPage struct {
	Before                         int64 // only ids below it; 0: from the newest
	Provider, Type, Status, Source string
	Customer                       string
	From, To                       int64 // received_at, unix ms, half-open [From, To); 0: open
	Limit                          int   // receipts a page holds (with Customer: usage rows)
	// Window bounds how many receipts (with Customer: usage rows) one page
	// examines, newest first below Before, so a filter that matches rarely
	// costs a bounded scan instead of the whole table; the caller continues
	// below Next.
	Window int
}

// ReceiptPageResult is a page of receipts and where the next one starts.
type ReceiptPageResult struct {
	Receipts []ReceiptSummary
	// Next is the Before of the next (older) page; 0: this is the last.
	// Searched says the page examined its whole window without finding
	// Limit matches: older matches may exist below Next.
	Next     int64
	Searched bool
}

const summaryColumns = `id, provider, event_id, event_type, status, error, source, received_at, length(body) AS body_bytes`

// ConsoleReceipts reads one page of receipts for the console's event list,
// each with its usage rows. New receipts (and ledger rows) only ever get
// higher ids, so a page below Before stays the same page while events
// arrive: paging on the id neither skips nor repeats.
func (db *DB) ConsoleReceipts(ctx context.Context, p ReceiptPage) (ReceiptPageResult, error) {
	if p.Customer != "" {
		return db.customerReceipts(ctx, p)
	}
	res, err := db.windowReceipts(ctx, p)
	if err != nil {
		return res, err
	}
	return res, db.attachUsage(ctx, res.Receipts)
}

// receiptFilters are the conditions of p's filters, on receipts aliased r.
func receiptFilters(p ReceiptPage) ([]string, []any) {
	where, args := []string{"1 = 1"}, []any{}
	for _, f := range []struct {
		col, v string
	}{{"r.provider", p.Provider}, {"r.event_type", p.Type}, {"r.status", p.Status}, {"r.source", p.Source}} {
		if f.v != "" {
			where, args = append(where, f.col+" = ?"), append(args, f.v)
		}
	}
	if p.From != 0 {
		where, args = append(where, "r.received_at >= ?"), append(args, p.From)
	}
	if p.To != 0 {
		where, args = append(where, "r.received_at < ?"), append(args, p.To)
	}
	return where, args
}

func below(before int64) int64 {
	if before <= 0 {
		return 1<<63 - 1
	}
	return before
}

// windowReceipts is a page of receipts walked down by receipt id: the inner
// query walks the rowid b-tree (PostgreSQL: the primary key) down from
// Before and stops after Window rows; the outer one filters that window.
// Body bytes are measured, never read.
func (db *DB) windowReceipts(ctx context.Context, p ReceiptPage) (ReceiptPageResult, error) {
	where, fargs := receiptFilters(p)
	args := append(append([]any{below(p.Before), p.Window}, fargs...), p.Limit+1)
	query := `SELECT ` + summaryColumns + ` FROM (
		SELECT id, provider, event_id, event_type, status, error, source, received_at, body
		FROM receipts WHERE id < ? ORDER BY id DESC LIMIT ?) AS r
	WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT ?`
	var res ReceiptPageResult
	if err := sqlx.SelectContext(ctx, db.Read, &res.Receipts, query, args...); err != nil {
		return res, fmt.Errorf("read receipts: %w", err)
	}
	if len(res.Receipts) > p.Limit {
		res.Receipts = res.Receipts[:p.Limit]
		res.Next = res.Receipts[p.Limit-1].ID
		return res, nil
	}
	// Fewer matches than asked: the whole window was examined. Where did it end?
	err := db.windowEnd(ctx, &res, `SELECT MIN(id), COUNT(*) FROM (SELECT id FROM receipts WHERE id < ? ORDER BY id DESC LIMIT ?) AS w`,
		p.Window, below(p.Before), p.Window)
	if err != nil {
		return res, fmt.Errorf("read receipts: %w", err)
	}
	return res, nil
}

// windowEnd sets res.Next to the lowest id a full window examined (it
// stopped there: older matches may follow), and leaves it 0 when the window
// reached the oldest row.
func (db *DB) windowEnd(ctx context.Context, res *ReceiptPageResult, query string, window int, args ...any) error {
	var low sql.NullInt64
	var n int
	if err := db.Read.QueryRowxContext(ctx, query, args...).Scan(&low, &n); err != nil {
		return err
	}
	if n == window && low.Valid {
		res.Next, res.Searched = low.Int64, true
	}
	return nil
}

// customerPageSQL is the statement of a customer's page and its inner
// window alone (whose end windowEnd reads), with their arguments.
func (db *DB) customerPageSQL(p ReceiptPage) (query string, args []any, inner string, innerArgs []any) {
	customer, cargs := `customer_id = ?`, []any{p.Customer}
	if db.Postgres() {
		customer, cargs = `hookledger_key(customer_id) = hookledger_key(?) AND customer_id = ?`, []any{p.Customer, p.Customer}
	}
	inner = `SELECT id, provider, event_id, customer_id, meter, quantity, decimals, occurred_at FROM metered_usage
		WHERE ` + customer + ` AND kind = 'usage' AND id < ? ORDER BY id DESC LIMIT ?`
	innerArgs = append(cargs, below(p.Before), p.Window)
	where, fargs := receiptFilters(p)
	query = keyJoins(db.Read, `SELECT r.id, r.provider, r.event_id, r.event_type, r.status, r.error, r.source, r.received_at,
		length(r.body) AS body_bytes, m.id AS row_id, m.customer_id, m.meter, m.quantity, m.decimals, m.occurred_at
	FROM (`+inner+`) AS m JOIN receipts r ON r.provider = m.provider AND r.event_id = m.event_id
	WHERE `+strings.Join(where, " AND ")+` ORDER BY m.id DESC LIMIT ?`)
	args = append(append(slices.Clip(innerArgs), fargs...), p.Limit+1)
	return query, args, inner, innerArgs
}

// customerReceipts is a page of one customer's events: the inner query walks
// the customer's usage rows down from Before through the (customer_id, id)
// index (migration 0020; on PostgreSQL on the customer id's digest) and
// stops after Window rows, each row finds its receipt through the receipts'
// unique key, and the outer query applies the other filters. A customer's
// page therefore costs at most Window index steps, however many receipts or
// customers the database holds. Before and Next are ledger row ids.
func (db *DB) customerReceipts(ctx context.Context, p ReceiptPage) (ReceiptPageResult, error) {
	query, args, inner, innerArgs := db.customerPageSQL(p)
	fail := func(err error) (ReceiptPageResult, error) {
		return ReceiptPageResult{}, fmt.Errorf("read the receipts of customer %q: %w", p.Customer, err)
	}
	rows, err := db.Read.QueryxContext(ctx, query, args...)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	var res ReceiptPageResult
	n, last := 0, int64(0)
	for rows.Next() {
		var r ReceiptSummary
		var u EventUsage
		if err := rows.Scan(&r.ID, &r.Provider, &r.EventID, &r.EventType, &r.Status, &r.Error, &r.Source, &r.ReceivedAt, &r.BodyBytes,
			&u.RowID, &u.Customer, &u.Meter, &u.Quantity, &u.Decimals, &u.OccurredAt); err != nil {
			return fail(err)
		}
		if n++; n > p.Limit { // one more than a page: there is a next page, below the last row kept
			res.Next = last
			break
		}
		last, u.Provider, u.EventID = u.RowID, r.Provider, r.EventID
		// An event's rows are written together, so they are neighbours here.
		if k := len(res.Receipts) - 1; k >= 0 && res.Receipts[k].ID == r.ID {
			res.Receipts[k].Usage = append(res.Receipts[k].Usage, u)
			continue
		}
		r.Usage = []EventUsage{u}
		res.Receipts = append(res.Receipts, r)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	if res.Next == 0 {
		if err := db.windowEnd(ctx, &res, `SELECT MIN(id), COUNT(*) FROM (`+inner+`) AS m`, p.Window, innerArgs...); err != nil {
			return fail(err)
		}
	}
	return res, nil
}

// receiptUsageSQL is attachUsage's statement for one receipt: the usage
// rows it applied, one probe of the (receipt_id, meter) key (migration 0015).
func (db *DB) receiptUsageSQL(r ReceiptSummary) (string, []any) {
	return `SELECT id AS row_id, provider, event_id, customer_id, meter, quantity, decimals, occurred_at
		FROM metered_usage WHERE receipt_id = ? AND kind = 'usage' ORDER BY id`, []any{r.ID}
}

// ExplainConsoleReceipts is the plan of the statements a page of the event
// list runs for p, as the database reports it (SQLite's EXPLAIN QUERY
// PLAN, PostgreSQL's EXPLAIN): with Customer, the customer's page; without,
// the lookup of the usage rows of the page's first receipt. On PostgreSQL sequential scans are
// disabled while it plans, so the plan shows the indexes the statement can
// use rather than what a small test table makes cheapest. For tests and
// benchmarks.
func (db *DB) ExplainConsoleReceipts(ctx context.Context, p ReceiptPage) (string, error) {
	var query string
	var args []any
	if p.Customer != "" {
		query, args, _, _ = db.customerPageSQL(p)
	} else {
		res, err := db.windowReceipts(ctx, p)
		if err != nil {
			return "", err
		}
		if len(res.Receipts) == 0 {
			return "", errors.New("explain: no receipts on the page")
		}
		query, args = db.receiptUsageSQL(res.Receipts[0])
	}
	if !db.Postgres() {
		var plan []struct {
			ID, Parent, NotUsed int
			Detail              string
		}
		if err := sqlx.SelectContext(ctx, db.Read, &plan, `EXPLAIN QUERY PLAN `+query, args...); err != nil {
			return "", err
		}
		var out []string
		for _, l := range plan {
			out = append(out, l.Detail)
		}
		return strings.Join(out, "\n"), nil
	}
	tx, err := db.Read.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return "", err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
		return "", err
	}
	var plan []string
	if err := sqlx.SelectContext(ctx, tx, &plan, `EXPLAIN `+query, args...); err != nil {
		return "", err
	}
	return strings.Join(plan, "\n"), nil
}

// attachUsage reads the usage rows of a page of receipts: one index lookup
// per receipt (a page is at most a few dozen), each a plan the database
// cannot get wrong, where one statement naming them all would leave the
// choice of index to statistics.
func (db *DB) attachUsage(ctx context.Context, rs []ReceiptSummary) error {
	for i := range rs {
		query, args := db.receiptUsageSQL(rs[i])
		if err := sqlx.SelectContext(ctx, db.Read, &rs[i].Usage, query, args...); err != nil {
			return fmt.Errorf("read the usage rows of %s/%s: %w", rs[i].Provider, rs[i].EventID, err)
		}
	}
	return nil
}

// ReceiptsByEventID finds the receipts of eventID under each provider
// named, through the (provider, event_id) index (on PostgreSQL its
// digest's, byEventKey).
func (db *DB) ReceiptsByEventID(ctx context.Context, providers []string, eventID string) ([]ReceiptSummary, error) {
	var out []ReceiptSummary
	for _, p := range providers {
		var rs []ReceiptSummary
		if err := sqlx.SelectContext(ctx, db.Read, &rs, byEventKey(db.Read, `SELECT `+summaryColumns+` FROM receipts WHERE provider = ? AND event_id = ?`),
			p, eventID); err != nil {
			return nil, fmt.Errorf("find event %q: %w", eventID, err)
		}
		out = append(out, rs...)
	}
	return out, db.attachUsage(ctx, out)
}

// ReceiptProviders lists the providers that hold receipts, sorted. It skips
// from one provider to the next through the (provider, event_id) index, so
// it reads one index entry per provider however many receipts there are.
func (db *DB) ReceiptProviders(ctx context.Context) ([]string, error) {
	var out []string
	err := sqlx.SelectContext(ctx, db.Read, &out, `WITH RECURSIVE p(name) AS (
		SELECT MIN(provider) FROM receipts
		UNION ALL
		SELECT (SELECT MIN(provider) FROM receipts WHERE provider > p.name) FROM p WHERE p.name IS NOT NULL)
	SELECT name FROM p WHERE name IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("list providers: %w", err)
	}
	return out, nil
}

// MinuteCount is how many receipts of one status arrived in one minute.
type MinuteCount struct {
	Status string `db:"status"`
	Minute int64  `db:"minute"` // unix ms / 60000
	N      int64  `db:"n"`
}

// ReceiptsPerMinute counts the receipts received in [from, to) (unix ms)
// per status and minute, over the receipts_status index (one range per
// status, no row decoded).
func (db *DB) ReceiptsPerMinute(ctx context.Context, from, to int64) ([]MinuteCount, error) {
	var out []MinuteCount
	for _, status := range []string{"applied", "ignored", "failed"} {
		var ms []MinuteCount
		if err := sqlx.SelectContext(ctx, db.Read, &ms, `SELECT status, received_at / 60000 AS minute, COUNT(*) AS n
			FROM receipts WHERE status = ? AND received_at >= ? AND received_at < ?
			GROUP BY status, received_at / 60000`, status, from, to); err != nil {
			return nil, fmt.Errorf("count receipts per minute: %w", err)
		}
		out = append(out, ms...)
	}
	return out, nil
}

// OldestFailedReceipt is the failed receipt received first, and how many
// receipts are failed (ErrNotFound: none).
func (db *DB) OldestFailedReceipt(ctx context.Context) (ReceiptSummary, int64, error) {
	var r ReceiptSummary
	err := sqlx.GetContext(ctx, db.Read, &r, `SELECT `+summaryColumns+` FROM receipts WHERE status = 'failed'
		ORDER BY received_at, id LIMIT 1`)
	if errors.Is(err, sql.ErrNoRows) {
		return r, 0, ErrNotFound
	}
	if err != nil {
		return r, 0, fmt.Errorf("oldest failed receipt: %w", err)
	}
	var n int64
	if err := sqlx.GetContext(ctx, db.Read, &n, `SELECT COUNT(*) FROM receipts WHERE status = 'failed'`); err != nil {
		return r, 0, fmt.Errorf("count failed receipts: %w", err)
	}
	return r, n, nil
}

// LedgerCustomers lists up to limit customers with ledger rows, in order,
// after the customer after ("" from the first). It skips from one customer
// to the next through an index: one index seek per customer listed. The
// index is the usage state's key, (customer_id, meter, period_start), once
// the usage state is built (serve builds it at start, and the writer keeps
// a row for every customer, meter and month it appends to): on PostgreSQL
// the ledger's own index of customers is by hookledger_key, in no order a
// skip can follow, and the same skip over the ledger took 38 s at
// 10,000,000 rows. Before the state is built, the ledger's
// (customer_id, meter, occurred_at) index serves (SQLite's, in order).
func (db *DB) LedgerCustomers(ctx context.Context, after string, limit int) ([]string, error) {
	table := "usage_state"
	if _, built, err := stateZone(ctx, db.Read); err != nil || !built {
		table = "metered_usage"
	}
	var out []string
	err := sqlx.SelectContext(ctx, db.Read, &out, `WITH RECURSIVE c(id, n) AS (
		SELECT (SELECT MIN(customer_id) FROM `+table+` WHERE customer_id > ?), 1
		UNION ALL
		SELECT (SELECT MIN(customer_id) FROM `+table+` WHERE customer_id > c.id), c.n + 1 FROM c
		WHERE c.id IS NOT NULL AND c.n < ?)
	SELECT id FROM c WHERE id IS NOT NULL`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list customers: %w", err)
	}
	return out, nil
}

// InvoiceSummary is an invoice in the console's list, with its line count.
type InvoiceSummary struct {
	Invoice
	Lines int64 `db:"line_count"`
	Late  int64 `db:"late_lines"`
}

// InvoicePage asks for invoices newest first (by id) below Before.
type InvoicePage struct {
	Before           int64 // 0: from the newest
	Customer, Period string
	Limit            int
}

// ConsoleInvoices reads one page of invoices, newest first.
func (db *DB) ConsoleInvoices(ctx context.Context, p InvoicePage) ([]InvoiceSummary, error) {
	before := p.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	query, args := `SELECT `+invoiceColumns+`,
		(SELECT COUNT(*) FROM invoice_lines l WHERE l.invoice_id = invoices.id) AS line_count,
		(SELECT COUNT(*) FROM invoice_lines l WHERE l.invoice_id = invoices.id AND l.late) AS late_lines
		FROM invoices WHERE id < ?`, []any{before}
	if p.Customer != "" {
		query, args = query+` AND customer_id = ?`, append(args, p.Customer)
	}
	if p.Period != "" {
		query, args = query+` AND period = ?`, append(args, p.Period)
	}
	var out []InvoiceSummary
	if err := sqlx.SelectContext(ctx, db.Read, &out, query+` ORDER BY id DESC LIMIT ?`, append(args, p.Limit)...); err != nil {
		return nil, invoicesErr(ctx, db.Read, err)
	}
	return out, nil
}

// ReceiptMessages lists the outbox message ids of provider's event eventID,
// by destination (the outbox's unique (receipt_id, destination) index); none
// on a database older than the outbox.
func (db *DB) ReceiptMessages(ctx context.Context, provider, eventID string) ([]string, error) {
	var out []string
	err := sqlx.SelectContext(ctx, db.Read, &out, byEventKey(db.Read, `SELECT o.message_id FROM outbox o JOIN receipts r ON r.id = o.receipt_id
		WHERE r.provider = ? AND r.event_id = ? ORDER BY o.destination`), provider, eventID)
	if err != nil && predates(ctx, db.Read, versionOutbox) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read outbox messages of %s/%s: %w", provider, eventID, err)
	}
	return out, nil
}

// ClosesForAll reads the closes for all customers (`invoice close --all`,
// scheduled closes), newest period first: one row per period closed, so the
// usage page's period picker can say which months are closed.
func (db *DB) ClosesForAll(ctx context.Context) ([]PeriodClose, error) {
	var out []PeriodClose
	err := sqlx.SelectContext(ctx, db.Read, &out, `SELECT `+closeColumns+` FROM period_closes WHERE customer_id = ''
		ORDER BY period_start DESC, id`)
	if err != nil && predates(ctx, db.Read, versionInvoices) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the closes for all customers: %w", err)
	}
	return out, nil
}
