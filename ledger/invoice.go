package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
		return nil, err
	}
	late, err := lateLines(ctx, tx, scope, head.LastID, req.Meters, skip, req.noIndex)
	if err != nil {
		return nil, err
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

// periodLines bills the period's rows up to the ledger head, per customer and meter.
func periodLines(ctx context.Context, tx *sqlx.Tx, req CloseRequest, head int64, skip map[string]bool) ([]InvoiceLine, error) {
	p := req.Period
	type key struct{ customer, meter string }
	accs := map[key]*lineAcc{}
	f := rowFilter{from: p.Start.UnixMilli(), to: p.End.UnixMilli(), customer: req.Customer, throughID: head, noIndex: req.noIndex}
	if head == 0 {
		return nil, nil
	}
	err := ledgerScan(ctx, tx, f, needsProperties(req.Meters, ""), func(id int64, kind, c, m string, q Quantity, occ int64, props string, hash []byte) {
		if skip[c] {
			return
		}
		k := key{c, m}
		la := accs[k]
		if la == nil {
			la = &lineAcc{agg: newAggregate(req.Meters.Get(m).spec())}
			accs[k] = la
		}
		la.add(kind, id, q, occ, props, hash)
	})
	if err != nil {
		return nil, fmt.Errorf("close %s: %w", p.Label, err)
	}
	lines := make([]InvoiceLine, 0, len(accs))
	for k, la := range accs {
		m := req.Meters.Get(k.meter)
		lines = append(lines, InvoiceLine{Customer: k.customer, Meter: k.meter, Aggregation: m.Aggregation, Property: m.Property, Unit: m.Unit,
			Period: p.Label, TZ: p.Zone, PeriodStart: p.Start.UnixMilli(), PeriodEnd: p.End.UnixMilli(), AfterID: 0, ThroughID: head,
			Quantity: la.agg.value(), Rows: la.agg.rows, Adjustments: la.agg.adjustments, MaxID: la.maxID(), Digest: rowsDigest(la.rows)})
	}
	return lines, nil
}

// closedPeriod is one closed event-time period and how far each customer's
// usage in it has been billed.
type closedPeriod struct {
	label, tz  string
	start, end int64
	allHead    int64            // head of a close for all customers; -1 if none
	invoiced   map[string]int64 // customer -> head of the close that closed or invoiced them
	lateBilled map[string]int64 // customer -> highest through_id of late lines billed
}

// coverage is the highest ledger id billed for customer's usage in the
// period; ok is false when the period is not closed for that customer.
func (cp *closedPeriod) coverage(customer string) (int64, bool) {
	base, ok := cp.invoiced[customer]
	if !ok {
		if cp.allHead < 0 {
			return 0, false
		}
		base = cp.allHead
	}
	return max(base, cp.lateBilled[customer]), true
}

// minCoverage is the lowest coverage of any customer: late rows have higher ids.
func (cp *closedPeriod) minCoverage() int64 {
	m := int64(-1)
	consider := func(v int64) {
		if m < 0 || v < m {
			m = v
		}
	}
	if cp.allHead >= 0 {
		consider(cp.allHead)
	}
	for c := range cp.invoiced {
		v, _ := cp.coverage(c)
		consider(v)
	}
	return max(m, 0)
}

// closedPeriods loads every closed period that applies to scope ("" = all).
func closedPeriods(ctx context.Context, q sqlx.QueryerContext, scope string) ([]*closedPeriod, error) {
	type pk struct{ start, end int64 }
	byKey := map[pk]*closedPeriod{}
	get := func(label, tz string, start, end int64) *closedPeriod {
		k := pk{start, end}
		cp := byKey[k]
		if cp == nil {
			cp = &closedPeriod{label: label, tz: tz, start: start, end: end, allHead: -1,
				invoiced: map[string]int64{}, lateBilled: map[string]int64{}}
			byKey[k] = cp
		}
		return cp
	}
	var closes []periodClose
	query := `SELECT id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head FROM period_closes`
	var args []any
	if scope != "" {
		query += ` WHERE customer_id IN ('', ?)`
		args = append(args, scope)
	}
	if err := sqlx.SelectContext(ctx, q, &closes, query, args...); err != nil {
		return nil, fmt.Errorf("read closed periods: %w", err)
	}
	for _, c := range closes {
		cp := get(c.Period, c.TZ, c.PeriodStart, c.PeriodEnd)
		if c.Customer == "" {
			cp.allHead = c.LedgerHead
		} else {
			cp.invoiced[c.Customer] = max(cp.invoiced[c.Customer], c.LedgerHead)
		}
	}
	var invs []struct {
		Customer string `db:"customer_id"`
		Period   string `db:"period"`
		TZ       string `db:"tz"`
		Start    int64  `db:"period_start"`
		End      int64  `db:"period_end"`
		Head     int64  `db:"ledger_head"`
	}
	query = `SELECT customer_id, period, tz, period_start, period_end, ledger_head FROM invoices`
	if scope != "" {
		query += ` WHERE customer_id = ?`
	}
	if err := sqlx.SelectContext(ctx, q, &invs, query, args...); err != nil {
		return nil, fmt.Errorf("read invoices: %w", err)
	}
	for _, inv := range invs {
		cp := get(inv.Period, inv.TZ, inv.Start, inv.End)
		cp.invoiced[inv.Customer] = max(cp.invoiced[inv.Customer], inv.Head)
	}
	var billed []struct {
		Customer string `db:"customer_id"`
		Period   string `db:"period"`
		TZ       string `db:"tz"`
		Start    int64  `db:"period_start"`
		End      int64  `db:"period_end"`
		Through  int64  `db:"through_id"`
	}
	query = `SELECT customer_id, MIN(period) AS period, MIN(tz) AS tz, period_start, period_end, MAX(through_id) AS through_id
		FROM invoice_lines WHERE late = 1`
	if scope != "" {
		query += ` AND customer_id = ?`
	}
	query += ` GROUP BY customer_id, period_start, period_end`
	if err := sqlx.SelectContext(ctx, q, &billed, query, args...); err != nil {
		return nil, fmt.Errorf("read late lines: %w", err)
	}
	for _, b := range billed {
		cp := get(b.Period, b.TZ, b.Start, b.End)
		cp.lateBilled[b.Customer] = max(cp.lateBilled[b.Customer], b.Through)
	}
	out := make([]*closedPeriod, 0, len(byKey))
	for _, cp := range byKey {
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b *closedPeriod) int { return cmp.Compare(a.start, b.start) })
	return out, nil
}

