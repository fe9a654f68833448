package ledger_test

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hookledger/hookledger/ledger"
)

// maxRow is the per-row maximum: a Quantity is int64 micro-units, and
// ParseQuantity accepts anything that fits.
const maxRow = ledger.Quantity(math.MaxInt64)

var october = ts("2026-10-05T00:00:00Z")

// overflowOf returns err's *OverflowError, failing the test if there is none.
func overflowOf(t interface {
	Helper()
	Fatalf(string, ...any)
}, err error) *ledger.OverflowError {
	t.Helper()
	var oe *ledger.OverflowError
	if !errors.As(err, &oe) || !errors.Is(err, ledger.ErrOverflow) {
		t.Fatalf("want an overflow error, got %v", err)
	}
	return oe
}

func TestMaxRowIsAQuantity(t *testing.T) {
	if q("9223372036854.775807") != maxRow {
		t.Fatal("the per-row maximum does not parse")
	}
	if _, err := ledger.ParseQuantity("9223372036854.775808"); err == nil {
		t.Fatal("one micro-unit above the per-row maximum parsed")
	}
}

// Every aggregation with rows at the per-row maximum, in usage, in a close
// and in verify: the exact value, or a refusal naming customer, meter, period
// and the exact total, that stores nothing.
func TestTotalsAtThePerRowMaximum(t *testing.T) {
	meters := ledger.NewMeters(propMeters)
	oct := month(t, "2026-10", "UTC")
	// want per meter: the total, or "!" and the exact total a refusal names.
	for _, c := range []struct {
		name string
		rows []row
		want map[string]string
	}{
		{"two rows at the maximum", []row{{qty: maxRow, props: `{"u":"x"}`}, {qty: maxRow, props: `{"u":"y"}`}}, map[string]string{
			"m_sum": "!18446744073709.551614", "m_count": "2", "m_unique": "2",
			"m_max": "9223372036854.775807", "m_min": "9223372036854.775807", "m_latest": "9223372036854.775807"}},
		{"an adjustment beyond the maximum", []row{{qty: maxRow, props: `{"u":"x"}`}, {qty: 1, adjust: true}}, map[string]string{
			"m_sum": "!9223372036854.775808", "m_count": "1.000001", "m_unique": "1.000001",
			"m_max": "!9223372036854.775808", "m_min": "!9223372036854.775808", "m_latest": "!9223372036854.775808"}},
		{"an adjustment back into range", []row{{qty: maxRow, props: `{"u":"x"}`}, {qty: maxRow, props: `{"u":"x"}`}, {qty: -maxRow, adjust: true}}, map[string]string{
			"m_sum": "9223372036854.775807", "m_count": "-9223372036852.775807", "m_unique": "-9223372036853.775807",
			"m_max": "0", "m_min": "0", "m_latest": "0"}},
		{"adjustments out of range and back", []row{{qty: 1, props: `{"u":"x"}`}, {qty: maxRow, adjust: true}, {qty: maxRow, adjust: true},
			{qty: -maxRow, adjust: true}, {qty: -maxRow, adjust: true}}, map[string]string{
			"m_sum": "0.000001", "m_count": "1", "m_unique": "1", "m_max": "0.000001", "m_min": "0.000001", "m_latest": "0.000001"}},
		{"adjustments to one micro-unit below the smallest quantity", []row{{qty: 0, props: `{"u":"x"}`}, {qty: -maxRow, adjust: true}, {qty: -1, adjust: true}}, map[string]string{
			"m_sum": "!-9223372036854.775808", "m_count": "-9223372036853.775808", "m_unique": "-9223372036853.775808",
			"m_max": "!-9223372036854.775808", "m_min": "!-9223372036854.775808", "m_latest": "!-9223372036854.775808"}},
		{"adjustments below the minimum", []row{{qty: 0, props: `{"u":"x"}`}, {qty: math.MinInt64, adjust: true}, {qty: -1, adjust: true}}, map[string]string{
			"m_sum": "!-9223372036854.775809", "m_count": "-9223372036853.775809", "m_unique": "-9223372036853.775809",
			"m_max": "!-9223372036854.775809", "m_min": "!-9223372036854.775809", "m_latest": "!-9223372036854.775809"}},
	} {
		for _, m := range propMeters {
			t.Run(c.name+"/"+m.Name, func(t *testing.T) {
				want, refused := strings.CutPrefix(c.want[m.Name], "!")
				e := newEnv(t)
				defer e.Close()
				e.setClock(ts("2026-10-20T00:00:00Z"))
				for i, r := range c.rows {
					r.customer, r.meter, r.at = "c", m.Name, october.Add(time.Duration(i)*time.Hour)
					e.write(r)
				}

				rep, err := ledger.Query(e.ctx, e.DB, ledger.UsageQuery{Meters: meters, From: oct.Start, To: oct.End})
				if refused {
					oe := overflowOf(t, err)
					if oe.Customer != "c" || oe.Meter != m.Name || oe.Period != "from 2026-10-01T00:00:00Z to 2026-11-01T00:00:00Z" || oe.Total != want {
						t.Fatalf("usage refusal names %+v", oe)
					}
					for _, part := range []string{`customer "c"`, `meter "` + m.Name + `"`, "period from 2026-10-01T00:00:00Z", want, "±9223372036854.775807"} {
						if !strings.Contains(err.Error(), part) {
							t.Errorf("usage error %q does not name %q", err, part)
						}
					}
				} else if err != nil || len(rep.Lines) != 1 || rep.Lines[0].Quantity.String() != want {
					t.Fatalf("usage: %v %+v, want %s", err, rep, want)
				}

				for _, dry := range []bool{true, false} {
					res, err := ledger.Close(e.ctx, e.DB, ledger.CloseRequest{Period: oct, All: true, Meters: meters, Now: at("2026-11-02T00:00:00Z"), DryRun: dry})
					if refused {
						oe := overflowOf(t, err)
						if oe.Customer != "c" || oe.Meter != m.Name || oe.Period != "2026-10" || oe.Total != want {
							t.Fatalf("close refusal names %+v", oe)
						}
						if !strings.Contains(err.Error(), "close 2026-10: total out of range") || !strings.Contains(err.Error(), "nothing was closed") {
							t.Errorf("close error %q does not say what was refused", err)
						}
						wantCounts(t, e, "after the refused close", 0, 0, 0)
						continue
					}
					if err != nil || len(res.Invoices) != 1 || res.Invoices[0].Lines[0].Quantity.String() != want {
						t.Fatalf("close (dry run %v): %v %+v, want %s", dry, err, res, want)
					}
				}
				if !refused {
					wantCounts(t, e, "after the close", 1, 1, 1)
					if p := verified(t, e).First(); p != nil {
						t.Fatalf("verify: %v", p)
					}
				}
			})
		}
	}
}

