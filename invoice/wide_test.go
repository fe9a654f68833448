package invoice_test

import (
	"fmt"
	"math/big"
	"os"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// maxRow is the largest ordinary row: int64 micro-units, stored with 6
// decimals as every row before wide quantities was.
var maxRow = ledger.TotalOf(ledger.MaxQuantity)

var october = ts("2026-10-05T00:00:00Z")

func TestMaxRowIsAQuantity(t *testing.T) {
	if !q("9223372036854.775807").Equal(maxRow) {
		t.Fatal("the largest ordinary row does not parse")
	}
	if _, err := ledger.ParseQuantity("9223372036854.775808"); err == nil {
		t.Fatal("one micro-unit above the largest Quantity parsed")
	}
	if _, err := ledger.ParseRowQuantity("9223372036854.77581"); err != nil {
		t.Fatalf("a row beyond the largest Quantity with 5 decimals: %v", err)
	}
}

// Every aggregation with rows at and beyond int64's micro-units, in usage,
// in a close and in verify: the exact value, whatever its size. (Before wide
// quantities, every total past ±9223372036854.775807 was refused.)
func TestTotalsAtThePerRowMaximum(t *testing.T) {
	meters := ledger.NewMeters(testenv.ModelMeters)
	oct := month(t, "2026-10", "UTC")
	one := q("0.000001")
	for _, c := range []struct {
		name string
		rows []row
		want map[string]string
	}{
		{"two rows at the maximum", []row{{Qty: maxRow, Props: `{"u":"x"}`}, {Qty: maxRow, Props: `{"u":"y"}`}}, map[string]string{
			"m_sum": "18446744073709.551614", "m_count": "2", "m_unique": "2",
			"m_max": "9223372036854.775807", "m_min": "9223372036854.775807", "m_latest": "9223372036854.775807"}},
		{"an adjustment beyond the maximum", []row{{Qty: maxRow, Props: `{"u":"x"}`}, {Qty: one, Adjust: true}}, map[string]string{
			"m_sum": "9223372036854.775808", "m_count": "1.000001", "m_unique": "1.000001",
			"m_max": "9223372036854.775808", "m_min": "9223372036854.775808", "m_latest": "9223372036854.775808"}},
		{"an adjustment back into range", []row{{Qty: maxRow, Props: `{"u":"x"}`}, {Qty: maxRow, Props: `{"u":"x"}`}, {Qty: maxRow.Neg(), Adjust: true}}, map[string]string{
			"m_sum": "9223372036854.775807", "m_count": "-9223372036852.775807", "m_unique": "-9223372036853.775807",
			"m_max": "0", "m_min": "0", "m_latest": "0"}},
		{"adjustments out of range and back", []row{{Qty: one, Props: `{"u":"x"}`}, {Qty: maxRow, Adjust: true}, {Qty: maxRow, Adjust: true},
			{Qty: maxRow.Neg(), Adjust: true}, {Qty: maxRow.Neg(), Adjust: true}}, map[string]string{
			"m_sum": "0.000001", "m_count": "1", "m_unique": "1", "m_max": "0.000001", "m_min": "0.000001", "m_latest": "0.000001"}},
		{"adjustments below the minimum", []row{{Qty: q("0"), Props: `{"u":"x"}`}, {Qty: maxRow.Neg(), Adjust: true}, {Qty: one.Neg(), Adjust: true}, {Qty: one.Neg(), Adjust: true}}, map[string]string{
			"m_sum": "-9223372036854.775809", "m_count": "-9223372036853.775809", "m_unique": "-9223372036853.775809",
			"m_max": "-9223372036854.775809", "m_min": "-9223372036854.775809", "m_latest": "-9223372036854.775809"}},
		{"wide rows", []row{{Qty: q("1e18"), Props: `{"u":"x"}`}, {Qty: q("9223372036854775807"), Props: `{"u":"y"}`}, {Qty: q("-1e18"), Adjust: true}}, map[string]string{
			"m_sum": "9223372036854775807", "m_count": "-999999999999999998", "m_unique": "-999999999999999998",
			"m_max": "8223372036854775807", "m_min": "0", "m_latest": "8223372036854775807"}},
	} {
		for _, m := range testenv.ModelMeters {
			t.Run(c.name+"/"+m.Name, func(t *testing.T) {
				want := c.want[m.Name]
				e := newEnv(t)
				defer e.Close()
				e.SetClock(ts("2026-10-20T00:00:00Z"))
				for i, r := range c.rows {
					r.Customer, r.Meter, r.At = "c", m.Name, october.Add(time.Duration(i)*time.Hour)
					e.Write(r)
				}

				rep, err := ledger.Query(e.Ctx, e.DB, ledger.UsageQuery{Meters: meters, From: oct.Start, To: oct.End})
				if err != nil || len(rep.Lines) != 1 || rep.Lines[0].Quantity.String() != want {
					t.Fatalf("usage: %v %+v, want %s", err, rep, want)
				}
				for _, dry := range []bool{true, false} {
					res, err := invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: oct, All: true, Meters: meters, Now: at("2026-11-02T00:00:00Z"), DryRun: dry})
					if err != nil || len(res.Invoices) != 1 || res.Invoices[0].Lines[0].Quantity.String() != want {
						t.Fatalf("close (dry run %v): %v %+v, want %s", dry, err, res, want)
					}
				}
				wantCounts(t, e, "after the close", 1, 1, 1)
				inv, err := invoice.GetInvoice(e.Ctx, e.DB, 1)
				if err != nil || inv.Lines[0].Quantity.String() != want {
					t.Fatalf("stored invoice: %v %+v, want %s", err, inv, want)
				}
				if p := verified(t, e).First(); p != nil {
					t.Fatalf("verify: %v", p)
				}
			})
		}
	}
}

