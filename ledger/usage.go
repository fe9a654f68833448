package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// UsageQuery selects ledger rows by event time, half-open: From <= occurred_at < To.
// A zero From or To leaves that side open.
type UsageQuery struct {
	From, To time.Time
	Customer string
	Meter    string

	// Zone buckets hours, days and months (nil: UTC).
	Zone *time.Location
	// GroupBy holds customer, meter, meters' dimensions and at most one of
	// hour, day, month; nil means customer,meter and an empty slice one line
	// for everything.
	GroupBy []string
	// Where keeps rows whose dimensions pass every condition.
	Where []Condition
	// AsOf keeps rows recorded before it (recorded_at < AsOf): an earlier
	// answer again, ignoring what arrived since.
	AsOf time.Time
	// AsOfID keeps rows with ledger id <= AsOfID (exact; invoices record it).
	AsOfID int64
	// Meters declares aggregations and units; undeclared meters are summed.
	Meters Meters

	noIndex bool
}

// Grouping dimensions accepted by --group-by.
const (
	GroupCustomer = "customer"
	GroupMeter    = "meter"
)

// ErrMixedMeters means a group without meter would combine meters whose
// aggregations or units differ; the caller asked a question with no answer.
var ErrMixedMeters = errors.New("cannot combine meters")

// DefaultGroupBy is the grouping when none is given.
var DefaultGroupBy = []string{GroupCustomer, GroupMeter}

// UsageParams is a usage query as text, the way the CLI flags and the admin
// API's query parameters carry it. Both parse it here, so they cannot differ.
type UsageParams struct {
	From, To string // times; dates and months are read in TZ
	TZ       string // IANA zone for date arguments and grouping (default UTC)
	Customer string
	Meter    string
	GroupBy  string // comma-separated: customer,meter,a dimension,hour|day|month
	Where    string // dimension conditions: model=gpt-4o,region!=eu,tier in (a,b)
	AsOf     string // ingestion cutoff: a time (rows recorded before it) or id:N (rows with ledger id <= N)
}

// Query validates p. Error messages start with the parameter's name.
func (p UsageParams) Query(meters Meters) (UsageQuery, error) {
	q := UsageQuery{Customer: p.Customer, Meter: p.Meter, Meters: meters}
	var err error
	if q.Zone, err = LoadZone(p.TZ); err != nil {
		return q, fmt.Errorf("tz: %w", err)
	}
	for _, b := range []struct {
		name, val string
		dst       *time.Time
	}{{"from", p.From, &q.From}, {"to", p.To, &q.To}} {
		if b.val == "" {
			continue
		}
		if *b.dst, err = ParseTime(b.val, q.Zone); err != nil {
			return q, fmt.Errorf("%s: %w", b.name, err)
		}
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return q, fmt.Errorf("from: must be before to (the window is half-open: from <= event time < to)")
	}
	if p.GroupBy != "" {
		if q.GroupBy, err = parseGroupBy(p.GroupBy, meters.declaredDimensions()); err != nil {
			return q, fmt.Errorf("group-by: %w", err)
		}
	}
	if p.Where != "" {
		if q.Where, err = ParseWhere(p.Where); err != nil {
			return q, fmt.Errorf("where: %w", err)
		}
		dims := meters.declaredDimensions()
		for _, c := range q.Where {
			if !slices.Contains(dims, c.Name) {
				return q, fmt.Errorf("where: %q is not a dimension of any meter (%s)", c.Name, dimensionList(dims))
			}
		}
	}
	if p.AsOf != "" {
		if id, ok := strings.CutPrefix(p.AsOf, "id:"); ok {
			n, err := strconv.ParseInt(id, 10, 64)
			if err != nil || n < 0 {
				return q, fmt.Errorf("as-of: %q: after id: comes a ledger row id", p.AsOf)
			}
			q.AsOfID = n
		} else if q.AsOf, err = ParseTime(p.AsOf, q.Zone); err != nil {
			return q, fmt.Errorf("as-of: %w (or id:N for a ledger id)", err)
		}
	}
	return q, nil
}

func dimensionList(dims []string) string {
	if len(dims) == 0 {
		return "no meter declares dimensions"
	}
	return "dimensions: " + strings.Join(dims, ", ")
}

