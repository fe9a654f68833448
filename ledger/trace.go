package ledger

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
)

// This file exposes to the dispute trace (package dispute) the recomputations
// verify does, so a trace and `hookledger verify` can never disagree about a
// line, a digest or a chain link.

// ErrNoRow means no ledger row has the id asked for.
var ErrNoRow = errors.New("no such ledger row")

const rowColumns = `id, kind, provider, event_id, customer_id, meter, quantity, properties, reason, ref,
	occurred_at, recorded_at, prev_hash, row_hash`

// GetRow reads one ledger row with its hashes.
func GetRow(ctx context.Context, q sqlx.QueryerContext, id int64) (*Row, error) {
	var r Row
	err := sqlx.GetContext(ctx, q, &r, `SELECT `+rowColumns+` FROM metered_usage WHERE id = ?`, id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("ledger row %d: %w", id, ErrNoRow)
	}
	if err != nil {
		return nil, fmt.Errorf("read ledger row %d: %w", id, err)
	}
	return &r, nil
}

// EventRows returns an event's usage rows and the adjustments that name the
// event (ref event:PROVIDER/EVENT_ID) or one of its rows (ref row:ID), in id order.
func EventRows(ctx context.Context, q sqlx.QueryerContext, provider, eventID string) ([]Row, error) {
	var rows []Row
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+rowColumns+` FROM metered_usage
		WHERE provider = ? AND event_id = ? ORDER BY id`, provider, eventID); err != nil {
		return nil, fmt.Errorf("read ledger rows of %s/%s: %w", provider, eventID, err)
	}
	// An adjustment always belongs to the customer of what it corrects, so
	// the customer index finds them without scanning the ledger.
	refs := []any{"event:" + provider + "/" + eventID}
	customers := map[string]bool{}
	for _, r := range rows {
		refs = append(refs, fmt.Sprintf("row:%d", r.ID))
		customers[r.Customer] = true
	}
	for c := range customers {
		var adj []Row
		if err := sqlx.SelectContext(ctx, q, &adj, `SELECT `+rowColumns+` FROM metered_usage
			WHERE customer_id = ? AND kind = 'adjustment' AND ref IN (?`+strings.Repeat(", ?", len(refs)-1)+`)`,
			append([]any{c}, refs...)...); err != nil {
			return nil, fmt.Errorf("read adjustments of %s/%s: %w", provider, eventID, err)
		}
		rows = append(rows, adj...)
	}
	slices.SortFunc(rows, func(a, b Row) int { return cmp.Compare(a.ID, b.ID) })
	return rows, nil
}

// PeriodRows returns one customer's ledger rows (usage and adjustments) with
// event time in [start, end), in id order.
func PeriodRows(ctx context.Context, q sqlx.QueryerContext, customer string, start, end int64) ([]Row, error) {
	f := rowFilter{customer: customer, from: start, to: end}
	from, args := f.where()
	var rows []Row
	if err := sqlx.SelectContext(ctx, q, &rows, `SELECT `+rowColumns+from+` ORDER BY id`, args...); err != nil {
		return nil, fmt.Errorf("read ledger rows of %s: %w", customer, err)
	}
	return rows, nil
}

// LineCheck is an invoice line recomputed from the ledger as it is now.
type LineCheck struct {
	Rows        []Row    // the rows the line covers, in id order, as stored
	Digest      []byte   // over the rows' ids and hashes recomputed from their contents
	Quantity    Quantity // the aggregate (for a late line, the change to the period's total)
	UsageRows   int64
	Adjustments int64
	MaxID       int64
	// Problem is "" when the line still matches what was frozen, else what
	// differs, in the words `hookledger verify` uses.
	Problem string
}

