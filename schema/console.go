package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
}

// ReceiptPage asks for receipts newest first (by id, the order custody
// stored them in) below Before, matching every non-zero filter.
type ReceiptPage struct {
	Before                         int64 // only ids below it; 0: from the newest
	Provider, Type, Status, Source string
	From, To                       int64 // received_at, unix ms, half-open [From, To); 0: open
	Limit                          int
	// Window bounds how many receipts one page examines, newest first
	// below Before, so a filter that matches rarely costs a bounded scan
	// instead of the whole table; the caller continues below ScannedTo.
	Window int
}

// ReceiptPageResult is a page of receipts and how far down it looked.
type ReceiptPageResult struct {
	Receipts []ReceiptSummary
	// ScannedTo is the lowest id the page examined (0: it reached the
	// oldest receipt). When fewer than Limit receipts matched and ScannedTo
	// is not 0, older matches may exist below ScannedTo.
	ScannedTo int64
}

const summaryColumns = `id, provider, event_id, event_type, status, error, source, received_at, length(body) AS body_bytes`

// ConsoleReceipts reads one page of receipts for the console's event list.
// New receipts only ever get higher ids, so a page below Before stays the
// same page while events arrive: paging on the id neither skips nor repeats.
func (db *DB) ConsoleReceipts(ctx context.Context, p ReceiptPage) (ReceiptPageResult, error) {
	before := p.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	where, args := []string{"1 = 1"}, []any{before, p.Window}
	for _, f := range []struct {
		col, v string
	}{{"provider", p.Provider}, {"event_type", p.Type}, {"status", p.Status}, {"source", p.Source}} {
		if f.v != "" {
			where, args = append(where, f.col+" = ?"), append(args, f.v)
		}
	}
	if p.From != 0 {
		where, args = append(where, "received_at >= ?"), append(args, p.From)
	}
	if p.To != 0 {
		where, args = append(where, "received_at < ?"), append(args, p.To)
	}
	args = append(args, p.Limit)
	// The inner query walks the rowid b-tree down from Before and stops
	// after Window rows; the outer one filters that window. Body bytes are
	// measured, never read.
	query := `SELECT ` + summaryColumns + ` FROM (
		SELECT id, provider, event_id, event_type, status, error, source, received_at, body
		FROM receipts WHERE id < ? ORDER BY id DESC LIMIT ?) AS w
	WHERE ` + strings.Join(where, " AND ") + ` ORDER BY id DESC LIMIT ?`
	var res ReceiptPageResult
	if err := sqlx.SelectContext(ctx, db.Read, &res.Receipts, query, args...); err != nil {
		return res, fmt.Errorf("read receipts: %w", err)
	}
	if len(res.Receipts) >= p.Limit {
		res.ScannedTo = res.Receipts[len(res.Receipts)-1].ID
		return res, nil
	}
	// Fewer matches than asked: the whole window was examined. Where did it end?
	var low sql.NullInt64
	var n int
	err := db.Read.QueryRowxContext(ctx, `SELECT MIN(id), COUNT(*) FROM (SELECT id FROM receipts WHERE id < ? ORDER BY id DESC LIMIT ?) AS w`,
		before, p.Window).Scan(&low, &n)
	if err != nil {
		return res, fmt.Errorf("read receipts: %w", err)
	}
	if n == p.Window && low.Valid {
		res.ScannedTo = low.Int64
	}
	return res, nil
}

// ReceiptsByEventID finds the receipts of eventID under each provider
// named, through the (provider, event_id) index (on PostgreSQL the hash
// index on event_id).
func (db *DB) ReceiptsByEventID(ctx context.Context, providers []string, eventID string) ([]ReceiptSummary, error) {
	var out []ReceiptSummary
	for _, p := range providers {
		var rs []ReceiptSummary
		if err := sqlx.SelectContext(ctx, db.Read, &rs, `SELECT `+summaryColumns+` FROM receipts WHERE provider = ? AND event_id = ?`,
			p, eventID); err != nil {
			return nil, fmt.Errorf("find event %q: %w", eventID, err)
		}
		out = append(out, rs...)
	}
	return out, nil
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
// to the next through the (customer_id, meter, occurred_at) index: one index
// seek per customer listed.
func (db *DB) LedgerCustomers(ctx context.Context, after string, limit int) ([]string, error) {
	var out []string
	err := sqlx.SelectContext(ctx, db.Read, &out, `WITH RECURSIVE c(id, n) AS (
		SELECT (SELECT MIN(customer_id) FROM metered_usage WHERE customer_id > ?), 1
		UNION ALL
		SELECT (SELECT MIN(customer_id) FROM metered_usage WHERE customer_id > c.id), c.n + 1 FROM c
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
	err := sqlx.SelectContext(ctx, db.Read, &out, `SELECT o.message_id FROM outbox o JOIN receipts r ON r.id = o.receipt_id
		WHERE r.provider = ? AND r.event_id = ? ORDER BY o.destination`, provider, eventID)
	if err != nil && predates(ctx, db.Read, versionOutbox) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read outbox messages of %s/%s: %w", provider, eventID, err)
	}
	return out, nil
}
