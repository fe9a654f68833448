package invoice

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// closedPeriod is one closed event-time period and how far each customer's
// usage in it has been billed.
type closedPeriod struct {
	label, tz  string
	start, end int64
	allHead    int64                    // head of a close for all customers; -1 if none
	excluded   map[string]bool          // customers the close for all could not invoice: not closed by it
	parts      map[string][]InvoicePart // customer -> the parts of its invoice of the period, when split
	invoiced   map[string]int64         // customer -> head of the close that closed or invoiced them
	lateBilled map[string]int64         // customer -> highest through_id of late lines billed
}

// coverage is the highest ledger id billed for customer's usage in the
// period; ok is false when the period is not closed for that customer.
func (cp *closedPeriod) coverage(customer string) (int64, bool) {
	base, ok := cp.closedAt(customer)
	if !ok {
		return 0, false
	}
	return max(base, cp.lateBilled[customer]), true
}

// closedAt is the ledger head of the close that closed the period for
// customer (its own, or the close for all customers); ok is false when the
// period is not closed for that customer.
func (cp *closedPeriod) closedAt(customer string) (int64, bool) {
	if head, ok := cp.invoiced[customer]; ok {
		return head, true
	}
	return cp.allHead, cp.allHead >= 0 && !cp.excluded[customer]
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
func closedPeriods(ctx context.Context, q closedSource, scope string) ([]*closedPeriod, error) {
	type pk struct{ start, end int64 }
	byKey := map[pk]*closedPeriod{}
	get := func(label, tz string, start, end int64) *closedPeriod {
		k := pk{start, end}
		cp := byKey[k]
		if cp == nil {
			cp = &closedPeriod{label: label, tz: tz, start: start, end: end, allHead: -1,
				excluded: map[string]bool{}, parts: map[string][]InvoicePart{}, invoiced: map[string]int64{}, lateBilled: map[string]int64{}}
			byKey[k] = cp
		}
		return cp
	}
	closes, err := q.PeriodCloses(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("read closed periods: %w", err)
	}
	xs, err := q.CloseExclusions(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the customers closes did not invoice: %w", err)
	}
	for _, c := range closes {
		cp := get(c.Period, c.TZ, c.PeriodStart, c.PeriodEnd)
		if c.Customer == "" {
			cp.allHead = c.LedgerHead
			for _, x := range xs {
				if x.CloseID == c.ID {
					cp.excluded[x.Customer] = true
				}
			}
		} else {
			cp.invoiced[c.Customer] = max(cp.invoiced[c.Customer], c.LedgerHead)
		}
	}
	invs, err := q.InvoiceHeads(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("read invoices: %w", err)
	}
	for _, inv := range invs {
		cp := get(inv.Period, inv.TZ, inv.PeriodStart, inv.PeriodEnd)
		cp.invoiced[inv.Customer] = max(cp.invoiced[inv.Customer], inv.LedgerHead)
		if inv.Parts != "" {
			if cp.parts[inv.Customer], err = decodeParts(inv.Parts); err != nil {
				return nil, fmt.Errorf("invoice of %s for %s: %w", inv.Customer, inv.Period, err)
			}
		}
	}
	billed, err := q.LateCoverage(ctx, scope)
	if err != nil {
		return nil, fmt.Errorf("read late lines: %w", err)
	}
	for _, b := range billed {
		cp := get(b.Period, b.TZ, b.PeriodStart, b.PeriodEnd)
		cp.lateBilled[b.Customer] = max(cp.lateBilled[b.Customer], b.ThroughID)
	}
	out := make([]*closedPeriod, 0, len(byKey))
	for _, cp := range byKey {
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b *closedPeriod) int { return cmp.Compare(a.start, b.start) })
	return out, nil
}

