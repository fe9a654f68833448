package ledger

import (
	"github.com/tidwall/gjson"
)

// Aggregate accumulates one group's rows. Usage rows feed the meter's
// aggregation; adjustment rows add their signed quantity to its result; a
// void row takes its usage row back out: on a sum meter its quantity (the
// voided row's, negated), on a count meter one row. Only sum and count
// meters can be voided (Meter.Voidable); a void on a meter whose aggregation
// was changed since counts as an adjustment of its quantity.
type Aggregate struct {
	Spec Spec

	Rows        int64 // usage rows
	Adjustments int64 // correction rows: adjustments and voids
	adjusted    Total // exact: sums never wrap

	sum      Total
	max, min Total
	latestAt int64
	latestID int64
	latest   Total
	distinct map[string]struct{}

	// time_weighted: the window integrated over (unix ms, 0 open) and the
	// gauges seen (gauge.go).
	from, to   int64
	series     map[string]*gauge
	adjustedAt []gaugePoint // the adjustments, dated: a query by day bills each on its day
}

// Window sets the event-time window a time_weighted aggregate integrates
// over; rows before from only carry their value in. Other aggregations
// ignore it.
func (a *Aggregate) Window(from, to int64) *Aggregate {
	a.from, a.to = from, to
	return a
}

// ReadsProperties reports whether the aggregation reads rows' properties.
func (s Spec) ReadsProperties() bool { return s.Agg == AggUniqueCount || s.Agg == AggTimeWeighted }

func NewAggregate(s Spec) *Aggregate {
	a := &Aggregate{Spec: s}
	if s.Agg == AggUniqueCount {
		a.distinct = make(map[string]struct{})
	}
	return a
}

// Add feeds one row. properties is only read by unique_count and
// time_weighted. A time_weighted aggregate also takes rows from before its
// window: they only carry their value in (adjustments there count for
// nothing).
func (a *Aggregate) Add(kind string, id int64, q Total, occurredAt int64, properties string) {
	if a.Spec.Agg == AggTimeWeighted && a.from != 0 && occurredAt < a.from {
		if kind == KindUsage {
			a.gaugeAdd(id, q, occurredAt, properties)
		}
		return
	}
	switch kind {
	case KindAdjustment:
		if a.Spec.Agg == AggTimeWeighted {
			a.adjustedAt = append(a.adjustedAt, gaugePoint{occurredAt, id, q})
		}
		a.Adjustments++
		a.adjusted.add(q)
		return
	case KindVoid:
		a.Adjustments++
		if a.Spec.Agg == AggCount {
			q = countTotal(1).Neg()
		}
		a.adjusted.add(q)
		return
	}
	switch {
	case a.Rows == 0:
		a.max, a.min = q, q
	case q.big == nil && a.max.big == nil && a.min.big == nil: // without Cmp's detour for wide values
		a.max.n, a.min.n = max(a.max.n, q.n), min(a.min.n, q.n)
	default:
		if q.Cmp(a.max) > 0 {
			a.max = q
		}
		if q.Cmp(a.min) < 0 {
			a.min = q
		}
	}
	a.Rows++
	a.sum.add(q)
	// Latest by event time; among rows with the same event time, the one
	// recorded last (highest id) wins, so the answer never depends on scan order.
	if a.Rows == 1 || occurredAt > a.latestAt || (occurredAt == a.latestAt && id > a.latestID) {
		a.latestAt, a.latestID, a.latest = occurredAt, id, q
	}
	if a.Spec.Agg == AggTimeWeighted {
		a.gaugeAdd(id, q, occurredAt, properties)
	}
	if a.distinct != nil {
		// Values compare as canonical JSON text; rows without the property
		// (or with null) do not count, like SQL's COUNT(DISTINCT x).
		if v, ok := property(properties, a.Spec.property); ok {
			a.distinct[v] = struct{}{}
		}
	}
}

// Value is the billed quantity, exactly: the aggregate of the usage rows (0
// when there are none) plus the adjustments, at any size. It is a fresh
// Total (Plus), never the accumulator's own.
func (a *Aggregate) Value() Total {
	var v Total
	if a.Rows > 0 {
		switch a.Spec.Agg {
		case AggSum:
			v = a.sum
		case AggCount:
			v = countTotal(a.Rows)
		case AggMax:
			v = a.max
		case AggMin:
			v = a.min
		case AggLatest:
			v = a.latest
		case AggUniqueCount:
			v = countTotal(int64(len(a.distinct)))
		case AggAvg:
			v = a.average()
		}
	}
	if a.Spec.Agg == AggTimeWeighted {
		v = a.timeWeighted() // a value carried in bills without a report inside
	}
	return v.Plus(a.adjusted)
}

// property returns the raw JSON of a top-level key of a row's properties
// object; ok is false when the key is missing or null. The key is matched
// literally, so names with dots or wildcards need no escaping.
func property(properties, key string) (raw string, ok bool) {
	gjson.Parse(properties).ForEach(func(k, v gjson.Result) bool {
		if k.Str == key {
			raw, ok = v.Raw, v.Type != gjson.Null
			return false
		}
		return true
	})
	return raw, ok
}
