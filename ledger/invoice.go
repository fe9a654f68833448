package ledger

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Invoice is one customer's bill for one period, frozen when it was closed.
type Invoice struct {
	ID          int64         `db:"id"`
	CloseID     int64         `db:"close_id"`
	Customer    string        `db:"customer_id"`
	Period      string        `db:"period"`
	TZ          string        `db:"tz"`
	PeriodStart int64         `db:"period_start"` // unix ms, inclusive
	PeriodEnd   int64         `db:"period_end"`   // unix ms, exclusive
	Cutoff      int64         `db:"cutoff"`       // ingestion cutoff: recorded_at < Cutoff
	LedgerHead  int64         `db:"ledger_head"`  // rows with id <= LedgerHead were visible
	ClosedAt    int64         `db:"closed_at"`
	Digest      []byte        `db:"digest"`
	Lines       []InvoiceLine `db:"-"`
}

// InvoiceLine is one meter's quantity on an invoice. A late line bills usage
// of an earlier closed period that was recorded after that period's close;
// its Period names that earlier period and its Quantity is the change to
// that period's total.
type InvoiceLine struct {
	InvoiceID   int64       `db:"invoice_id"`
	LineNo      int64       `db:"line_no"`
	Customer    string      `db:"customer_id"`
	Meter       string      `db:"meter"`
	Aggregation Aggregation `db:"aggregation"`
	Property    string      `db:"property"`
	Unit        string      `db:"unit"`
	Late        bool        `db:"late"`
	Period      string      `db:"period"`
	TZ          string      `db:"tz"`
	PeriodStart int64       `db:"period_start"`
	PeriodEnd   int64       `db:"period_end"`
	AfterID     int64       `db:"after_id"`   // covers rows with AfterID < id <= ThroughID
	ThroughID   int64       `db:"through_id"` //
	Quantity    Quantity    `db:"quantity"`
	Rows        int64       `db:"row_count"`
	Adjustments int64       `db:"adjustments"`
	MaxID       int64       `db:"max_id"` // highest ledger id covered
	Digest      []byte      `db:"digest"`
}

// Close errors a caller branches on.
var (
	ErrTooEarly      = errors.New("period has not ended (plus grace)")
	ErrPeriodOverlap = errors.New("period overlaps a differently bounded closed period")
	ErrNoInvoice     = errors.New("no such invoice")
)

func msTime(ms int64, tz string) time.Time {
	loc, err := LoadZone(tz)
	if err != nil {
		loc = time.UTC
	}
	return time.UnixMilli(ms).In(loc)
}

// MarshalJSON shows times in RFC 3339 (in the invoice's zone) and the digest in hex.
func (inv Invoice) MarshalJSON() ([]byte, error) {
	lines := inv.Lines
	if lines == nil {
		lines = []InvoiceLine{}
	}
	return json.Marshal(struct {
		ID          int64         `json:"id"`
		CloseID     int64         `json:"close_id"`
		Customer    string        `json:"customer"`
		Period      string        `json:"period"`
		TZ          string        `json:"tz"`
		PeriodStart time.Time     `json:"period_start"`
		PeriodEnd   time.Time     `json:"period_end"`
		Cutoff      time.Time     `json:"cutoff"`
		LedgerHead  int64         `json:"ledger_head"`
		ClosedAt    time.Time     `json:"closed_at"`
		Digest      string        `json:"digest"`
		Lines       []InvoiceLine `json:"lines"`
	}{inv.ID, inv.CloseID, inv.Customer, inv.Period, inv.TZ, msTime(inv.PeriodStart, inv.TZ), msTime(inv.PeriodEnd, inv.TZ),
		time.UnixMilli(inv.Cutoff).UTC(), inv.LedgerHead, time.UnixMilli(inv.ClosedAt).UTC(), hex.EncodeToString(inv.Digest), lines})
}