// A close bills a total past int64's micro-units exactly, for every
// customer, and an adjustment changes it like any other.
func TestCloseBillsTotalsPastInt64(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	oct := month(t, "2026-10", "UTC")
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	five := q("5000000000000")
	e.Write(row{Customer: "a", Meter: "api", Qty: q("1"), At: october},
		row{Customer: "b", Meter: "api", Qty: five, At: october}, row{Customer: "b", Meter: "api", Qty: five, At: october})
	req := invoice.CloseRequest{Period: oct, All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")}
	res := e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z"), DryRun: true})
	wantLines(t, byCustomer(res.Invoices)["b"], map[string]string{"api 2026-10": "10000000000000"})

	e.Write(row{Customer: "b", Meter: "api", Qty: five.Neg(), At: october, Adjust: true})
	res = e.closePeriod(t, req)
	got := byCustomer(res.Invoices)
	wantLines(t, got["a"], map[string]string{"api 2026-10": "1"})
	wantLines(t, got["b"], map[string]string{"api 2026-10": "5000000000000"})
	if l := got["b"].Lines[0]; l.Rows != 2 || l.Adjustments != 1 {
		t.Fatalf("b's line: %+v", l)
	}
	wantCounts(t, e, "after the close", 1, 2, 2)
}

// Late usage that takes a closed period's total past int64's micro-units is
// listed and billed exactly, as the change to that period's total.
func TestLateUsagePastInt64IsBilled(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c", Meter: "api", Qty: maxRow, At: october})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")})
	e.SetClock(ts("2026-11-10T00:00:00Z"))
	e.Write(row{Customer: "c", Meter: "api", Qty: maxRow, At: october}, row{Customer: "c", Meter: "api", Qty: q("1e15"), At: october})

	late, err := invoice.LateUsage(e.Ctx, e.DB, "", invMeters)
	if err != nil || len(late) != 1 || late[0].Quantity.String() != "1009223372036854.775807" {
		t.Fatalf("late usage: %v %+v", err, late)
	}
	res := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z")})
	wantLines(t, res.Invoices[0], map[string]string{"api 2026-10*": "1009223372036854.775807"})
	if b := res.Invoices[0].Lines[0].Money.BilledBefore; b != "9223372036854.775807" {
		t.Fatalf("billed before: %s", b)
	}
	if p := verified(t, e).First(); p != nil {
		t.Fatalf("verify: %v", p)
	}
}

