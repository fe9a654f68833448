package testenv

import (
	"math"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"pgregory.net/rapid"
)

// A model of usage aggregation the slow, obvious way, in math/big, for the
// property tests of the ledger's aggregation and of closes (ledger and
// invoice): they generate rows, write them, and compare with Brute.

// ModelMeters has one meter of each aggregation Brute models (all but
// time_weighted).
var ModelMeters = []ledger.Meter{
	{Name: "m_sum", Aggregation: ledger.AggSum, Unit: "req"},
	{Name: "m_count", Aggregation: ledger.AggCount},
	{Name: "m_max", Aggregation: ledger.AggMax, Unit: "seats"},
	{Name: "m_min", Aggregation: ledger.AggMin},
	{Name: "m_unique", Aggregation: ledger.AggUniqueCount, Property: "u", Properties: []string{"u"}},
	{Name: "m_latest", Aggregation: ledger.AggLatest},
}

// GenRow is a generated ledger row and the batch it is written in.
type GenRow struct {
	Row
	Batch int
}

type bruteLine struct {
	usage []GenRowID
	adj   *big.Int
	nAdj  int64
}

// BruteResult is a usage line as the model computes it: the quantity in
// math/big, so the model itself can never wrap.
type BruteResult struct {
	ledger.UsageLine
	Exact *big.Int // micro-units
}

var bigScale = big.NewInt(ledger.Scale)

// BigQ is q in micro-units.
func BigQ(q ledger.Total) *big.Int { return q.Micro() }

// GenRowID is a generated row and the id the ledger gives it.
type GenRowID struct {
	GenRow
	ID int64
}

// Brute computes a usage report the slow, obvious way.
func Brute(rows []GenRowID, qr ledger.UsageQuery, batchTimes []time.Time, meters ledger.Meters) map[string]BruteResult {
	has := func(g string) bool { return slices.Contains(qr.GroupBy, g) }
	groups := map[string]*bruteLine{}
	keys := map[string]ledger.UsageLine{}
	for _, r := range rows {
		if !qr.From.IsZero() && r.At.Before(qr.From) || !qr.To.IsZero() && !r.At.Before(qr.To) {
			continue
		}
		if qr.Customer != "" && r.Customer != qr.Customer || qr.Meter != "" && r.Meter != qr.Meter {
			continue
		}
		if !qr.AsOf.IsZero() && !batchTimes[r.Batch].Before(qr.AsOf) || qr.AsOfID != 0 && r.ID > qr.AsOfID {
			continue
		}
		var l ledger.UsageLine
		if has("customer") {
			l.Customer = r.Customer
		}
		if has("meter") {
			l.Meter = r.Meter
		}
		local := r.At.In(qr.Zone)
		switch {
		case has("hour"):
			l.Period = local.Format("2006-01-02T15") + ":00" + local.Format("Z07:00")
		case has("day"):
			l.Period = local.Format("2006-01-02")
		case has("month"):
			l.Period = local.Format("2006-01")
		}
		k := l.Customer + "|" + l.Meter + "|" + l.Period
		if groups[k] == nil {
			groups[k] = &bruteLine{adj: new(big.Int)}
			keys[k] = l
		}
		g := groups[k]
		if r.Adjust {
			g.adj.Add(g.adj, BigQ(r.Qty))
			g.nAdj++
		} else {
			g.usage = append(g.usage, r)
		}
	}
	out := map[string]BruteResult{}
	for k, g := range groups {
		l := keys[k]
		m := meters.Get(qr.Meter)
		if l.Meter != "" {
			m = meters.Get(l.Meter)
		}
		v := new(big.Int)
		if n := len(g.usage); n > 0 {
			switch m.Aggregation {
			case ledger.AggSum:
				for _, r := range g.usage {
					v.Add(v, BigQ(r.Qty))
				}
			case ledger.AggCount:
				v.Mul(big.NewInt(int64(n)), bigScale)
			case ledger.AggMax:
				v = BigQ(g.usage[0].Qty)
				for _, r := range g.usage {
					if BigQ(r.Qty).Cmp(v) > 0 {
						v = BigQ(r.Qty)
					}
				}
			case ledger.AggMin:
				v = BigQ(g.usage[0].Qty)
				for _, r := range g.usage {
					if BigQ(r.Qty).Cmp(v) < 0 {
						v = BigQ(r.Qty)
					}
				}
			case ledger.AggLatest:
				best := g.usage[0]
				for _, r := range g.usage {
					if r.At.After(best.At) || r.At.Equal(best.At) && r.ID > best.ID {
						best = r
					}
				}
				v = BigQ(best.Qty)
			case ledger.AggUniqueCount:
				seen := map[string]bool{}
				for _, r := range g.usage {
					if r.Props != "{}" && r.Props != `{"u":null}` {
						seen[r.Props] = true
					}
				}
				v.Mul(big.NewInt(int64(len(seen))), bigScale)
			}
		}
		v.Add(v, g.adj)
		l.Quantity = ledger.TotalOfMicro(v)
		l.Events = int64(len(g.usage))
		l.Adjustments = g.nAdj
		l.Aggregation = m.Aggregation
		out[k] = BruteResult{l, v}
	}
	return out
}

// FormatMicro writes micro-units as a decimal the way Quantity.String does.
func FormatMicro(v *big.Int) string {
	r := new(big.Rat).SetFrac(v, bigScale)
	s := r.FloatString(6)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// LargeQuantity draws a usage quantity near what one row holds: an int64
// near its maximum with 0 to 6 decimals, so most are wide rows (beyond
// int64 micro-units) and a few rows take a sum far past int64.
func LargeQuantity(rt *rapid.T, label string) ledger.Total {
	n := rapid.OneOf(
		rapid.SampledFrom([]int64{math.MaxInt64, math.MaxInt64 - 1, math.MaxInt64/2 + 1, math.MaxInt64 / 2, 5_000_000_000_000 * ledger.Scale}),
		rapid.Int64Range(math.MaxInt64/4, math.MaxInt64),
	).Draw(rt, label)
	return ledger.RowQuantity(n, rapid.IntRange(0, ledger.RowDecimals).Draw(rt, label+" decimals"))
}
