package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Invoices and their lines, frozen when a period closes (closes.go writes
// them); the ledger computes their numbers and digests.

// ErrNoInvoices means the database predates invoices (migration 0002); a
// read-only open does not migrate.
var ErrNoInvoices = errors.New("the database predates invoices (migration 0002)")

// noInvoices marks the error of a read that found no invoices tables as
// ErrNoInvoices, keeping its text.
type noInvoices struct{ err error }

func (e noInvoices) Error() string   { return e.err.Error() }
func (e noInvoices) Unwrap() []error { return []error{e.err, ErrNoInvoices} }

// invoicesErr marks err ErrNoInvoices when the database predates the
// invoices tables (asked only after a read failed).
func invoicesErr(ctx context.Context, q sqlx.QueryerContext, err error) error {
	if err != nil && predates(ctx, q, versionInvoices) {
		return noInvoices{err}
	}
	if err != nil && predates(ctx, q, versionInvoiceMoney) {
		return fmt.Errorf("%w (the database predates money on invoices: run hookledger migrate, which keeps every invoice as it is)", err)
	}
	if err != nil && !predates(ctx, q, versionWideQuantities) && predates(ctx, q, versionLineDimensions) {
		return fmt.Errorf("%w (the database predates invoice lines by dimension: run hookledger migrate, which keeps every invoice as it is)", err)
	}
	if err != nil && !predates(ctx, q, versionLineDimensions) && predates(ctx, q, versionInvoiceParts) {
		return fmt.Errorf("%w (the database predates invoices split at a plan change: run hookledger migrate, which keeps every invoice as it is)", err)
	}
	return wideErr(ctx, q, err)
}

// versionInvoiceMoney is the migration that added money to invoices.
const versionInvoiceMoney = 12

// versionLineDimensions is the migration that added invoice_lines.dimensions.
const versionLineDimensions = 22

// versionInvoiceParts is the migration that added invoices.parts and the
// lines' part bounds.
const versionInvoiceParts = 34

// Invoice is one invoices row.
type Invoice struct {
	ID          int64  `db:"id"`
	CloseID     int64  `db:"close_id"`
	Customer    string `db:"customer_id"`
	Period      string `db:"period"`
	TZ          string `db:"tz"`
	PeriodStart int64  `db:"period_start"`
	PeriodEnd   int64  `db:"period_end"`
	Cutoff      int64  `db:"cutoff"`
	LedgerHead  int64  `db:"ledger_head"`
	ClosedAt    int64  `db:"closed_at"`
	Digest      []byte `db:"digest"`
	// Money (migration 0012); all "" on an invoice closed without a plan.
	Plan          string `db:"plan"`
	Currency      string `db:"currency"`
	PriceSnapshot string `db:"price_snapshot"` // the plan versions that priced it, canonical JSON
	PriceDigest   []byte `db:"price_digest"`   // SHA-256 of PriceSnapshot
	Fee           string `db:"fee"`
	TrueUp        string `db:"true_up"`
	Total         string `db:"total"`
	// Parts is the period split at a plan change, JSON ("": one part;
	// migration 0034).
	Parts string `db:"parts"`
}

// InvoiceLine is one invoice_lines row. Quantity is in micro-units; a
// quantity beyond int64's micro-units is QuantityWide instead, a decimal in
// units (Quantity is then 0; migration 0014).
type InvoiceLine struct {
	InvoiceID    int64  `db:"invoice_id"`
	LineNo       int64  `db:"line_no"`
	Customer     string `db:"customer_id"`
	Meter        string `db:"meter"`
	Dimensions   string `db:"dimensions"` // the line's dimension value, JSON ({"model":"gpt-4o"}); "" for none (migration 0022)
	Aggregation  string `db:"aggregation"`
	Property     string `db:"property"`
	Unit         string `db:"unit"`
	Late         bool   `db:"late"`
	Period       string `db:"period"`
	TZ           string `db:"tz"`
	PeriodStart  int64  `db:"period_start"`
	PeriodEnd    int64  `db:"period_end"`
	AfterID      int64  `db:"after_id"`
	ThroughID    int64  `db:"through_id"`
	Quantity     int64  `db:"quantity"`
	QuantityWide string `db:"quantity_wide"`
	Rows         int64  `db:"row_count"`
	Adjustments  int64  `db:"adjustments"`
	MaxID        int64  `db:"max_id"`
	Digest       []byte `db:"digest"`
	// Money (migration 0012); amounts "" on a line no price covers.
	BilledBefore  string `db:"billed_before"` // the period's total billed before this line (0 unless late)
	PlanVersion   string `db:"plan_version"`  // effective_from of the plan version that priced it
	AmountPrecise string `db:"amount_precise"`
	Amount        string `db:"amount"` // rounded to the currency's minor unit
	Charge        string `db:"charge"` // the price's breakdown, JSON
	// The part of a split period the line bills (migration 0034); 0 and 0:
	// the whole period.
	PartStart int64 `db:"part_start"`
	PartEnd   int64 `db:"part_end"`
}

// InvoiceFilter selects invoices; zero fields do not filter.
type InvoiceFilter struct {
	Customer               string
	Period                 string // label, e.g. 2026-11
	PeriodStart, PeriodEnd int64
	AfterClose             int64 // the invoices of closes above it (close_id > AfterClose)
}

const invoiceColumns = `id, close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at, digest,
	plan, currency, price_snapshot, price_digest, fee, true_up, total, parts`

const lineColumns = `invoice_id, line_no, customer_id, meter, aggregation, property, unit, late, period, tz,
	period_start, period_end, after_id, through_id, quantity, quantity_wide, row_count, adjustments, max_id, digest,
	billed_before, plan_version, amount_precise, amount, charge, dimensions, part_start, part_end`

func invoices(ctx context.Context, q sqlx.QueryerContext, f InvoiceFilter) ([]Invoice, error) {
	query := `SELECT ` + invoiceColumns + ` FROM invoices WHERE 1=1`
	var args []any
	if f.Customer != "" {
		query, args = query+` AND customer_id = ?`, append(args, f.Customer)
	}
	if f.Period != "" {
		query, args = query+` AND period = ?`, append(args, f.Period)
	}
	if f.PeriodStart != 0 || f.PeriodEnd != 0 {
		query, args = query+` AND period_start = ? AND period_end = ?`, append(args, f.PeriodStart, f.PeriodEnd)
	}
	if f.AfterClose != 0 {
		query, args = query+` AND close_id > ?`, append(args, f.AfterClose)
	}
	var invs []Invoice
	if err := sqlx.SelectContext(ctx, q, &invs, query+` ORDER BY id`, args...); err != nil {
		return nil, invoicesErr(ctx, q, err)
	}
	return invs, nil
}

func getInvoice(ctx context.Context, q sqlx.QueryerContext, id int64) (*Invoice, error) {
	var inv Invoice
	err := sqlx.GetContext(ctx, q, &inv, `SELECT `+invoiceColumns+` FROM invoices WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, invoicesErr(ctx, q, err)
	}
	return &inv, nil
}

// invoiceLinesBetween reads the lines of invoices fromID..toID in invoice and
// line order.
func invoiceLinesBetween(ctx context.Context, q sqlx.QueryerContext, fromID, toID int64) ([]InvoiceLine, error) {
	var lines []InvoiceLine
	err := sqlx.SelectContext(ctx, q, &lines, `SELECT `+lineColumns+`
		FROM invoice_lines WHERE invoice_id BETWEEN ? AND ? ORDER BY invoice_id, line_no`, fromID, toID)
	return lines, invoicesErr(ctx, q, err)
}

func customerInvoiceLines(ctx context.Context, q sqlx.QueryerContext, customer string) ([]InvoiceLine, error) {
	var lines []InvoiceLine
	err := sqlx.SelectContext(ctx, q, &lines, `SELECT `+lineColumns+` FROM invoice_lines
		WHERE customer_id = ? ORDER BY invoice_id, line_no`, customer)
	return lines, invoicesErr(ctx, q, err)
}

func periodInvoiceLines(ctx context.Context, q sqlx.QueryerContext, customer string, start, end int64) ([]InvoiceLine, error) {
	var lines []InvoiceLine
	err := sqlx.SelectContext(ctx, q, &lines, `SELECT `+lineColumns+` FROM invoice_lines
		WHERE customer_id = ? AND period_start = ? AND period_end = ? ORDER BY invoice_id, line_no`, customer, start, end)
	return lines, invoicesErr(ctx, q, err)
}

// InvoiceHead is how far one invoice billed its customer's usage of its period.
type InvoiceHead struct {
	Customer    string `db:"customer_id"`
	Period      string `db:"period"`
	TZ          string `db:"tz"`
	PeriodStart int64  `db:"period_start"`
	PeriodEnd   int64  `db:"period_end"`
	LedgerHead  int64  `db:"ledger_head"`
	Parts       string `db:"parts"` // its period split at a plan change (migration 0034)
}

// invoiceHeads reads every invoice's head, of customer scope only unless scope is "".
func invoiceHeads(ctx context.Context, q sqlx.QueryerContext, scope string) ([]InvoiceHead, error) {
	query := `SELECT customer_id, period, tz, period_start, period_end, ledger_head, parts FROM invoices`
	var args []any
	if scope != "" {
		query, args = query+` WHERE customer_id = ?`, append(args, scope)
	}
	var heads []InvoiceHead
	err := sqlx.SelectContext(ctx, q, &heads, query, args...)
	return heads, err
}

// LateCoverage is how far late lines have billed one customer's usage of one
// earlier period: the highest through_id of those lines.
type LateCoverage struct {
	Customer    string `db:"customer_id"`
	Period      string `db:"period"`
	TZ          string `db:"tz"`
	PeriodStart int64  `db:"period_start"`
	PeriodEnd   int64  `db:"period_end"`
	ThroughID   int64  `db:"through_id"`
}

// lateCoverage reads, per customer and period, how far late lines billed it.
func lateCoverage(ctx context.Context, q sqlx.QueryerContext, scope string) ([]LateCoverage, error) {
	// late = ? with true: SQLite's 1, PostgreSQL's boolean.
	query := `SELECT customer_id, MIN(period) AS period, MIN(tz) AS tz, period_start, period_end, MAX(through_id) AS through_id
		FROM invoice_lines WHERE late = ?`
	args := []any{true}
	if scope != "" {
		query, args = query+` AND customer_id = ?`, append(args, scope)
	}
	query += ` GROUP BY customer_id, period_start, period_end`
	var out []LateCoverage
	err := sqlx.SelectContext(ctx, q, &out, query, args...)
	return out, err
}

// PriceSnapshot is one distinct price snapshot closed invoices store, with
// the first invoice that stores it.
type PriceSnapshot struct {
	InvoiceID int64  `db:"id"`
	Customer  string `db:"customer_id"`
	Period    string `db:"period"`
	Snapshot  string `db:"price_snapshot"`
}

// PriceSnapshots reads each distinct price snapshot of the closed invoices
// once (invoices share a snapshot when the same versions priced them), with
// the lowest invoice id that stores it, in id order. A database older than
// money on invoices has none.
func (r ledgerReads) PriceSnapshots(ctx context.Context) ([]PriceSnapshot, error) {
	var out []PriceSnapshot
	err := sqlx.SelectContext(ctx, r.q, &out, `SELECT id, customer_id, period, price_snapshot FROM invoices
		WHERE id IN (SELECT MIN(id) FROM invoices WHERE currency <> '' GROUP BY price_digest) ORDER BY id`)
	if err != nil && (predates(ctx, r.q, versionInvoices) || predates(ctx, r.q, versionInvoiceMoney)) {
		return nil, nil
	}
	return out, err
}

// PriceSnapshots: see ledgerReads; on the read pool.
func (db *DB) PriceSnapshots(ctx context.Context) ([]PriceSnapshot, error) {
	return db.reads().PriceSnapshots(ctx)
}
