package invoice

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Closing a month for every customer reads the month's rows once: at 10M
// rows that is ~800k rows, so this path avoids per-row allocations and
// per-row index lookups (schema.CloseTx.ScanPeriod reads it without
// allocating per row). Everything else reads through ledgerScan.

// rangeSlack bounds how sparse an id range may be before the close reads the
// period through the event-time index instead: rows arrive roughly in event
// time, so a month's rows are nearly one contiguous id range.
const rangeSlack = 2

// periodRange returns the id range [lo, hi] holding the period's rows up to
// head, and whether scanning it in rowid order beats the event-time index.
func periodRange(ctx context.Context, tx closeStore, f schema.LedgerFilter) (lo, hi int64, ok bool, err error) {
	lo, hi, n, err := tx.PeriodRange(ctx, f)
	if err != nil {
		return 0, 0, false, fmt.Errorf("read period range: %w", err)
	}
	if lo == 0 {
		return 0, 0, false, nil
	}
	span := hi - lo + 1
	return lo, hi, span <= rangeSlack*n+1024, nil
}

// lineSet holds one customer's line accumulators, one per meter, or for a
// meter priced by a dimension one per value (dimprice.go), and in a period
// split at a plan change one per part as well (parts.go).
type lineSet struct {
	customer string
	skip     bool // already invoiced for this period
	meters   []string
	dims     []string // per accumulator: its line's dimensions, "" for a meter's one line
	parts    []int    // per accumulator: its part's index
	accs     []*lineAcc
	by       map[string]string // meter -> the dimension its price splits it by ("" none), as meters appear
	split    []part            // the customer's parts; nil: one
	bounds   []int64           // where its parts after the first start
}

// lineDims is the dimensions of the line a row of meter with properties
// props goes on: "" unless the customer's price splits the meter by a
// dimension (split nil: none does).
func (set *lineSet) lineDims(split splitter, meter, props []byte, start, end int64, tz string) (string, error) {
	if split == nil {
		return "", nil
	}
	by, ok := set.by[string(meter)]
	if !ok {
		m := string(meter)
		var err error
		if by, err = split(set.customer, m, start, end, tz, false); err != nil {
			return "", err
		}
		if set.by == nil {
			set.by = map[string]string{}
		}
		set.by[m] = by
	}
	if by == "" {
		return "", nil
	}
	return dimensionsOf(by, ledger.DimensionValue(string(props), by)), nil
}

// acc is the accumulator of meter's line with dimensions dims in part
// (0 when the period is not split), made with newAcc when the set has none
// yet.
func (set *lineSet) acc(meter []byte, dims string, part int, newAcc func(meter string, part int) *lineAcc) *lineAcc {
	for i, m := range set.meters {
		if m == string(meter) && set.dims[i] == dims && set.parts[i] == part {
			return set.accs[i]
		}
	}
	m := string(meter)
	la := newAcc(m, part)
	set.meters, set.dims, set.parts, set.accs = append(set.meters, m), append(set.dims, dims), append(set.parts, part), append(set.accs, la)
	return la
}

// window is the event time part of the set bills: the part's, or the
// period [from, to) when the period is not split.
func (set *lineSet) window(part int, from, to int64) (int64, int64) {
	if set.split == nil {
		return from, to
	}
	return set.split[part].start, set.split[part].end
}

// hashArena hands out 32-byte row hashes from large blocks, so keeping
// ~800k of them for the digests costs a few allocations, not 800k.
type hashArena struct{ block []byte }

func (a *hashArena) copy(b []byte) []byte {
	if len(a.block)+len(b) > cap(a.block) {
		a.block = make([]byte, 0, max(1<<16, len(b)))
	}
	a.block = append(a.block, b...)
	return a.block[len(a.block)-len(b) : len(a.block) : len(a.block)]
}