// The close and its late lines against the math/big model, over random
// quantities near what one row holds for every aggregation: each line is
// exact, and verify recomputes every one of them.
func TestCloseOfLargeQuantitiesMatchesBigModel(t *testing.T) {
	meters := ledger.NewMeters(testenv.ModelMeters)
	oct, nov := month(t, "2026-10", "UTC"), month(t, "2026-11", "UTC")
	batchTimes := []time.Time{ts("2026-10-20T00:00:00Z"), ts("2026-11-10T00:00:00Z")} // before and after October's close
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
		var rows []testenv.GenRowID
		batches := make([][]row, len(batchTimes))
		for b := range batchTimes {
			var batch []row
			for i, nrows := 0, rapid.IntRange(0, 12).Draw(rt, "rows"); i < nrows; i++ {
				r := row{
					Customer: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "customer"),
					Meter:    rapid.SampledFrom(testenv.ModelMeters).Draw(rt, "meter").Name,
					At:       october.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "hour")) * time.Hour),
					Props:    rapid.SampledFrom([]string{"{}", `{"u":"x"}`, `{"u":"y"}`}).Draw(rt, "props"),
				}
				if rapid.IntRange(0, 4).Draw(rt, "kind") == 0 {
					r.Adjust, r.Props = true, "{}"
					r.Qty = testenv.LargeQuantity(rt, "adj")
					if rapid.Bool().Draw(rt, "negative") {
						r.Qty = r.Qty.Neg()
					}
				} else {
					r.Qty = testenv.LargeQuantity(rt, "qty")
				}
				batch = append(batch, r)
				rows = append(rows, testenv.GenRowID{GenRow: testenv.GenRow{Row: r, Batch: b}, ID: int64(len(rows) + 1)})
			}
			batches[b] = batch
		}
		write := func(b int) {
			if len(batches[b]) > 0 {
				e.SetClock(batchTimes[b])
				e.Write(batches[b]...)
			}
		}
		upTo := func(batch int) map[string]testenv.BruteResult {
			var in []testenv.GenRowID
			for _, r := range rows {
				if r.Batch <= batch {
					in = append(in, r)
				}
			}
			return testenv.Brute(in, ledger.UsageQuery{Zone: time.UTC, GroupBy: ledger.DefaultGroupBy}, batchTimes, meters)
		}
		// checkClose compares a close with the model: want maps customer|meter
		// to the exact quantity each line must have.
		checkClose := func(req invoice.CloseRequest, want map[string]*big.Int) {
			res, err := invoice.Close(e.Ctx, e.DB, req)
			if err != nil {
				rt.Fatal(err)
			}
			got := 0
			for _, inv := range res.Invoices {
				for _, l := range inv.Lines {
					got++
					w := want[l.Customer+"|"+l.Meter+"|"]
					if w == nil || testenv.BigQ(l.Quantity).Cmp(w) != 0 || l.Quantity.String() != testenv.FormatMicro(w) {
						rt.Fatalf("line %s %s late=%v: %s, model %v", l.Customer, l.Meter, l.Late, l.Quantity, w)
					}
				}
			}
			if got != len(want) {
				rt.Fatalf("%d lines, model %v", got, want)
			}
		}

		write(0)
		first, all := upTo(0), upTo(1)
		want := map[string]*big.Int{}
		for k, w := range first {
			want[k] = w.Exact
		}
		checkClose(invoice.CloseRequest{Period: oct, All: true, Meters: meters, Now: at("2026-11-02T00:00:00Z")}, want)
		write(1)
		// Late lines: the change to each total that has rows after the close.
		late := map[string]*big.Int{}
		for _, r := range rows {
			if r.Batch == 1 {
				k := r.Customer + "|" + r.Meter + "|"
				before := new(big.Int)
				if w, ok := first[k]; ok {
					before = w.Exact
				}
				late[k] = new(big.Int).Sub(all[k].Exact, before)
			}
		}
		checkClose(invoice.CloseRequest{Period: nov, All: true, Meters: meters, Now: at("2026-12-02T00:00:00Z")}, late)
		if p := verified(t, e).First(); p != nil {
			rt.Fatalf("verify: %v", p)
		}
	})
}