// lateLines finds usage of closed periods recorded after their close and not
// yet billed, up to ledger id head, as invoice lines naming their period. A
// late line's quantity is the change to the period's total: the aggregate
// over everything up to head minus the aggregate already billed, which for
// sum and count is simply the late rows' own total.
func lateLines(ctx context.Context, q sqlx.QueryerContext, scope string, head int64, meters Meters, skip map[string]bool, noIndex bool) ([]InvoiceLine, error) {
	periods, err := closedPeriods(ctx, q, scope)
	if err != nil {
		return nil, err
	}
	type key struct{ customer, meter string }
	var lines []InvoiceLine
	for _, cp := range periods {
		floor := cp.minCoverage()
		if floor >= head {
			continue
		}
		accs := map[key]*lineAcc{}
		f := rowFilter{from: cp.start, to: cp.end, customer: scope, afterID: floor, throughID: head, noIndex: noIndex}
		err := ledgerScan(ctx, q, f, false, func(id int64, kind, c, m string, qty Quantity, occ int64, props string, hash []byte) {
			if skip[c] {
				return
			}
			if cov, ok := cp.coverage(c); !ok || id <= cov {
				return
			}
			k := key{c, m}
			la := accs[k]
			if la == nil {
				la = &lineAcc{agg: newAggregate(meters.Get(m).spec())}
				accs[k] = la
			}
			la.add(kind, id, qty, occ, props, hash)
		})
		if err != nil {
			return nil, fmt.Errorf("late usage for %s: %w", cp.label, err)
		}
		for k, la := range accs {
			cov, _ := cp.coverage(k.customer)
			m := meters.Get(k.meter)
			delta, err := aggregateDelta(ctx, q, k.customer, m, cp.start, cp.end, cov, head)
			if err != nil {
				return nil, err
			}
			lines = append(lines, InvoiceLine{Customer: k.customer, Meter: k.meter, Aggregation: m.Aggregation, Property: m.Property, Unit: m.Unit,
				Late: true, Period: cp.label, TZ: cp.tz, PeriodStart: cp.start, PeriodEnd: cp.end, AfterID: cov, ThroughID: head,
				Quantity: delta, Rows: la.agg.rows, Adjustments: la.agg.adjustments, MaxID: la.maxID(), Digest: rowsDigest(la.rows)})
		}
	}
	return lines, nil
}

// aggregateDelta is agg(rows with id <= through) - agg(rows with id <= after)
// for one customer, meter and period: what a line covering (after, through]
// adds to the period's billed total.
func aggregateDelta(ctx context.Context, q sqlx.QueryerContext, customer string, m Meter, start, end, after, through int64) (Quantity, error) {
	upTo, before := newAggregate(m.spec()), newAggregate(m.spec())
	f := rowFilter{customer: customer, meter: m.Name, from: start, to: end, throughID: through}
	err := ledgerScan(ctx, q, f, m.Aggregation == AggUniqueCount, func(id int64, kind, _, _ string, qty Quantity, occ int64, props string, _ []byte) {
		upTo.add(kind, id, qty, occ, props)
		if id <= after {
			before.add(kind, id, qty, occ, props)
		}
	})
	if err != nil {
		return 0, err
	}
	return upTo.value() - before.value(), nil
}

// LateLine is usage of a closed period recorded after its close and not yet
// billed: it will be billed by the customer's next invoice.
type LateLine struct {
	Customer    string      `json:"customer"`
	Meter       string      `json:"meter"`
	Period      string      `json:"period"`
	TZ          string      `json:"tz"`
	Aggregation Aggregation `json:"aggregation"`
	Quantity    Quantity    `json:"quantity"` // change to the period's total
	Unit        string      `json:"unit,omitempty"`
	Rows        int64       `json:"rows"`
	Adjustments int64       `json:"adjustments"`
	AfterID     int64       `json:"after_id"`
	MaxID       int64       `json:"max_id"`
}

// LateUsage lists unbilled late usage up to the current ledger head.
func LateUsage(ctx context.Context, q sqlx.QueryerContext, customer string, meters Meters) ([]LateLine, error) {
	head, err := LoadChain(ctx, q)
	if err != nil {
		return nil, err
	}
	lines, err := lateLines(ctx, q, customer, head.LastID, meters, nil, false)
	if err != nil {
		return nil, err
	}
	out := make([]LateLine, len(lines))
	for i, l := range lines {
		out[i] = LateLine{Customer: l.Customer, Meter: l.Meter, Period: l.Period, TZ: l.TZ, Aggregation: l.Aggregation, Quantity: l.Quantity,
			Unit: l.Unit, Rows: l.Rows, Adjustments: l.Adjustments, AfterID: l.AfterID, MaxID: l.MaxID}
	}
	slices.SortFunc(out, func(a, b LateLine) int {
		return cmp.Or(cmp.Compare(a.Customer, b.Customer), cmp.Compare(a.Period, b.Period), cmp.Compare(a.Meter, b.Meter))
	})
	return out, nil
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
