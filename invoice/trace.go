package invoice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// This file exposes to the dispute trace (package dispute) the reads it
// needs and the recomputations verify does (check.go), so a trace and
// `hookledger verify` can never disagree about a line, a digest or a chain
// link.

// ErrNoRow means no ledger row has the id asked for.
var ErrNoRow = errors.New("no such ledger row")

// GetRow reads one ledger row with its hashes.
func GetRow(ctx context.Context, src TraceSource, id int64) (*ledger.Row, error) {
	rec, err := src.GetLedgerRow(ctx, id)
	if errors.Is(err, schema.ErrNotFound) {
		return nil, fmt.Errorf("ledger row %d: %w", id, ErrNoRow)
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger row %d: %w", id, err)
	}
	r := ledger.StoredRow(rec)
	return &r, nil
}

// EventRows returns an event's usage rows and the adjustments that name the
// event (ref event:PROVIDER/EVENT_ID) or one of its rows (ref row:ID), in id order.
func EventRows(ctx context.Context, src TraceSource, provider, eventID string) ([]ledger.Row, error) {
	recs, err := src.EventLedgerRows(ctx, provider, eventID)
	if err != nil {
		return nil, fmt.Errorf("read ledger rows of %s/%s: %w", provider, eventID, err)
	}
	rows := ledger.StoredRows(recs)
	// An adjustment always belongs to the customer of what it corrects, so
	// the customer index finds them without scanning the ledger.
	refs := []string{"event:" + provider + "/" + eventID}
	customers := map[string]bool{}
	for _, r := range rows {
		refs = append(refs, fmt.Sprintf("row:%d", r.ID))
		customers[r.Customer] = true
	}
	for c := range customers {
		adj, err := src.AdjustmentsOf(ctx, c, refs)
		if err != nil {
			return nil, fmt.Errorf("read adjustments of %s/%s: %w", provider, eventID, err)
		}
		rows = append(rows, ledger.StoredRows(adj)...)
	}
	slices.SortFunc(rows, func(a, b ledger.Row) int { return cmp.Compare(a.ID, b.ID) })
	return rows, nil
}

// PeriodRows returns one customer's ledger rows (usage and adjustments) with
// event time in [start, end), in id order.
func PeriodRows(ctx context.Context, src TraceSource, customer string, start, end int64) ([]ledger.Row, error) {
	var rows []ledger.Row
	err := src.ScanLedger(ctx, schema.LedgerFilter{Customer: customer, From: start, To: end}, func(r *schema.LedgerRow) error {
		rows = append(rows, ledger.StoredRow(r))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read ledger rows of %s: %w", customer, err)
	}
	return rows, nil
}

// CheckLine reads the rows an invoice line covers and recomputes its counts,
// digest and quantity with the check verify runs (checkLine).
func CheckLine(ctx context.Context, src TraceSource, l InvoiceLine) (*LineCheck, error) {
	return checkLine(ctx, src, l, true)
}

// InvoiceDigest recomputes an invoice's digest over its fields and all its lines.
func InvoiceDigest(inv *Invoice) []byte { return invoiceDigest(inv) }

// CustomerLines returns every invoice line of one customer, in invoice and
// line order. A customer has a few lines a month, so the dispute trace reads
// them once and finds the lines billing each row in memory (Covers).
func CustomerLines(ctx context.Context, src TraceSource, customer string) ([]InvoiceLine, error) {
	lines, err := src.CustomerInvoiceLines(ctx, customer)
	if err != nil {
		return nil, fmt.Errorf("read invoice lines of %s: %w", customer, err)
	}
	return linesOf(lines)
}

// Covers reports whether line l bills row r: same customer and meter, event
// time in the line's period, ledger id in (AfterID, ThroughID], and for a
// line of one dimension value, that value.
func (l InvoiceLine) Covers(r ledger.Row) bool {
	if !(l.Customer == r.Customer && l.Meter == r.Meter && r.OccurredAt >= l.PeriodStart && r.OccurredAt < l.PeriodEnd &&
		r.ID > l.AfterID && r.ID <= l.ThroughID) {
		return false
	}
	only, err := filterOf(l.Dimensions)
	return err == nil && only.keeps(r.Properties)
}

// LinesForPeriod returns every invoice line that bills one customer's usage
// of the event-time period [start, end): the period's own invoice and the
// late lines of later invoices.
func LinesForPeriod(ctx context.Context, src TraceSource, customer string, start, end int64) ([]InvoiceLine, error) {
	lines, err := src.PeriodInvoiceLines(ctx, customer, start, end)
	if err != nil {
		return nil, fmt.Errorf("read invoice lines of %s: %w", customer, err)
	}
	return linesOf(lines)
}

// CheckLinks checks row r's place in the hash chain (see CheckLinksBatch)
// and returns "" when it holds.
func CheckLinks(ctx context.Context, src TraceSource, r ledger.Row) (string, error) {
	problems, err := ledger.CheckRowLinks(ctx, src, []ledger.Row{r})
	return problems[r.ID], err
}

// CheckLinksBatch checks many rows' places in the hash chain with the check
// verify runs over the whole chain (checkLink): each row's row_hash
// recomputes from its contents, its prev_hash is the previous row's
// row_hash, and the next row's prev_hash is its row_hash. Problems are keyed
// by row id; rows whose links hold are absent.
func CheckLinksBatch(ctx context.Context, src TraceSource, rows []ledger.Row) (map[int64]string, error) {
	return ledger.CheckRowLinks(ctx, src, rows)
}