// CheckLine reads the rows an invoice line covers and recomputes its counts,
// digest and quantity, exactly as verify does.
func CheckLine(ctx context.Context, q sqlx.QueryerContext, l InvoiceLine) (*LineCheck, error) {
	f := rowFilter{customer: l.Customer, meter: l.Meter, from: l.PeriodStart, to: l.PeriodEnd, afterID: l.AfterID, throughID: l.ThroughID}
	from, args := f.where()
	c := &LineCheck{}
	if err := sqlx.SelectContext(ctx, q, &c.Rows, `SELECT `+rowColumns+from+` ORDER BY id`, args...); err != nil {
		return nil, fmt.Errorf("read rows of invoice %d line %d: %w", l.InvoiceID, l.LineNo, err)
	}
	m := Meter{Name: l.Meter, Aggregation: l.Aggregation, Property: l.Property, Unit: l.Unit}
	agg := newAggregate(m.spec())
	la := lineAcc{agg: agg, rows: make([]covered, 0, len(c.Rows))}
	for _, r := range c.Rows {
		// The hash recomputed from the row as it is now, as verify does.
		la.add(r.Kind, r.ID, r.Quantity, r.OccurredAt, r.Properties, r.Hash(r.PrevHash))
	}
	c.Digest, c.UsageRows, c.Adjustments, c.MaxID = rowsDigest(la.rows), agg.rows, agg.adjustments, la.maxID()
	d, err := aggregateDelta(ctx, q, l.Customer, m, l.PeriodStart, l.PeriodEnd, l.AfterID, l.ThroughID)
	if err != nil {
		return nil, fmt.Errorf("recompute invoice %d line %d: %w", l.InvoiceID, l.LineNo, err)
	}
	// A recomputed total beyond a Quantity's range stays 0 here; Problem says so.
	c.Quantity, _ = d.checked(l.Customer, l.Meter, l.Period)
	if c.Problem, err = checkLine(ctx, q, l); err != nil {
		return nil, fmt.Errorf("check invoice %d line %d: %w", l.InvoiceID, l.LineNo, err)
	}
	return c, nil
}

// InvoiceDigest recomputes an invoice's digest over its fields and all its lines.
func InvoiceDigest(inv *Invoice) []byte { return invoiceDigest(inv) }

const lineColumns = `invoice_id, line_no, customer_id, meter, aggregation, property, unit, late, period, tz,
	period_start, period_end, after_id, through_id, quantity, row_count, adjustments, max_id, digest`

// CustomerLines returns every invoice line of one customer, in invoice and
// line order. A customer has a few lines a month, so the dispute trace reads
// them once and finds the lines billing each row in memory (Covers).
func CustomerLines(ctx context.Context, q sqlx.QueryerContext, customer string) ([]InvoiceLine, error) {
	var lines []InvoiceLine
	err := sqlx.SelectContext(ctx, q, &lines, `SELECT `+lineColumns+` FROM invoice_lines
		WHERE customer_id = ? ORDER BY invoice_id, line_no`, customer)
	if err != nil {
		return nil, fmt.Errorf("read invoice lines of %s: %w", customer, err)
	}
	return lines, nil
}

// Covers reports whether line l bills row r: same customer and meter, event
// time in the line's period, ledger id in (AfterID, ThroughID].
func (l InvoiceLine) Covers(r Row) bool {
	return l.Customer == r.Customer && l.Meter == r.Meter && r.OccurredAt >= l.PeriodStart && r.OccurredAt < l.PeriodEnd &&
		r.ID > l.AfterID && r.ID <= l.ThroughID
}

// LinesForPeriod returns every invoice line that bills one customer's usage
// of the event-time period [start, end): the period's own invoice and the
// late lines of later invoices.
func LinesForPeriod(ctx context.Context, q sqlx.QueryerContext, customer string, start, end int64) ([]InvoiceLine, error) {
	var lines []InvoiceLine
	err := sqlx.SelectContext(ctx, q, &lines, `SELECT `+lineColumns+` FROM invoice_lines
		WHERE customer_id = ? AND period_start = ? AND period_end = ? ORDER BY invoice_id, line_no`, customer, start, end)
	if err != nil {
		return nil, fmt.Errorf("read invoice lines of %s: %w", customer, err)
	}
	return lines, nil
}

