package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jmoiron/sqlx"
)

// CloseRequest asks to close one period for one customer or for all.
type CloseRequest struct {
	Period   Period
	Customer string // one customer; "" with All
	All      bool
	// Grace is how long after the period's end closing is still refused, so
	// deliveries in flight at midnight land in the period's invoice.
	Grace  time.Duration
	Meters Meters
	// Now is the clock (tests replace it). Default time.Now.
	Now func() time.Time
	// DryRun computes the invoices and rolls back: a preview that changes nothing.
	DryRun bool

	noIndex bool
}

// CloseResult is what a close produced or, when the period was already
// closed for the scope, what the earlier close produced.
type CloseResult struct {
	Existing bool      `json:"existing"` // nothing new: the period was already closed for this scope
	Cutoff   int64     `json:"cutoff_ms"`
	Head     int64     `json:"ledger_head"`
	Invoices []Invoice `json:"invoices"`
}

// Close freezes the period's invoices in one write transaction (BEGIN
// IMMEDIATE), so the ingestion cutoff and the highest ledger id it covers
// describe the same moment: no row can commit in between. Closing a period
// already closed for the scope returns the earlier invoices unchanged.
func Close(ctx context.Context, db *sqlx.DB, req CloseRequest) (*CloseResult, error) {
	if req.All == (req.Customer != "") {
		return nil, errors.New("close: name one customer or all customers")
	}
	if req.Now == nil {
		req.Now = time.Now
	}
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("close: begin: %w", err)
	}
	defer tx.Rollback()
	res, err := closeTx(ctx, tx, req)
	if err != nil {
		return nil, err
	}
	if res.Invoices == nil {
		res.Invoices = []Invoice{}
	}
	if req.DryRun || res.Existing {
		return res, nil
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("close: commit: %w", err)
	}
	return res, nil
}

// periodClose is a row of period_closes.
type periodClose struct {
	ID          int64  `db:"id"`
	Customer    string `db:"customer_id"`
	Period      string `db:"period"`
	TZ          string `db:"tz"`
	PeriodStart int64  `db:"period_start"`
	PeriodEnd   int64  `db:"period_end"`
	Cutoff      int64  `db:"cutoff"`
	LedgerHead  int64  `db:"ledger_head"`
}