func parseGroupBy(s string, dims []string) ([]string, error) {
	var out []string
	var grain string
	for _, g := range strings.Split(s, ",") {
		g = strings.TrimSpace(g)
		switch g {
		case GroupCustomer, GroupMeter:
		case string(ByHour), string(ByDay), string(ByMonth):
			if grain != "" {
				return nil, fmt.Errorf("%s and %s: pick one time bucket", grain, g)
			}
			grain = g
		case "":
			continue
		default:
			if !slices.Contains(dims, g) {
				return nil, fmt.Errorf("%q is not one of customer, meter, hour, day, month or a meter's dimension (%s)", g, dimensionList(dims))
			}
		}
		if slices.Contains(out, g) {
			return nil, fmt.Errorf("%q is listed twice", g)
		}
		out = append(out, g)
	}
	if out == nil {
		return []string{}, nil // group everything into one line
	}
	return out, nil
}

// UsageLine is one group of a usage report.
type UsageLine struct {
	Customer string `json:"customer,omitempty"`
	Meter    string `json:"meter,omitempty"`
	// Dimensions holds the value of each dimension grouped by; "" is the
	// group of rows without the property.
	Dimensions  map[string]string `json:"dimensions,omitempty"`
	Period      string            `json:"period,omitempty"` // the time bucket as read in the query's zone
	PeriodStart string            `json:"period_start,omitempty"`
	PeriodEnd   string            `json:"period_end,omitempty"`
	Aggregation Aggregation       `json:"aggregation"`
	Quantity    Total             `json:"quantity"`
	Unit        string            `json:"unit,omitempty"`
	Events      int64             `json:"events"`      // usage rows
	Adjustments int64             `json:"adjustments"` // adjustment rows (their sum is in Quantity)

	bucket int64
}

// UsageReport is the answer to a usage query, with the query that produced it
// so an exported file says what it contains.
type UsageReport struct {
	From    string      `json:"from,omitempty"`
	To      string      `json:"to,omitempty"`
	TZ      string      `json:"tz"`
	GroupBy []string    `json:"group_by"`
	Where   []string    `json:"where,omitempty"`
	AsOf    string      `json:"as_of,omitempty"`
	AsOfID  int64       `json:"as_of_id,omitempty"`
	Lines   []UsageLine `json:"lines"`
}

// Records renders the report as a header and rows (for tables and CSV).
func (r *UsageReport) Records() ([]string, [][]string) {
	var header []string
	has := func(g string) bool { return slices.Contains(r.GroupBy, g) }
	grain, dims := splitGroupBy(r.GroupBy)
	if has(GroupCustomer) {
		header = append(header, "customer")
	}
	if has(GroupMeter) {
		header = append(header, "meter")
	}
	header = append(header, dims...)
	if grain != "" {
		header = append(header, string(grain))
	}
	header = append(header, "aggregation", "quantity", "unit", "events", "adjustments")
	rows := make([][]string, len(r.Lines))
	for i, l := range r.Lines {
		var row []string
		if has(GroupCustomer) {
			row = append(row, l.Customer)
		}
		if has(GroupMeter) {
			row = append(row, l.Meter)
		}
		for _, d := range dims {
			row = append(row, l.Dimensions[d])
		}
		if grain != "" {
			row = append(row, l.Period)
		}
		rows[i] = append(row, string(l.Aggregation), l.Quantity.String(), l.Unit,
			strconv.FormatInt(l.Events, 10), strconv.FormatInt(l.Adjustments, 10))
	}
	return header, rows
}

func (q UsageQuery) filter() schema.LedgerFilter {
	f := schema.LedgerFilter{Customer: q.Customer, Meter: q.Meter, ThroughID: q.AsOfID, NoIndex: q.noIndex}
	if !q.From.IsZero() {
		f.From = q.From.UnixMilli()
	}
	if !q.To.IsZero() {
		f.To = q.To.UnixMilli()
	}
	if !q.AsOf.IsZero() {
		f.RecordedBefore = q.AsOf.UnixMilli()
	}
	return f
}

// NeedsProperties reports whether any meter in scope is a unique_count or a
// time_weighted gauge, the aggregations that read properties (skipping them
// keeps scans cheap).
func NeedsProperties(ms Meters, meter string) bool {
	for _, m := range ms {
		if m.Spec().ReadsProperties() && (meter == "" || meter == m.Name) {
			return true
		}
	}
	return false
}