// A close is one transaction: one customer's total out of range refuses it
// for every customer. An adjustment brings the total back into range, and
// the close then bills it exactly.
func TestCloseRefusesAnOverflowForEveryCustomer(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	oct := month(t, "2026-10", "UTC")
	e.setClock(ts("2026-10-20T00:00:00Z"))
	five := q("5000000000000")
	e.write(row{customer: "a", meter: "api", qty: q("1"), at: october},
		row{customer: "b", meter: "api", qty: five, at: october}, row{customer: "b", meter: "api", qty: five, at: october})
	req := ledger.CloseRequest{Period: oct, All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")}
	_, err := ledger.Close(e.ctx, e.DB, req)
	if oe := overflowOf(t, err); oe.Customer != "b" || oe.Meter != "api" || oe.Period != "2026-10" || oe.Total != "10000000000000" {
		t.Fatalf("refusal names %+v", oe)
	}
	wantCounts(t, e, "after the refused close", 0, 0, 0)

	e.write(row{customer: "b", meter: "api", qty: -five, at: october, adjust: true})
	res := e.closePeriod(t, req)
	got := byCustomer(res.Invoices)
	wantLines(t, got["a"], map[string]string{"api 2026-10": "1"})
	wantLines(t, got["b"], map[string]string{"api 2026-10": "5000000000000"})
	if l := got["b"].Lines[0]; l.Rows != 2 || l.Adjustments != 1 {
		t.Fatalf("b's line: %+v", l)
	}
	wantCounts(t, e, "after the close", 1, 2, 2)
}

// Late usage that takes a closed period's total out of range: `usage late`
// and the next close are refused, naming the period the usage belongs to.
func TestLateUsageOverflowIsRefused(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.setClock(ts("2026-10-20T00:00:00Z"))
	e.write(row{customer: "c", meter: "api", qty: maxRow, at: october})
	e.closePeriod(t, ledger.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")})
	e.setClock(ts("2026-11-10T00:00:00Z"))
	e.write(row{customer: "c", meter: "api", qty: maxRow, at: october}) // late, and the late line alone fits

	late, err := ledger.LateUsage(e.ctx, e.DB, "", invMeters)
	if err != nil || len(late) != 1 || late[0].Quantity != maxRow {
		t.Fatalf("late usage of one row at the maximum: %v %+v", err, late)
	}
	e.write(row{customer: "c", meter: "api", qty: 1, at: october})
	_, err = ledger.LateUsage(e.ctx, e.DB, "", invMeters)
	if oe := overflowOf(t, err); oe.Customer != "c" || oe.Meter != "api" || oe.Period != "2026-10 (late usage)" || oe.Total != "9223372036854.775808" {
		t.Fatalf("late refusal names %+v", oe)
	}
	_, err = ledger.Close(e.ctx, e.DB, ledger.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z")})
	if oe := overflowOf(t, err); oe.Period != "2026-10 (late usage)" {
		t.Fatalf("close refusal names %+v", oe)
	}
	wantCounts(t, e, "after the refused close", 1, 1, 1)
}

// The close and its late lines against the math/big model, over random
// quantities near the per-row maximum for every aggregation: each line is
// exact, or the close is refused for a line the model puts out of range and
// stores nothing.
func TestCloseOfLargeQuantitiesMatchesBigModel(t *testing.T) {
	meters := ledger.NewMeters(propMeters)
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
		var rows []genRowID
		batches := make([][]row, len(batchTimes))
		for b := range batchTimes {
			var batch []row
			for i, nrows := 0, rapid.IntRange(0, 12).Draw(rt, "rows"); i < nrows; i++ {
				r := row{
					customer: rapid.SampledFrom([]string{"a", "b"}).Draw(rt, "customer"),
					meter:    rapid.SampledFrom(propMeters).Draw(rt, "meter").Name,
					at:       october.Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "hour")) * time.Hour),
					props:    rapid.SampledFrom([]string{"{}", `{"u":"x"}`, `{"u":"y"}`}).Draw(rt, "props"),
				}
				if rapid.IntRange(0, 4).Draw(rt, "kind") == 0 {
					r.adjust, r.props = true, "{}"
					r.qty = largeQuantity(rt, "adj")
					if rapid.Bool().Draw(rt, "negative") {
						r.qty = -r.qty
					}
				} else {
					r.qty = largeQuantity(rt, "qty")
				}
				batch = append(batch, r)
				rows = append(rows, genRowID{genRow{r, b}, int64(len(rows) + 1)})
			}
			batches[b] = batch
		}
		write := func(b int) {
			if len(batches[b]) > 0 {
				e.setClock(batchTimes[b])
				e.write(batches[b]...)
			}
		}
		upTo := func(batch int) map[string]bruteResult {
			var in []genRowID
			for _, r := range rows {
				if r.batch <= batch {
					in = append(in, r)
				}
			}
			return brute(in, ledger.UsageQuery{Zone: time.UTC, GroupBy: ledger.DefaultGroupBy}, batchTimes, meters)
		}
		// checkClose compares a close with the model: want maps customer|meter
		// to the exact quantity each line must have.
		checkClose := func(req ledger.CloseRequest, want map[string]*big.Int, closes, invoices, lines int) bool {
			res, err := ledger.Close(e.ctx, e.DB, req)
			if err != nil {
				oe := overflowOf(rt, err)
				w, ok := want[oe.Customer+"|"+oe.Meter+"|"]
				if !ok || fits(w) || oe.Total != formatMicro(w) {
					rt.Fatalf("close refused for %+v; model %v", oe, want)
				}
				wantCounts(t, e, "after a refused close", closes, invoices, lines)
				return false
			}
			got := 0
			for _, inv := range res.Invoices {
				for _, l := range inv.Lines {
					got++
					w := want[l.Customer+"|"+l.Meter+"|"]
					if w == nil || !fits(w) || bigQ(l.Quantity).Cmp(w) != 0 {
						rt.Fatalf("line %s %s late=%v: %s, model %v", l.Customer, l.Meter, l.Late, l.Quantity, w)
					}
				}
			}
			if got != len(want) {
				rt.Fatalf("%d lines, model %v", got, want)
			}
			return true
		}

		write(0)
		first, all := upTo(0), upTo(1)
		want := map[string]*big.Int{}
		for k, w := range first {
			want[k] = w.exact
		}
		if !checkClose(ledger.CloseRequest{Period: oct, All: true, Meters: meters, Now: at("2026-11-02T00:00:00Z")}, want, 0, 0, 0) {
			return
		}
		write(1)
		// Late lines: the change to each total that has rows after the close.
		late := map[string]*big.Int{}
		for _, r := range rows {
			if r.batch == 1 {
				k := r.customer + "|" + r.meter + "|"
				before := new(big.Int)
				if w, ok := first[k]; ok {
					before = w.exact
				}
				late[k] = new(big.Int).Sub(all[k].exact, before)
			}
		}
		var invoices, lines int
		if err := e.DB.Read.QueryRow(`SELECT (SELECT COUNT(*) FROM invoices), (SELECT COUNT(*) FROM invoice_lines)`).Scan(&invoices, &lines); err != nil {
			rt.Fatal(err)
		}
		checkClose(ledger.CloseRequest{Period: nov, All: true, Meters: meters, Now: at("2026-12-02T00:00:00Z")}, late, 1, invoices, lines)
	})
}