// lateLines finds usage of closed periods recorded after their close and not
// yet billed, up to ledger id head, as invoice lines naming their period:
// of the periods that fit an invoice starting at invoiceStart (lateFits;
// math.MaxInt64 for every closed period). A
// late line's quantity is the change to the period's total: the aggregate
// over everything up to head minus the aggregate already billed, which for
// sum and count is simply the late rows' own total.
//
// A meter the customer's price for the period bills by a dimension (split)
// gets one late line per value that changed, each the change to that
// value's own total and priced at the margin from it.
func lateLines(ctx context.Context, q closedSource, scope string, head, invoiceStart int64, meters ledger.Meters, skip map[string]bool, split splitter, noIndex bool) ([]InvoiceLine, error) {
	periods, err := closedPeriods(ctx, q, scope)
	if err != nil {
		return nil, err
	}
	type key struct {
		customer, meter, dims string
		part                  int // its part of a split period (0: the period)
	}
	type splitKey struct{ customer, meter string }
	var lines []InvoiceLine
	for _, cp := range periods {
		if !lateFits(cp.end, invoiceStart) {
			continue // pending until an invoice it fits
		}
		floor := cp.minCoverage()
		if floor >= head {
			continue
		}
		accs := map[key]*lineAcc{}
		by := map[splitKey]string{}
		var splitErr error
		f := schema.LedgerFilter{From: cp.start, To: cp.end, Customer: scope, AfterID: floor, ThroughID: head, NoIndex: noIndex}
		add := func(r lateRow) {
			k := key{r.customer, r.meter, "", partOfRow(cp.parts[r.customer], r.occ)}
			if split != nil {
				dim, ok := by[splitKey{r.customer, r.meter}]
				if !ok {
					var err error
					if dim, err = split(r.customer, r.meter, cp.start, cp.end, cp.tz, true); err != nil {
						splitErr = cmp.Or(splitErr, err)
						return
					}
					by[splitKey{r.customer, r.meter}] = dim
				}
				if dim != "" {
					k.dims = dimensionsOf(dim, ledger.DimensionValue(r.props, dim))
				}
			}
			la := accs[k]
			if la == nil {
				la = &lineAcc{agg: ledger.NewAggregate(meters.Get(r.meter).Spec())}
				accs[k] = la
			}
			la.add(r.kind, r.id, r.qty, r.occ, r.props, r.hash)
		}
		// Splitting reads what priced the closed period (pricer.lateVersion),
		// which on PostgreSQL cannot run on the close's connection while the
		// scan holds it: late rows are few, so they wait for the scan's end.
		var pending []lateRow
		err := ledgerScan(ctx, q, f, split != nil, func(id int64, kind, c, m string, qty ledger.Total, occ int64, props string, hash []byte) {
			if skip[c] {
				return
			}
			if cov, ok := cp.coverage(c); !ok || id <= cov {
				return
			}
			r := lateRow{id, kind, c, m, qty, occ, props, hash}
			if split != nil {
				pending = append(pending, r)
				return
			}
			add(r)
		})
		for _, r := range pending {
			add(r)
		}
		if err = cmp.Or(err, splitErr); err != nil {
			return nil, fmt.Errorf("late usage for %s: %w", cp.label, err)
		}
		for k, la := range accs {
			cov, _ := cp.coverage(k.customer)
			m := meters.Get(k.meter)
			only, err := filterOf(k.dims)
			if err != nil {
				return nil, err
			}
			l := InvoiceLine{Customer: k.customer, Meter: k.meter, Dimensions: k.dims, Aggregation: m.Aggregation, Property: m.Property, Unit: m.Unit,
				Late: true, Period: cp.label, TZ: cp.tz, PeriodStart: cp.start, PeriodEnd: cp.end, AfterID: cov, ThroughID: head,
				Rows: la.agg.Rows, Adjustments: la.agg.Adjustments, MaxID: la.maxID(), Digest: rowsDigest(la.rows)}
			if parts := cp.parts[k.customer]; parts != nil {
				l.PartStart, l.PartEnd = parts[k.part].Start, parts[k.part].End
			}
			from, to := l.window()
			delta, before, err := aggregateDelta(ctx, q, k.customer, m, only, from, to, cov, head)
			if err != nil {
				return nil, err
			}
			l.Quantity, l.Money = delta, LineMoney{BilledBefore: before.String()}
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// lateRow is one late row as lateLines reads it.
type lateRow struct {
	id       int64
	kind     string
	customer string
	meter    string
	qty      ledger.Total
	occ      int64
	props    string
	hash     []byte
}

// aggregateDelta is agg(rows with id <= through) - agg(rows with id <= after)
// for one customer, meter and period: what a line covering (after, through]
// adds to the period's billed total; before is agg(rows with id <= after),
// what was billed already (a late line is priced at the margin from it).
// Exact at any size. With only set, just the rows of one dimension value
// count: a line of that value, priced from that value's own total.
func aggregateDelta(ctx context.Context, q ledger.UsageSource, customer string, m ledger.Meter, only rowFilter, start, end, after, through int64) (delta, before ledger.Total, err error) {
	upTo, upToAfter := ledger.NewAggregate(m.Spec()).Window(start, end), ledger.NewAggregate(m.Spec()).Window(start, end)
	f := schema.LedgerFilter{Customer: customer, Meter: m.Name, From: start, To: end, ThroughID: through}
	if m.Aggregation == ledger.AggTimeWeighted {
		f.From = 0 // the last report before the period carries in
	}
	props := m.Spec().ReadsProperties() || only.name != ""
	err = ledgerScan(ctx, q, f, props, func(id int64, kind, _, _ string, qty ledger.Total, occ int64, props string, _ []byte) {
		if !only.keeps(props) {
			return
		}
		upTo.Add(kind, id, qty, occ, props)
		if id <= after {
			upToAfter.Add(kind, id, qty, occ, props)
		}
	})
	if err != nil {
		return ledger.Total{}, ledger.Total{}, err
	}
	return upTo.Value().Minus(upToAfter.Value()), upToAfter.Value(), nil
}

// LateLine is usage of a closed period recorded after its close and not yet
// billed: it will be billed by the customer's next invoice.
type LateLine struct {
	Customer    string             `json:"customer"`
	Meter       string             `json:"meter"`
	Period      string             `json:"period"`
	TZ          string             `json:"tz"`
	Aggregation ledger.Aggregation `json:"aggregation"`
	Quantity    ledger.Total       `json:"quantity"` // change to the period's total
	Unit        string             `json:"unit,omitempty"`
	Rows        int64              `json:"rows"`
	Adjustments int64              `json:"adjustments"`
	AfterID     int64              `json:"after_id"`
	MaxID       int64              `json:"max_id"`
}

// LateUsage lists unbilled late usage up to the current ledger head, of every
// closed period: the next invoice each fits will bill it.
func LateUsage(ctx context.Context, q LateSource, customer string, meters ledger.Meters) ([]LateLine, error) {
	head, err := ledger.LoadChain(ctx, q)
	if err != nil {
		return nil, err
	}
	lines, err := lateLines(ctx, q, customer, head.LastID, math.MaxInt64, meters, nil, nil, false)
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

// partOfRow is the index of the part of a split period (parts; nil: not
// split) a row with event time occurred belongs to.
func partOfRow(parts []InvoicePart, occurred int64) int {
	for i, pt := range parts {
		if occurred >= pt.Start && occurred < pt.End {
			return i
		}
	}
	return 0
}