// usageScan is the read Query runs (benchmarks EXPLAIN it).
func usageScan(q UsageQuery) schema.UsageScan {
	_, dims := splitGroupBy(q.GroupBy)
	props := NeedsProperties(q.Meters, q.Meter) || len(dims) > 0 || len(q.Where) > 0
	return schema.UsageScan{Filter: q.filter(), Properties: props}
}

// splitGroupBy separates the time bucket (if any) and the dimensions of a
// grouping from customer and meter.
func splitGroupBy(groupBy []string) (grain Granularity, dims []string) {
	for _, g := range groupBy {
		switch g {
		case GroupCustomer, GroupMeter:
		case string(ByHour), string(ByDay), string(ByMonth):
			grain = Granularity(g)
		default:
			dims = append(dims, g)
		}
	}
	return grain, dims
}

// gaugeGroup is the bucket of a time_weighted group while its rows are read.
const gaugeGroup = math.MinInt64

// gaugeBuckets splits a time_weighted group into one line per bucket of the
// window in which it holds a value, each integrating its own bucket with the
// value held at its start carried in: a month by day shows every day the
// value was held (empty days included), and the days add up to the month.
func gaugeBuckets(k groupKey, a *Aggregate, grain Granularity, zone *time.Location, dims, vals []string) []UsageLine {
	first, last, ok := a.span()
	if !ok {
		return nil
	}
	var lines []UsageLine
	// An open window ends at the last report, inclusive: its bucket counts it.
	for s := bucketStart(grain, first, zone); s.UnixMilli() < last || (a.to == 0 && s.UnixMilli() <= last); s = bucketEnd(grain, s) {
		bs, be := max(s.UnixMilli(), first), bucketEnd(grain, s).UnixMilli()
		if a.to != 0 {
			be = min(be, a.to)
		}
		v, rows, adjs := a.inBucket(bs, be, last)
		l := UsageLine{Customer: k.customer, Meter: k.meter, Aggregation: a.Spec.Agg, Unit: a.Spec.unit, Quantity: v,
			Events: rows, Adjustments: adjs, bucket: s.UnixMilli(), Period: bucketLabel(grain, s),
			PeriodStart: s.Format(time.RFC3339), PeriodEnd: bucketEnd(grain, s).Format(time.RFC3339)}
		if len(dims) > 0 {
			l.Dimensions = make(map[string]string, len(dims))
			for i, d := range dims {
				l.Dimensions[d] = vals[i]
			}
		}
		lines = append(lines, l)
	}
	return lines
}

type groupKey struct {
	customer, meter string
	dims            string // dimensionsKey of the grouped values
	bucket          int64
}

