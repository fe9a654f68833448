package ledger

import (
	"cmp"
	"math/big"
	"slices"
)

// Gauges: time_weighted integrates a reported value over time, the way
// storage is billed per GB-month rather than at its peak. Each usage row
// reports the gauge's value from its event time until the next report of the
// same gauge; the value reported last before the window's start carries in.
// The result is the value × hours held, exact: the integral is summed in
// micro-units × milliseconds as an integer and divided by an hour's
// milliseconds once, rounded half-even to the ledger's micro-units (the one
// rounding, as for avg).
//
// A gauge is one customer's meter with one set of properties (a row's
// canonical properties JSON): storage reported per region with the region a
// dimension is one gauge per region, and the regions add up. The series is
// read from the rows alone, so verify recomputes a line without the
// configuration.

// msPerHour turns value × milliseconds into value × hours.
var msPerHour = big.NewInt(3_600_000)

type gaugePoint struct {
	at, id int64
	q      Total
}

// later reports whether p was reported after o (event time, then ledger id,
// the order latest uses).
func (p gaugePoint) later(o gaugePoint) bool {
	return p.at > o.at || (p.at == o.at && p.id > o.id)
}

// gauge is one series: the report carried in from before the window, and the
// reports inside it.
type gauge struct {
	carry    gaugePoint
	hasCarry bool
	points   []gaugePoint
}

// gaugeAdd feeds one usage row of a time_weighted aggregate: before the
// window it is a candidate to carry in, inside it a report.
func (a *Aggregate) gaugeAdd(id int64, q Total, at int64, props string) (carried bool) {
	if a.series == nil {
		a.series = map[string]*gauge{}
	}
	g := a.series[props]
	if g == nil {
		g = &gauge{}
		a.series[props] = g
	}
	p := gaugePoint{at, id, q}
	if a.from != 0 && at < a.from {
		if !g.hasCarry || p.later(g.carry) {
			g.carry, g.hasCarry = p, true
		}
		return true
	}
	g.points = append(g.points, p)
	return false
}

// timeWeighted is Σ value × hours over every series in [from, to). An open
// start begins at a series' first report; an open end stops at the last
// report of any series (a usage query without --to has no other end).
func (a *Aggregate) timeWeighted() Total {
	end := a.to
	if end == 0 {
		for _, g := range a.series {
			for _, p := range g.points {
				end = max(end, p.at)
			}
		}
	}
	sum, term := new(big.Int), new(big.Int)
	for _, g := range a.series {
		slices.SortFunc(g.points, func(x, y gaugePoint) int { return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.id, y.id)) })
		cur, since, held := g.carry.q, a.from, g.hasCarry
		for _, p := range g.points {
			if held && p.at > since {
				sum.Add(sum, term.Mul(cur.bigInt(), big.NewInt(p.at-since)))
			}
			cur, since, held = p.q, p.at, true
		}
		if held && end > since {
			sum.Add(sum, term.Mul(cur.bigInt(), big.NewInt(end-since)))
		}
	}
	return fromBig(quoHalfEven(sum, msPerHour))
}

// inBucket is what a time_weighted aggregate bills in one bucket [bs, be)
// of its window: the integral over [bs, min(be, stop)) (the value held at bs
// carrying in) plus the adjustments dated inside, and the rows dated inside.
func (a *Aggregate) inBucket(bs, be, stop int64) (v Total, rows, adjustments int64) {
	end := min(be, stop)
	sum, term := new(big.Int), new(big.Int)
	for _, g := range a.series {
		slices.SortFunc(g.points, func(x, y gaugePoint) int { return cmp.Or(cmp.Compare(x.at, y.at), cmp.Compare(x.id, y.id)) })
		cur, since, held := g.carry.q, bs, g.hasCarry
		for _, p := range g.points {
			if p.at >= be {
				break
			}
			if p.at < bs {
				cur, held = p.q, true
				continue
			}
			rows++
			if held && p.at > since {
				sum.Add(sum, term.Mul(cur.bigInt(), big.NewInt(min(p.at, end)-since)))
			}
			cur, since, held = p.q, min(p.at, end), true
		}
		if held && end > since {
			sum.Add(sum, term.Mul(cur.bigInt(), big.NewInt(end-since)))
		}
	}
	v = fromBig(quoHalfEven(sum, msPerHour))
	for _, adj := range a.adjustedAt {
		if adj.at >= bs && adj.at < be {
			v = v.Plus(adj.q)
			adjustments++
		}
	}
	return v, rows, adjustments
}

// span is the event time from which a time_weighted aggregate holds a
// value (its window's start, or its first report) to its end (the window's
// end, or its last report, the way timeWeighted ends an open window); ok is
// false when it holds none.
func (a *Aggregate) span() (first, last int64, ok bool) {
	for _, g := range a.series {
		if g.hasCarry {
			first, ok = a.from, true
			break
		}
		for _, p := range g.points {
			if !ok || p.at < first {
				first, ok = p.at, true
			}
		}
	}
	for _, adj := range a.adjustedAt {
		if !ok || adj.at < first {
			first, ok = adj.at, true
		}
	}
	last = a.to
	if last == 0 {
		for _, g := range a.series {
			for _, p := range g.points {
				last = max(last, p.at)
			}
		}
		for _, adj := range a.adjustedAt {
			last = max(last, adj.at)
		}
	}
	return first, last, ok
}

// average is the mean of the usage rows' values, rounded half-even to
// micro-units.
func (a *Aggregate) average() Total {
	return fromBig(quoHalfEven(a.sum.bigInt(), big.NewInt(a.Rows)))
}

// quoHalfEven is n / d (d > 0) rounded half to even.
func quoHalfEven(n, d *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(n, d, new(big.Int))
	twice := new(big.Int).Abs(r)
	twice.Lsh(twice, 1)
	if c := twice.Cmp(d); c > 0 || (c == 0 && q.Bit(0) == 1) {
		if n.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	return q
}
