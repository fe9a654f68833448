package ledger_test

import (
	"fmt"
	"math"
	"os"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

func TestAggregationsMatchBruteForce(t *testing.T) {
	meters := ledger.NewMeters(testenv.ModelMeters)
	base := ts("2026-03-27T00:00:00Z") // the window holds Berlin's and New York's... DST changes nearby
	zones := []string{"UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe"}
	dir := t.TempDir()
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		n++
		caseDir := fmt.Sprintf("%s/%d", dir, n)
		if err := os.Mkdir(caseDir, 0o700); err != nil {
			rt.Fatal(err)
		}
		e := newEnvAt(t, caseDir)
		defer e.Close()

		batchTimes := []time.Time{ts("2026-04-10T00:00:00Z"), ts("2026-04-11T00:00:00Z"), ts("2026-04-12T00:00:00Z")}
		nrows := rapid.IntRange(0, 40).Draw(rt, "rows")
		// 0: ordinary quantities; 1: some rows near the per-row maximum; 2: most.
		large := rapid.IntRange(0, 2).Draw(rt, "large")
		var gen []testenv.GenRow
		for i := 0; i < nrows; i++ {
			m := rapid.SampledFrom(testenv.ModelMeters).Draw(rt, "meter")
			r := testenv.GenRow{Row: row{
				Customer: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(rt, "customer"),
				Meter:    m.Name,
				// Few distinct minutes, so equal event times (latest's tie-break) happen.
				At:    base.Add(time.Duration(rapid.IntRange(0, 6*24*4).Draw(rt, "quarter")) * 15 * time.Minute),
				Props: rapid.SampledFrom([]string{"{}", `{"u":"x"}`, `{"u":"y"}`, `{"u":1}`, `{"u":null}`}).Draw(rt, "props"),
			}, Batch: rapid.IntRange(0, 2).Draw(rt, "batch")}
			if i > 0 && rapid.IntRange(0, 3).Draw(rt, "twin") == 0 {
				// Same customer, meter and event time as an earlier row: latest
				// must break the tie by ledger id, not by scan order.
				prev := gen[rapid.IntRange(0, i-1).Draw(rt, "twinOf")]
				r.Customer, r.Meter, r.At = prev.Customer, prev.Meter, prev.At
			}
			huge := large == 2 || large == 1 && rapid.IntRange(0, 3).Draw(rt, "large row") == 0
			switch {
			case rapid.IntRange(0, 9).Draw(rt, "kind") == 0:
				r.Adjust = true
				r.Props = "{}"
				if huge {
					// Signed, down to the most negative Quantity.
					r.Qty = testenv.LargeQuantity(rt, "large adj")
					if rapid.Bool().Draw(rt, "negative") {
						r.Qty = r.Qty.Neg()
					}
					if rapid.IntRange(0, 9).Draw(rt, "min") == 0 {
						r.Qty = ledger.TotalOf(-math.MaxInt64) // the most negative micro-units a row stores with 6 decimals
					}
				} else {
					r.Qty = ledger.TotalOf(ledger.Quantity(rapid.Int64Range(-3_000_000, 3_000_000).Filter(func(v int64) bool { return v != 0 }).Draw(rt, "adj")))
				}
			case huge:
				r.Qty = testenv.LargeQuantity(rt, "large qty")
			default:
				r.Qty = ledger.TotalOf(ledger.Quantity(rapid.Int64Range(0, 5_000_000).Draw(rt, "qty")))
			}
			gen = append(gen, r)
		}
		// Write batch by batch; ids follow write order.
		var withIDs []testenv.GenRowID
		for b := range batchTimes {
			var batch []row
			for _, r := range gen {
				if r.Batch == b {
					batch = append(batch, r.Row)
					withIDs = append(withIDs, testenv.GenRowID{GenRow: r, ID: int64(len(withIDs) + 1)})
				}
			}
			if len(batch) > 0 {
				e.SetClock(batchTimes[b])
				e.Write(batch...)
			}
		}

		qr := ledger.UsageQuery{Meters: meters, Zone: mustZone(t, rapid.SampledFrom(zones).Draw(rt, "tz"))}
		if rapid.Bool().Draw(rt, "hasFrom") {
			qr.From = base.Add(time.Duration(rapid.IntRange(0, 6*24).Draw(rt, "from")) * time.Hour)
		}
		if rapid.Bool().Draw(rt, "hasTo") {
			qr.To = base.Add(time.Duration(rapid.IntRange(0, 6*24).Draw(rt, "to")) * time.Hour)
			if !qr.From.IsZero() && !qr.To.After(qr.From) {
				qr.To = qr.From.Add(time.Hour)
			}
		}
		var group []string
		for _, g := range []string{"customer", "meter"} {
			if rapid.Bool().Draw(rt, "group "+g) {
				group = append(group, g)
			}
		}
		if grain := rapid.SampledFrom([]string{"", "hour", "day", "month"}).Draw(rt, "grain"); grain != "" {
			group = append(group, grain)
		}
		qr.GroupBy = group
		if group == nil {
			qr.GroupBy = []string{}
		}
		if !slices.Contains(group, "meter") || rapid.Bool().Draw(rt, "filterMeter") {
			qr.Meter = rapid.SampledFrom(testenv.ModelMeters).Draw(rt, "only meter").Name
		}
		if rapid.Bool().Draw(rt, "filterCustomer") {
			qr.Customer = rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "only customer")
		}
		switch rapid.IntRange(0, 2).Draw(rt, "asOf") {
		case 1:
			qr.AsOf = batchTimes[rapid.IntRange(0, 2).Draw(rt, "asOfBatch")]
		case 2:
			qr.AsOfID = int64(rapid.IntRange(1, len(withIDs)+1).Draw(rt, "asOfID"))
		}

		rep, err := ledger.Query(e.Ctx, e.DB, qr)
		want := testenv.Brute(withIDs, qr, batchTimes, meters)
		if err != nil {
			rt.Fatal(err) // totals of any size are answered exactly
		}
		if len(rep.Lines) != len(want) {
			rt.Fatalf("got %d lines, want %d\ngot  %+v\nwant %+v", len(rep.Lines), len(want), rep.Lines, want)
		}
		for _, l := range rep.Lines {
			k := l.Customer + "|" + l.Meter + "|" + l.Period
			w, ok := want[k]
			if !ok {
				rt.Fatalf("unexpected line %+v; want %+v", l, want)
			}
			if l.Quantity.Micro().Cmp(w.Exact) != 0 || l.Quantity.String() != testenv.FormatMicro(w.Exact) || l.Events != w.Events || l.Adjustments != w.Adjustments || l.Aggregation != w.Aggregation {
				rt.Fatalf("line %s: got %s (%d events, %d adj, %s), want %s (%d, %d, %s)", k,
					l.Quantity, l.Events, l.Adjustments, l.Aggregation, w.Quantity, w.Events, w.Adjustments, w.Aggregation)
			}
		}
	})
}
