package invoice_test

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/pricing"
)

// changePricing is basic (10.00 a month, 0.01 a request, minimum 12.00)
// and pro (30.00 a month, 0.005 a request), with c1 on basic from January
// and on pro from changeDay.
func changePricing(t *testing.T, changeDay pricing.Date) *invoice.Pricing {
	t.Helper()
	cat := catalogOf(t,
		pricing.Plan{Name: "basic", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("10.00"), Minimum: dec("12.00"),
			Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec("0.01")}}},
		pricing.Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("30.00"),
			Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec("0.005")}}})
	return &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("basic", []customer.PlanAssignment{
		{Customer: "c1", Plan: "basic", EffectiveFrom: "2026-01-01"}, {Customer: "c1", Plan: "pro", EffectiveFrom: changeDay}})}
}

func partsOf(inv invoice.Invoice) string {
	var out []string
	for _, p := range inv.Parts {
		out = append(out, p.Version+" fee "+p.Fee+" true-up "+p.TrueUp)
	}
	return strings.Join(out, "; ")
}

// A plan change on the 16th of a 30-day month splits it: usage is priced by
// event time, each version's fee prorated 15/30 (and basic's minimum with
// it), verify clean; late usage of the month later goes to its part.
func TestPlanChangeInsideAMonth(t *testing.T) {
	e := newEnv(t)
	pr := changePricing(t, "2026-11-16")
	e.SetClock(ts("2026-11-25T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("500"), At: ts("2026-11-05T00:00:00Z")},  // basic: 5.00
		row{Customer: "c1", Meter: "api", Qty: q("2000"), At: ts("2026-11-20T00:00:00Z")}, // pro: 10.00
		row{Customer: "c2", Meter: "api", Qty: q("100"), At: ts("2026-11-21T00:00:00Z")},  // basic all month: 1.00
	)
	nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z"), Pricing: pr})
	got := byCustomer(nov.Invoices)
	// c1: basic's half: fee 5.00, minimum 6.00 less 5.00 + 5.00: no true-up;
	// pro's half: fee 15.00. 5.00 + 5.00 + 15.00 + 10.00 = 35.00.
	if s, want := amounts(got["c1"])+" | "+partsOf(got["c1"]), "api 2026-11=5.00 api 2026-11=10.00 | fee 20.00 true-up 0.00 total 35.00 USD | basic@2026-01-01 fee 5.00 true-up 0.00; pro@2026-01-01 fee 15.00 true-up 0.00"; s != want {
		t.Errorf("c1:\n%s\nwant\n%s", s, want)
	}
	lines := got["c1"].Lines
	if len(lines) != 2 || lines[0].Quantity.String() != "500" || lines[0].Money.PlanVersion != "basic@2026-01-01" ||
		lines[1].Quantity.String() != "2000" || lines[1].Money.PlanVersion != "pro@2026-01-01" || lines[1].PartStart != ts("2026-11-16T00:00:00Z").UnixMilli() {
		t.Errorf("c1's lines: %+v", lines)
	}
	// c2 did not change plan: one part, as before (fee 10.00, 1.00, true-up to 12.00).
	if s := amounts(got["c2"]); s != "api 2026-11=1.00 | fee 10.00 true-up 1.00 total 12.00 USD" || got["c2"].Parts != nil {
		t.Errorf("c2: %s, parts %+v", s, got["c2"].Parts)
	}
	verifyClean(t, e)

	// Late usage of each half goes to its part, priced by its version.
	e.SetClock(ts("2026-12-05T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("100"), At: ts("2026-11-10T00:00:00Z")}, // basic: 1.00
		row{Customer: "c1", Meter: "api", Qty: q("200"), At: ts("2026-11-28T00:00:00Z")}, // pro: 1.00
	)
	dec := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-12", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2027-01-02T00:00:00Z"), Pricing: pr})
	var late []string
	for _, l := range dec.Invoices[0].Lines {
		if l.Late {
			late = append(late, l.Quantity.String()+" at "+l.Money.PlanVersion+" = "+l.Money.Amount)
		}
	}
	if s := strings.Join(late, ", "); s != "100 at basic@2026-01-01 = 1.00, 200 at pro@2026-01-01 = 1.00" {
		t.Errorf("December's late lines: %s", s)
	}
	verifyClean(t, e)

	// A part's fee edited in the database is caught: by the digest and by
	// the recomputation of the parts from the stored versions.
	e.allowEdits("invoices")
	e.Exec(`UPDATE invoices SET parts = replace(parts, '"fee":"15.00"', '"fee":"1.50"') WHERE parts <> ''`)
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	found := problems(rep)
	if !strings.Contains(found, "stored digest does not match") || !strings.Contains(found, `its parts recompute to`) {
		t.Errorf("verify after a part's fee was edited:\n%s", found)
	}
}

// A change on the period's first day splits nothing: the period is priced
// by the new plan, as before.
func TestPlanChangeOnTheFirstDay(t *testing.T) {
	e := newEnv(t)
	pr := changePricing(t, "2026-11-01")
	e.SetClock(ts("2026-11-25T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("2000"), At: ts("2026-11-20T00:00:00Z")})
	nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z"), Pricing: pr})
	if s := amounts(nov.Invoices[0]); s != "api 2026-11=10.00 | fee 30.00 true-up 0.00 total 40.00 USD" || nov.Invoices[0].Parts != nil {
		t.Errorf("c1: %s, parts %+v", s, nov.Invoices[0].Parts)
	}
	verifyClean(t, e)
}

// A gauge's value carries into the part after a plan change as it carries
// into a period: each part bills its own GB-hours at its own price.
func TestPlanChangeSplitsAGauge(t *testing.T) {
	e := newEnv(t)
	cat := catalogOf(t,
		pricing.Plan{Name: "basic", Currency: "USD", EffectiveFrom: "2026-01-01", Unpriced: "free",
			Prices: []pricing.Price{{Meter: "storage", Model: pricing.Unit, Unit: dec("0.01")}}},
		pricing.Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Unpriced: "free",
			Prices: []pricing.Price{{Meter: "storage", Model: pricing.Unit, Unit: dec("0.005")}}})
	pr := &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("basic", []customer.PlanAssignment{{Customer: "c1", Plan: "pro", EffectiveFrom: "2026-11-16"}})}
	eu := `{"region":"eu"}`
	e.SetClock(ts("2026-11-25T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "storage", Qty: q("10"), At: ts("2026-10-25T00:00:00Z"), Props: eu}, // carries into November
		row{Customer: "c1", Meter: "storage", Qty: q("20"), At: ts("2026-11-20T00:00:00Z"), Props: eu},
	)
	nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: gaugeMeters, Now: at("2026-12-02T00:00:00Z"), Pricing: pr})
	// Basic's 15 days: 10 GB × 360 h = 3,600 GB-hours at 0.01 = 36.00. Pro's
	// 15 days: 10 GB × 96 h + 20 GB × 264 h = 6,240 GB-hours at 0.005 = 31.20.
	var got []string
	for _, l := range nov.Invoices[0].Lines {
		got = append(got, l.Quantity.String()+" at "+l.Money.PlanVersion+" = "+l.Money.Amount)
	}
	if s := strings.Join(got, ", "); s != "3600 at basic@2026-01-01 = 36.00, 6240 at pro@2026-01-01 = 31.20" {
		t.Errorf("lines: %s", s)
	}
	verifyClean(t, e)
}