// periodLines bills the period's rows up to the ledger head, per customer and
// meter, and per part for a customer whose period splits at a plan change
// (partsOf; nil: none does).
func periodLines(ctx context.Context, tx closeStore, req CloseRequest, head int64, skip map[string]bool, split splitter,
	partsOf func(customer string) ([]part, error)) ([]InvoiceLine, error) {
	p := req.Period
	if head == 0 {
		return nil, nil
	}
	f := schema.LedgerFilter{From: p.Start.UnixMilli(), To: p.End.UnixMilli(), Customer: req.Customer, ThroughID: head, NoIndex: req.noIndex}
	var lo, hi int64
	ranged := false
	if req.Customer == "" && !req.noIndex && !noRangeScan {
		var err error
		// No row in the period (lo == 0) still goes on: a gauge reported
		// before it carries in.
		if lo, hi, ranged, err = periodRange(ctx, tx, f); err != nil {
			return nil, fmt.Errorf("close %s: %w", p.Label, err)
		}
	}

	sets := map[string]*lineSet{}
	var order []*lineSet
	var arena hashArena
	newSet := func(c string) *lineSet {
		set := &lineSet{customer: c, skip: skip[c]}
		sets[c] = set
		if !set.skip {
			order = append(order, set)
			// A customer whose parts cannot be worked out (a plan not
			// declared) is left whole here: pricing its invoice meets the
			// same error and reports it (a close for all excludes it).
			if parts, err := partsOf(c); err == nil && parts != nil {
				set.split, set.bounds = parts, boundaries(parts)
			}
		}
		return set
	}
	newAccOf := func(set *lineSet) func(m string, part int) *lineAcc {
		return func(m string, part int) *lineAcc {
			from, to := set.window(part, f.From, f.To)
			return &lineAcc{agg: ledger.NewAggregate(req.Meters.Get(m).Spec()).Window(from, to)}
		}
	}
	scan := periodScan(req.Meters, f, lo, hi, ranged)
	scan.Properties = scan.Properties || split != nil // a line per dimension value reads the value
	err := tx.ScanPeriod(ctx, scan, func(r *schema.PeriodRow) error {
		set := sets[string(r.Customer)] // no allocation for the lookup
		if set == nil {
			set = newSet(string(r.Customer))
		}
		if set.skip {
			return nil
		}
		dims, err := set.lineDims(split, r.Meter, r.Properties, f.From, p.End.UnixMilli(), p.Zone)
		if err != nil {
			return err
		}
		part := 0
		if set.bounds != nil {
			part = partIndex(set.bounds, r.OccurredAt)
		}
		la := set.acc(r.Meter, dims, part, newAccOf(set))
		kind := ledger.KindUsage
		switch {
		case r.Adjustment:
			kind = ledger.KindAdjustment
		case r.Void:
			kind = ledger.KindVoid
		}
		var pr string
		if la.agg.Spec.ReadsProperties() {
			pr = string(r.Properties)
		}
		q := ledger.RowQuantity(r.Quantity, int(r.Decimals))
		la.add(kind, r.ID, q, r.OccurredAt, pr, arena.copy(r.RowHash))
		if la.agg.Spec.Agg == ledger.AggTimeWeighted {
			// A gauge's last report in a part carries into the parts after
			// it, as one before the period carries into the period.
			for j := part + 1; j < len(set.split); j++ {
				set.acc(r.Meter, dims, j, newAccOf(set)).agg.Add(kind, r.ID, q, r.OccurredAt, pr)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("close %s: read ledger: %w", p.Label, err)
	}
	// A gauge reported before the period holds into it: its last report
	// before the start carries in, and bills even without a report inside
	// (the line then covers no rows). The carried row is not covered by the
	// line (an earlier invoice covers it); verify recomputes the quantity
	// the same way (aggregateDelta).
	for _, name := range slices.Sorted(maps.Keys(req.Meters)) {
		m := req.Meters[name]
		if m.Aggregation != ledger.AggTimeWeighted {
			continue
		}
		cf := schema.LedgerFilter{Customer: req.Customer, Meter: name, To: f.From, ThroughID: head, NoIndex: req.noIndex}
		var splitErr error
		err := ledgerScan(ctx, tx, cf, true, func(id int64, kind, c, _ string, qty ledger.Total, occ int64, props string, _ []byte) {
			set := sets[c]
			if set == nil {
				set = newSet(c)
			}
			if set.skip {
				return
			}
			dims, err := set.lineDims(split, []byte(name), []byte(props), f.From, p.End.UnixMilli(), p.Zone)
			if err != nil {
				splitErr = cmp.Or(splitErr, err)
				return
			}
			for part := range max(1, len(set.split)) { // before the window: carried into every part, not covered
				set.acc([]byte(name), dims, part, newAccOf(set)).agg.Add(kind, id, qty, occ, props)
			}
		})
		if err = cmp.Or(err, splitErr); err != nil {
			return nil, fmt.Errorf("close %s: %w", p.Label, err)
		}
	}
	var lines []InvoiceLine
	for _, set := range order {
		for i, la := range set.accs {
			m := req.Meters.Get(set.meters[i])
			l := InvoiceLine{Customer: set.customer, Meter: m.Name, Dimensions: set.dims[i], Aggregation: m.Aggregation, Property: m.Property, Unit: m.Unit,
				Period: p.Label, TZ: p.Zone, PeriodStart: p.Start.UnixMilli(), PeriodEnd: p.End.UnixMilli(), AfterID: 0, ThroughID: head,
				Quantity: la.agg.Value(), Rows: la.agg.Rows, Adjustments: la.agg.Adjustments, MaxID: la.maxID(), Digest: rowsDigest(la.rows),
				Money: LineMoney{BilledBefore: "0"}}
			if set.split != nil {
				l.PartStart, l.PartEnd = set.split[set.parts[i]].start, set.split[set.parts[i]].end
			}
			lines = append(lines, l)
		}
	}
	return lines, nil
}

// noRangeScan makes closes read through the event-time index (tests compare both paths).
var noRangeScan bool

// periodScan is the read a close reads its period with: the id range
// [lo, hi] in rowid order when ranged, else the rows f selects (through the
// event-time or customer index). Properties are read only for unique_count
// meters, the one aggregation that needs them.
func periodScan(ms ledger.Meters, f schema.LedgerFilter, lo, hi int64, ranged bool) schema.PeriodScan {
	return schema.PeriodScan{Filter: f, Lo: lo, Hi: hi, Ranged: ranged, Properties: ledger.NeedsProperties(ms, "")}
}