// CheckLinks checks row r's place in the hash chain: its row_hash recomputes
// from its contents, its prev_hash is the previous row's row_hash, and the
// next row's prev_hash is its row_hash (a rewritten row whose own hash was
// recomputed shows up there). It returns "" when all hold. Only the whole
// chain (Verify) proves nothing before r was rewritten.
func CheckLinks(ctx context.Context, q sqlx.QueryerContext, r Row) (string, error) {
	if !bytes.Equal(r.Hash(r.PrevHash), r.RowHash) {
		return "row_hash does not match the row's contents: the row was changed after it was written", nil
	}
	var id int64
	var hash []byte
	err := q.QueryRowxContext(ctx, `SELECT id, row_hash FROM metered_usage WHERE id < ? ORDER BY id DESC LIMIT 1`, r.ID).Scan(&id, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		id, hash = 0, GenesisHash
	case err != nil:
		return "", fmt.Errorf("read ledger row before %d: %w", r.ID, err)
	}
	if id != r.ID-1 {
		return fmt.Sprintf("ids jump from %d to %d: rows were deleted", id, r.ID), nil
	}
	if !bytes.Equal(r.PrevHash, hash) {
		return fmt.Sprintf("prev_hash does not match row %d's row_hash: the chain was rewritten", id), nil
	}
	err = q.QueryRowxContext(ctx, `SELECT id, prev_hash FROM metered_usage WHERE id > ? ORDER BY id LIMIT 1`, r.ID).Scan(&id, &hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return "", nil // the head of the chain
	case err != nil:
		return "", fmt.Errorf("read ledger row after %d: %w", r.ID, err)
	case id != r.ID+1:
		return fmt.Sprintf("ids jump from %d to %d: rows were deleted", r.ID, id), nil
	case !bytes.Equal(hash, r.RowHash):
		return fmt.Sprintf("row %d's prev_hash does not match this row's row_hash: this row was rewritten", id), nil
	}
	return "", nil
}

// CheckLinksBatch is CheckLinks for many rows, reading the neighbours of all
// of them in a few queries. Problems are keyed by row id; rows whose links
// hold are absent.
func CheckLinksBatch(ctx context.Context, q sqlx.QueryerContext, rows []Row) (map[int64]string, error) {
	problems := map[int64]string{}
	want := map[int64]bool{}
	for _, r := range rows {
		want[r.ID-1], want[r.ID+1] = true, true
	}
	ids := make([]int64, 0, len(want))
	for id := range want {
		if id > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	type link struct{ prev, hash []byte }
	near := make(map[int64]link, len(ids))
	var head int64
	if err := q.QueryRowxContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM metered_usage`).Scan(&head); err != nil {
		return nil, fmt.Errorf("read ledger head: %w", err)
	}
	const chunk = 500 // well under SQLite's bound on variables
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		args := make([]any, n)
		for i, id := range ids[:n] {
			args[i] = id
		}
		rs, err := q.QueryContext(ctx, `SELECT id, prev_hash, row_hash FROM metered_usage WHERE id IN (?`+strings.Repeat(", ?", n-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("read ledger rows: %w", err)
		}
		for rs.Next() {
			var id int64
			var l link
			if err := rs.Scan(&id, &l.prev, &l.hash); err != nil {
				rs.Close()
				return nil, fmt.Errorf("read ledger rows: %w", err)
			}
			near[id] = l
		}
		if err := rs.Close(); err != nil {
			return nil, fmt.Errorf("read ledger rows: %w", err)
		}
		ids = ids[n:]
	}
	for _, r := range rows {
		prev, okPrev := near[r.ID-1]
		next, okNext := near[r.ID+1]
		switch {
		case !bytes.Equal(r.Hash(r.PrevHash), r.RowHash):
			problems[r.ID] = "row_hash does not match the row's contents: the row was changed after it was written"
		case r.ID > 1 && !okPrev, r.ID < head && !okNext:
			// A gap: the single-row check names where the ids jump.
			p, err := CheckLinks(ctx, q, r)
			if err != nil {
				return nil, err
			}
			if p != "" {
				problems[r.ID] = p
			}
		case r.ID == 1 && !bytes.Equal(r.PrevHash, GenesisHash):
			problems[r.ID] = "prev_hash does not match row 0's row_hash: the chain was rewritten"
		case r.ID > 1 && !bytes.Equal(r.PrevHash, prev.hash):
			problems[r.ID] = fmt.Sprintf("prev_hash does not match row %d's row_hash: the chain was rewritten", r.ID-1)
		case okNext && !bytes.Equal(next.prev, r.RowHash):
			problems[r.ID] = fmt.Sprintf("row %d's prev_hash does not match this row's row_hash: this row was rewritten", r.ID+1)
		}
	}
	return problems, nil
}
