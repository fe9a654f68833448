package invoice_test

import (
	"testing"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

var gaugeMeters = func() ledger.Meters {
	ms := []ledger.Meter{
		{Name: "storage", Aggregation: ledger.AggTimeWeighted, Unit: "GB-hours", Dimensions: []string{"region"}},
		{Name: "temp", Aggregation: ledger.AggAvg},
	}
	for i := range ms {
		if err := ms[i].Normalize(); err != nil {
			panic(err)
		}
	}
	return ledger.NewMeters(ms)
}()

// TestTimeWeightedBillsValueTimesHours: a gauge's value holds until the next
// report of the same gauge (per region here), the value before the period
// carries in (and bills a customer with no report inside), the result is
// exact; a close bills the same, verify recomputes it, and a late report
// inside the closed month bills the marginal difference on the next invoice.
func TestTimeWeightedBillsValueTimesHours(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	eu, us := `{"region":"eu"}`, `{"region":"us"}`
	e.SetClock(ts("2026-11-15T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "storage", Qty: q("7"), At: ts("2026-10-01T00:00:00Z"), Props: eu},  // replaced before November
		row{Customer: "c1", Meter: "storage", Qty: q("4"), At: ts("2026-10-15T00:00:00Z"), Props: eu},  // carries in: 4 x 240 h
		row{Customer: "c1", Meter: "storage", Qty: q("10"), At: ts("2026-11-11T00:00:00Z"), Props: eu}, // 10 x 24 h
		row{Customer: "c1", Meter: "storage", Qty: q("0"), At: ts("2026-11-12T00:00:00Z"), Props: eu},  // 0 until the end
		row{Customer: "c1", Meter: "storage", Qty: q("1"), At: ts("2026-10-01T00:00:00Z"), Props: us},  // 1 x 720 h
		row{Customer: "c1", Meter: "storage", Qty: q("1000"), At: ts("2026-11-01T00:00:00Z"), Adjust: true},
		row{Customer: "c1", Meter: "storage", Qty: q("-500"), At: ts("2026-10-20T00:00:00Z"), Adjust: true}, // October's: not November's
		row{Customer: "c2", Meter: "storage", Qty: q("2"), At: ts("2026-09-01T00:00:00Z")},                  // only carried: 2 x 720 h
		row{Customer: "c3", Meter: "storage", Qty: q("1"), At: ts("2026-11-30T23:59:59Z")},                  // one second: 1/3600 h
		row{Customer: "c1", Meter: "temp", Qty: q("1"), At: ts("2026-11-02T00:00:00Z")},
		row{Customer: "c1", Meter: "temp", Qty: q("2"), At: ts("2026-11-03T00:00:00Z")},
		row{Customer: "c1", Meter: "temp", Qty: q("4"), At: ts("2026-11-04T00:00:00Z")},
	)
	qr, err := ledger.UsageParams{From: "2026-11", To: "2026-12"}.Query(gaugeMeters)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range e.Query(qr).Lines {
		got[l.Customer+" "+l.Meter] = l.Quantity.String()
	}
	want := map[string]string{
		"c1 storage": "2920", // 4x240 + 10x24 + 1x720 + the adjustment of 1000
		"c2 storage": "1440",
		"c3 storage": "0.000278", // 1/3600 = 0.000277777…, rounded half-even once
		"c1 temp":    "2.333333", // (1+2+4)/3
	}
	if len(got) != len(want) {
		t.Fatalf("lines %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s, want %s", k, got[k], v)
		}
	}
	byRegion, err := ledger.UsageParams{From: "2026-11", To: "2026-12", Customer: "c1", Meter: "storage", GroupBy: "region"}.Query(gaugeMeters)
	if err != nil {
		t.Fatal(err)
	}
	regions := map[string]string{}
	for _, l := range e.Query(byRegion).Lines {
		regions[l.Dimensions["region"]] = l.Quantity.String()
	}
	if regions["eu"] != "1200" || regions["us"] != "720" || regions[""] != "1000" {
		t.Fatalf("by region: %v", regions)
	}
	// By day: every day of the month the value is held, each with the value
	// at its start carried in, adding up to the month.
	daily, err := ledger.UsageParams{From: "2026-11", To: "2026-12", Customer: "c1", Meter: "storage", GroupBy: "day"}.Query(gaugeMeters)
	if err != nil {
		t.Fatal(err)
	}
	days := e.Query(daily).Lines
	var inMonth ledger.Total
	var events int64
	byDay := map[string]string{}
	for _, l := range days {
		inMonth = inMonth.Plus(l.Quantity)
		events += l.Events
		byDay[l.Period] = l.Quantity.String()
	}
	if len(days) != 30 || inMonth.String() != "2920" || events != 2 {
		t.Fatalf("%d days adding up to %s with %d events, want 30, 2920, 2: %+v", len(days), inMonth, events, days)
	}
	if byDay["2026-11-01"] != "1120" || byDay["2026-11-11"] != "264" || byDay["2026-11-12"] != "24" || byDay["2026-11-30"] != "24" {
		t.Fatalf("days: %v", byDay)
	}
	// An open window ends at the last report.
	open, _ := ledger.UsageParams{From: "2026-11", Customer: "c1", Meter: "storage", GroupBy: "day"}.Query(gaugeMeters)
	if l := e.Query(open).Lines; len(l) != 12 || l[11].Period != "2026-11-12" || l[11].Quantity.String() != "0" || l[11].Events != 1 {
		t.Fatalf("open window by day: %+v", l)
	}

	nov := month(t, "2026-11", "UTC")
	res := e.closePeriod(t, invoice.CloseRequest{Period: nov, All: true, Meters: gaugeMeters, Now: at("2026-12-01T01:00:00Z")})
	invs := byCustomer(res.Invoices)
	wantLines(t, invs["c1"], map[string]string{"storage 2026-11": "2920", "temp 2026-11": "2.333333"})
	wantLines(t, invs["c2"], map[string]string{"storage 2026-11": "1440"})
	if l := lineMap(invs["c2"])["storage 2026-11"]; l.Rows != 0 {
		t.Fatalf("c2's carried line covers rows: %+v", l)
	}
	if p := verified(t, e).First(); p != nil {
		t.Fatalf("verify after the close: %+v", p)
	}

	// A late eu report of 5 on Nov 20: 5 x 264 h more for November.
	e.SetClock(ts("2026-12-05T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "storage", Qty: q("5"), At: ts("2026-11-20T00:00:00Z"), Props: eu})
	dec := month(t, "2026-12", "UTC")
	res = e.closePeriod(t, invoice.CloseRequest{Period: dec, All: true, Meters: gaugeMeters, Now: at("2027-01-01T01:00:00Z")})
	invs = byCustomer(res.Invoices)
	// December: eu 5 and us 1 carried in for 744 h.
	wantLines(t, invs["c1"], map[string]string{"storage 2026-11*": "1320", "storage 2026-12": "4464"})
	wantLines(t, invs["c2"], map[string]string{"storage 2026-12": "1488"})
	wantLines(t, invs["c3"], map[string]string{"storage 2026-12": "744"})
	if l := lineMap(invs["c1"])["storage 2026-11*"]; l.Money.BilledBefore != "2920" || l.Rows != 1 {
		t.Fatalf("late line: %+v", l)
	}
	if p := verified(t, e).First(); p != nil {
		t.Fatalf("verify after the late line: %+v", p)
	}
	_ = time.Hour
}