func closeTx(ctx context.Context, tx *sqlx.Tx, req CloseRequest) (*CloseResult, error) {
	p := req.Period
	start, end := p.Start.UnixMilli(), p.End.UnixMilli()
	now := req.Now()
	if opens := p.End.Add(req.Grace); now.Before(opens) {
		return nil, fmt.Errorf("close %s: %w: it can close from %s (period end + %s grace)",
			p.Label, ErrTooEarly, opens.Format(time.RFC3339), req.Grace)
	}

	// Already closed for this scope? Then the answer is what that close froze.
	var closes []periodClose
	if err := sqlx.SelectContext(ctx, tx, &closes, `SELECT id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head
		FROM period_closes WHERE period_start < ? AND period_end > ? ORDER BY id`, end, start); err != nil {
		return nil, fmt.Errorf("close: read closed periods: %w", err)
	}
	var allClose, own *periodClose
	for i, c := range closes {
		applies := req.All || c.Customer == "" || c.Customer == req.Customer
		if !applies {
			continue
		}
		if c.PeriodStart != start || c.PeriodEnd != end {
			return nil, fmt.Errorf("close %s: %w: %s was closed in %s (%s to %s); close periods with the same time zone",
				p.Label, ErrPeriodOverlap, c.Period, c.TZ, msTime(c.PeriodStart, c.TZ).Format(time.RFC3339), msTime(c.PeriodEnd, c.TZ).Format(time.RFC3339))
		}
		if c.Customer == "" {
			allClose = &closes[i]
		}
		if c.Customer == req.Customer {
			own = &closes[i]
		}
	}
	if own != nil || allClose != nil {
		// Closed before for this scope (or, for one customer, by a close of
		// all customers): return what was frozen then.
		prior := own
		if prior == nil {
			prior = allClose
		}
		invs, err := listInvoices(ctx, tx, InvoiceFilter{Customer: req.Customer, PeriodStart: start, PeriodEnd: end}, true)
		if err != nil {
			return nil, err
		}
		if own == nil && len(invs) > 0 { // invoiced by the close for all
			prior = &periodClose{Cutoff: invs[0].Cutoff, LedgerHead: invs[0].LedgerHead}
		}
		return &CloseResult{Existing: true, Cutoff: prior.Cutoff, Head: prior.LedgerHead, Invoices: invs}, nil
	}

	// The moment of closing. Under BEGIN IMMEDIATE no row can commit until we
	// do, so "id <= head" is exact; the cutoff is kept above the head's
	// recorded_at so "recorded_at < cutoff" selects the same rows.
	head, err := LoadChain(ctx, tx)
	if err != nil {
		return nil, err
	}
	cutoff := now.UnixMilli()
	if head.LastID > 0 {
		var headRecorded int64
		if err := tx.QueryRowxContext(ctx, `SELECT recorded_at FROM metered_usage WHERE id = ?`, head.LastID).Scan(&headRecorded); err != nil {
			return nil, fmt.Errorf("close: read ledger head: %w", err)
		}
		cutoff = max(cutoff, headRecorded+1)
	}
	scope := req.Customer
	closeRes, err := tx.ExecContext(ctx, `INSERT INTO period_closes
		(customer_id, period, tz, period_start, period_end, grace_ms, cutoff, ledger_head, closed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, scope, p.Label, p.Zone, start, end, req.Grace.Milliseconds(), cutoff, head.LastID, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("close: record close: %w", err)
	}
	closeID, err := closeRes.LastInsertId()
	if err != nil {
		return nil, err
	}

	// Customers for whom this period was already closed (by a close of
	// theirs) keep that close; a close for all skips them, and their usage
	// since is late.
	skip := map[string]bool{}
	if req.All {
		var done []string
		if err := sqlx.SelectContext(ctx, tx, &done, `SELECT customer_id FROM period_closes WHERE period_start = ? AND period_end = ? AND customer_id != ''
			UNION SELECT customer_id FROM invoices WHERE period_start = ? AND period_end = ?`, start, end, start, end); err != nil {
			return nil, fmt.Errorf("close: read closed periods: %w", err)
		}
		for _, c := range done {
			skip[c] = true
		}
	}

	lines, err := periodLines(ctx, tx, req, head.LastID, skip)
	if err != nil {
		return nil, refuseOverflow(p, err)
	}
	late, err := lateLines(ctx, tx, scope, head.LastID, req.Meters, skip, req.noIndex)
	if err != nil {
		return nil, refuseOverflow(p, err)
	}
	lines = append(lines, late...)

	byCustomer := map[string][]InvoiceLine{}
	for _, l := range lines {
		byCustomer[l.Customer] = append(byCustomer[l.Customer], l)
	}
	customers := make([]string, 0, len(byCustomer))
	for c := range byCustomer {
		customers = append(customers, c)
	}
	slices.Sort(customers)

	var nextID int64
	if err := tx.QueryRowxContext(ctx, `SELECT COALESCE(MAX(id), 0) + 1 FROM invoices`).Scan(&nextID); err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	insInv, err := tx.PreparexContext(ctx, `INSERT INTO invoices
		(id, close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at, digest)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	defer insInv.Close()
	insLine, err := tx.PreparexContext(ctx, `INSERT INTO invoice_lines
		(invoice_id, line_no, customer_id, meter, aggregation, property, unit, late, period, tz, period_start, period_end,
		 after_id, through_id, quantity, row_count, adjustments, max_id, digest)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return nil, fmt.Errorf("close: %w", err)
	}
	defer insLine.Close()

	res := &CloseResult{Cutoff: cutoff, Head: head.LastID, Invoices: make([]Invoice, 0, len(customers))}
	for _, c := range customers {
		ls := byCustomer[c]
		slices.SortFunc(ls, func(a, b InvoiceLine) int {
			return cmp.Or(cmpBool(a.Late, b.Late), cmp.Compare(a.PeriodStart, b.PeriodStart), cmp.Compare(a.Meter, b.Meter))
		})
		inv := Invoice{ID: nextID, CloseID: closeID, Customer: c, Period: p.Label, TZ: p.Zone, PeriodStart: start, PeriodEnd: end,
			Cutoff: cutoff, LedgerHead: head.LastID, ClosedAt: now.UnixMilli(), Lines: ls}
		nextID++
		for i := range inv.Lines {
			inv.Lines[i].InvoiceID, inv.Lines[i].LineNo = inv.ID, int64(i+1)
		}
		inv.Digest = invoiceDigest(&inv)
		if _, err := insInv.ExecContext(ctx, inv.ID, inv.CloseID, inv.Customer, inv.Period, inv.TZ, inv.PeriodStart, inv.PeriodEnd,
			inv.Cutoff, inv.LedgerHead, inv.ClosedAt, inv.Digest); err != nil {
			return nil, fmt.Errorf("close: insert invoice for %s: %w", c, err)
		}
		for _, l := range inv.Lines {
			if _, err := insLine.ExecContext(ctx, l.InvoiceID, l.LineNo, l.Customer, l.Meter, string(l.Aggregation), l.Property, l.Unit,
				l.Late, l.Period, l.TZ, l.PeriodStart, l.PeriodEnd, l.AfterID, l.ThroughID, int64(l.Quantity), l.Rows, l.Adjustments,
				l.MaxID, l.Digest); err != nil {
				return nil, fmt.Errorf("close: insert invoice line for %s: %w", c, err)
			}
		}
		res.Invoices = append(res.Invoices, inv)
	}
	return res, nil
}

// refuseOverflow says what a close refused for a total out of range: the
// whole close, for every customer (the transaction rolls back), and how to
// proceed. Other errors pass unchanged.
func refuseOverflow(p Period, err error) error {
	if !errors.Is(err, ErrOverflow) {
		return err
	}
	return fmt.Errorf("close %s: %w; nothing was closed: bring the total into range with an adjustment (hookledger adjust) and close again", p.Label, err)
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

// lineAcc accumulates one future invoice line while rows stream by.
type lineAcc struct {
	agg  *aggregate
	rows []covered
}

func (la *lineAcc) add(kind string, id int64, q Quantity, occurred int64, props string, hash []byte) {
	la.agg.add(kind, id, q, occurred, props)
	la.rows = append(la.rows, covered{id, hash})
}

func (la *lineAcc) maxID() int64 {
	var m int64
	for _, r := range la.rows {
		m = max(m, r.id)
	}
	return m
}

// ledgerScan streams rows matching f to fn, with what aggregation and digests need.
func ledgerScan(ctx context.Context, q sqlx.QueryerContext, f rowFilter, props bool,
	fn func(id int64, kind, customer, meter string, qty Quantity, occurred int64, props string, hash []byte)) error {
	from, args := f.where()
	col := "''"
	if props {
		col = "properties"
	}
	rows, err := q.QueryContext(ctx, "SELECT id, kind, customer_id, meter, quantity, occurred_at, "+col+", row_hash"+from, args...)
	if err != nil {
		return fmt.Errorf("read ledger: %w", err)
	}
	defer rows.Close()
	var (
		id, qty, occurred       int64
		kind, cust, meter, prop string
	)
	for rows.Next() {
		var hash []byte // fresh per row: the digest keeps it
		if err := rows.Scan(&id, &kind, &cust, &meter, &qty, &occurred, &prop, &hash); err != nil {
			return fmt.Errorf("read ledger: %w", err)
		}
		fn(id, kind, cust, meter, Quantity(qty), occurred, prop, hash)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read ledger: %w", err)
	}
	return nil
}