// MarshalJSON shows times in RFC 3339 (in the line's zone) and the digest in hex.
func (l InvoiceLine) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		LineNo      int64       `json:"line"`
		Meter       string      `json:"meter"`
		Aggregation Aggregation `json:"aggregation"`
		Property    string      `json:"property,omitempty"`
		Unit        string      `json:"unit,omitempty"`
		Late        bool        `json:"late"`
		Period      string      `json:"period"`
		TZ          string      `json:"tz"`
		PeriodStart time.Time   `json:"period_start"`
		PeriodEnd   time.Time   `json:"period_end"`
		AfterID     int64       `json:"after_id"`
		ThroughID   int64       `json:"through_id"`
		Quantity    Quantity    `json:"quantity"`
		Rows        int64       `json:"rows"`
		Adjustments int64       `json:"adjustments"`
		MaxID       int64       `json:"max_id"`
		Digest      string      `json:"digest"`
	}{l.LineNo, l.Meter, l.Aggregation, l.Property, l.Unit, l.Late, l.Period, l.TZ, msTime(l.PeriodStart, l.TZ), msTime(l.PeriodEnd, l.TZ),
		l.AfterID, l.ThroughID, l.Quantity, l.Rows, l.Adjustments, l.MaxID, hex.EncodeToString(l.Digest)})
}

// InvoiceFilter selects invoices; zero fields do not filter.
type InvoiceFilter struct {
	Customer               string
	Period                 string // label, e.g. 2026-11
	PeriodStart, PeriodEnd int64
}

// ListInvoices returns invoices with their lines, in id order.
func ListInvoices(ctx context.Context, q sqlx.QueryerContext, f InvoiceFilter) ([]Invoice, error) {
	return listInvoices(ctx, q, f, true)
}

func listInvoices(ctx context.Context, q sqlx.QueryerContext, f InvoiceFilter, withLines bool) ([]Invoice, error) {
	query := `SELECT id, close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at, digest FROM invoices WHERE 1=1`
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
	var invs []Invoice
	if err := sqlx.SelectContext(ctx, q, &invs, query+` ORDER BY id`, args...); err != nil {
		return nil, fmt.Errorf("read invoices: %w", err)
	}
	if !withLines || len(invs) == 0 {
		return invs, nil
	}
	idx := make(map[int64]int, len(invs))
	for i, inv := range invs {
		idx[inv.ID] = i
	}
	lines, err := invoiceLines(ctx, q, invs[0].ID, invs[len(invs)-1].ID)
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if i, ok := idx[l.InvoiceID]; ok {
			invs[i].Lines = append(invs[i].Lines, l)
		}
	}
	return invs, nil
}

func invoiceLines(ctx context.Context, q sqlx.QueryerContext, fromID, toID int64) ([]InvoiceLine, error) {
	var lines []InvoiceLine
	err := sqlx.SelectContext(ctx, q, &lines, `SELECT invoice_id, line_no, customer_id, meter, aggregation, property, unit, late, period, tz,
		period_start, period_end, after_id, through_id, quantity, row_count, adjustments, max_id, digest
		FROM invoice_lines WHERE invoice_id BETWEEN ? AND ? ORDER BY invoice_id, line_no`, fromID, toID)
	if err != nil {
		return nil, fmt.Errorf("read invoice lines: %w", err)
	}
	return lines, nil
}

// GetInvoice returns one invoice with its lines.
func GetInvoice(ctx context.Context, q sqlx.QueryerContext, id int64) (*Invoice, error) {
	var inv Invoice
	err := sqlx.GetContext(ctx, q, &inv, `SELECT id, close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at, digest
		FROM invoices WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("invoice %d: %w", id, ErrNoInvoice)
	}
	if err != nil {
		return nil, fmt.Errorf("read invoice %d: %w", id, err)
	}
	if inv.Lines, err = invoiceLines(ctx, q, id, id); err != nil {
		return nil, err
	}
	return &inv, nil
}