// Query answers a usage query. Rows are aggregated per group in Go, where
// the time zone rules and every aggregation are exact; the indexed WHERE
// clause keeps the rows read to those in scope.
func Query(ctx context.Context, src UsageSource, q UsageQuery) (*UsageReport, error) {
	if q.Zone == nil {
		q.Zone = time.UTC
	}
	if q.GroupBy == nil {
		q.GroupBy = DefaultGroupBy
	}
	byCustomer, byMeter := slices.Contains(q.GroupBy, GroupCustomer), slices.Contains(q.GroupBy, GroupMeter)
	grain, dims := splitGroupBy(q.GroupBy)
	// One pass over each row's properties reads the grouped dimensions
	// (first) and the filtered ones (after them).
	names := slices.Clone(dims)
	for _, c := range q.Where {
		names = append(names, c.Name)
	}
	vals := make([]string, len(names))
	dimVals := map[string][]string{} // dimensionsKey -> the values, for the lines
	groups := map[groupKey]*Aggregate{}
	var firstMeter string
	var firstSpec Spec
	var bStart, bEnd int64 = 1, 0 // cached bucket; empty until the first row
	var from, to int64
	if !q.From.IsZero() {
		from = q.From.UnixMilli()
	}
	if !q.To.IsZero() {
		to = q.To.UnixMilli()
	}
	feed := func(r *schema.UsageRow) error {
		if len(names) > 0 {
			dimensionValues(r.Properties, names, vals)
			for i, c := range q.Where {
				if !c.match(vals[len(dims)+i]) {
					return nil
				}
			}
		}
		var k groupKey
		if len(dims) > 0 {
			k.dims = dimensionsKey(vals[:len(dims)])
			if _, ok := dimVals[k.dims]; !ok {
				dimVals[k.dims] = slices.Clone(vals[:len(dims)])
			}
		}
		if byCustomer {
			k.customer = r.Customer
		}
		if byMeter {
			k.meter = r.Meter
		}
		if grain != "" {
			if r.OccurredAt < bStart || r.OccurredAt >= bEnd {
				s := bucketStart(grain, r.OccurredAt, q.Zone)
				bStart, bEnd = s.UnixMilli(), bucketEnd(grain, s).UnixMilli()
			}
			k.bucket = bStart
		}
		m := q.Meters.Get(r.Meter)
		if !byMeter {
			// Every group must mean the same thing, whatever the data
			// happens to put in each bucket.
			if firstMeter == "" {
				firstMeter, firstSpec = r.Meter, m.Spec()
			} else if m.Spec() != firstSpec {
				return fmt.Errorf("%w: meters %q and %q aggregate differently (%s %s vs %s %s): group by meter or pick one with --meter",
					ErrMixedMeters, firstMeter, r.Meter, firstSpec.Agg, firstSpec.unit, m.Aggregation, m.Unit)
			}
		}
		if m.Aggregation == AggTimeWeighted && grain != "" {
			// A gauge's value carries from one bucket into the next: its
			// rows gather in one group over the window, split into buckets
			// at the end (gaugeBuckets).
			k.bucket = gaugeGroup
		}
		a := groups[k]
		if a == nil {
			a = NewAggregate(m.Spec()).Window(from, to)
			groups[k] = a
		}
		a.Add(r.Kind, r.ID, RowQuantity(r.Quantity, int(r.Decimals)), r.OccurredAt, r.Properties)
		return nil
	}
	err := src.ScanUsage(ctx, usageScan(q), feed)
	if err == nil && from != 0 {
		// A gauge's value reported before the window carries into it: read
		// each time_weighted meter's earlier rows (the aggregate keeps only
		// the last report of each gauge).
		for _, name := range slices.Sorted(maps.Keys(q.Meters)) {
			m := q.Meters[name]
			if m.Aggregation != AggTimeWeighted || (q.Meter != "" && q.Meter != name) {
				continue
			}
			f := q.filter()
			f.Meter, f.From, f.To = name, 0, from
			if err = src.ScanUsage(ctx, schema.UsageScan{Filter: f, Properties: true}, feed); err != nil {
				break
			}
		}
	}
	if errors.Is(err, ErrMixedMeters) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("query usage: %w", err)
	}

	rep := &UsageReport{TZ: q.Zone.String(), GroupBy: q.GroupBy, AsOfID: q.AsOfID, Lines: make([]UsageLine, 0, len(groups))}
	for _, c := range q.Where {
		rep.Where = append(rep.Where, c.String())
	}
	if !q.From.IsZero() {
		rep.From = q.From.In(q.Zone).Format(time.RFC3339Nano)
	}
	if !q.To.IsZero() {
		rep.To = q.To.In(q.Zone).Format(time.RFC3339Nano)
	}
	if !q.AsOf.IsZero() {
		rep.AsOf = q.AsOf.In(q.Zone).Format(time.RFC3339Nano)
	}
	keys := slices.SortedFunc(maps.Keys(groups), func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.customer, b.customer), cmp.Compare(a.meter, b.meter), slices.Compare(dimVals[a.dims], dimVals[b.dims]),
			cmp.Compare(a.bucket, b.bucket))
	})
	for _, k := range keys {
		a := groups[k]
		if k.bucket == gaugeGroup {
			rep.Lines = append(rep.Lines, gaugeBuckets(k, a, grain, q.Zone, dims, dimVals[k.dims])...)
			continue
		}
		l := UsageLine{Customer: k.customer, Meter: k.meter, Aggregation: a.Spec.Agg, Unit: a.Spec.unit,
			Events: a.Rows, Adjustments: a.Adjustments, bucket: k.bucket}
		if len(dims) > 0 {
			l.Dimensions = make(map[string]string, len(dims))
			for i, d := range dims {
				l.Dimensions[d] = dimVals[k.dims][i]
			}
		}
		if grain != "" {
			s := time.UnixMilli(k.bucket).In(q.Zone)
			l.Period = bucketLabel(grain, s)
			l.PeriodStart = s.Format(time.RFC3339)
			l.PeriodEnd = bucketEnd(grain, s).Format(time.RFC3339)
		}
		l.Quantity = a.Value()
		rep.Lines = append(rep.Lines, l)
	}
	return rep, nil
}
