package invoice_test

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/pricing"
)

func dec(s string) *pricing.Decimal { d := pricing.MustDecimal(s); return &d }

// moneyPricing is two versions of plan "pro" (the second from July, with a
// dearer fee and a cheaper api price) and the default plan pro.
func moneyPricing(t *testing.T, as ...customer.PlanAssignment) *invoice.Pricing {
	t.Helper()
	plans := []pricing.Plan{
		{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("29.00"), Minimum: dec("50.00"), Prices: []pricing.Price{
			{Meter: "api", Model: pricing.Graduated, Tiers: []pricing.Tier{
				{UpTo: dec("1000"), Unit: pricing.MustDecimal("0")}, {UpTo: dec("100000"), Unit: pricing.MustDecimal("0.001")}, {Unit: pricing.MustDecimal("0.0005")}}},
			{Meter: "seats", Model: pricing.Volume, Tiers: []pricing.Tier{{UpTo: dec("10"), Unit: pricing.MustDecimal("8")}, {Unit: pricing.MustDecimal("6"), Flat: dec("10")}}},
		}},
		{Name: "pro", Currency: "USD", EffectiveFrom: "2026-07-01", Fee: dec("39.00"), Prices: []pricing.Price{
			{Meter: "api", Model: pricing.Unit, Unit: dec("0.0001")},
		}},
	}
	for i := range plans {
		if err := plans[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := pricing.NewCatalog(plans)
	if err != nil {
		t.Fatal(err)
	}
	return &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("pro", as)}
}

func amounts(inv invoice.Invoice) string {
	var parts []string
	for _, l := range inv.Lines {
		p := l.Meter + " " + l.Period
		if l.Late {
			p += "*"
		}
		parts = append(parts, p+"="+l.Money.Amount)
	}
	m := inv.Money
	return strings.Join(parts, " ") + " | fee " + m.Fee + " true-up " + m.TrueUp + " total " + m.Total + " " + m.Currency
}

// Invoices with money, every figure worked out by hand, across a plan
// change mid-year and late usage priced at the margin of its own period.
func TestCloseWithPrices(t *testing.T) {
	e := newEnv(t)
	pr := moneyPricing(t)
	e.SetClock(ts("2026-06-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("1234567"), At: ts("2026-06-10T00:00:00Z")},
		row{Customer: "c1", Meter: "seats", Qty: q("11"), At: ts("2026-06-10T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("500"), At: ts("2026-06-12T00:00:00Z")},
	)
	june := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-06", "UTC"), All: true, Meters: invMeters, Now: at("2026-07-02T00:00:00Z"),
		Pricing: pr, Registered: []string{"c3"}})
	got := byCustomer(june.Invoices)
	for cust, want := range map[string]string{
		// 99,000 × 0.001 + 1,134,567 × 0.0005 = 666.2835 → 666.28; 11 seats: 11 × 6 + 10 = 76; fee 29.
		"c1": "api 2026-06=666.28 seats 2026-06=76.00 | fee 29.00 true-up 0.00 total 771.28 USD",
		// 500 requests are in the free tier: 29 fee + 21 true-up to the 50 minimum.
		"c2": "api 2026-06=0.00 | fee 29.00 true-up 21.00 total 50.00 USD",
		// Registered, no usage: the fee and minimum still apply.
		"c3": " | fee 29.00 true-up 21.00 total 50.00 USD",
	} {
		if s := amounts(got[cust]); s != want {
			t.Errorf("June, %s: %s\nwant %s", cust, s, want)
		}
	}

	// Late June usage and July usage; July is priced with the July version.
	e.SetClock(ts("2026-07-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("100000"), At: ts("2026-06-11T00:00:00Z")},
		row{Customer: "c1", Meter: "api", Qty: q("2000"), At: ts("2026-07-11T00:00:00Z")},
	)
	july := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-07", "UTC"), All: true, Meters: invMeters, Now: at("2026-08-02T00:00:00Z"),
		Pricing: pr, Registered: []string{"c3"}})
	got = byCustomer(july.Invoices)
	for cust, want := range map[string]string{
		// July: 2,000 × 0.0001 = 0.20 at July's prices; the late June line at
		// June's, at the margin above 1,234,567: 100,000 × 0.0005 = 50.00. No
		// minimum in July's version; late lines stay out of it anyway.
		"c1": "api 2026-07=0.20 api 2026-06*=50.00 | fee 39.00 true-up 0.00 total 89.20 USD",
		"c3": " | fee 39.00 true-up 0.00 total 39.00 USD",
	} {
		if s := amounts(got[cust]); s != want {
			t.Errorf("July, %s: %s\nwant %s", cust, s, want)
		}
	}
	late := lineMap(got["c1"])["api 2026-06*"]
	if late.Money.BilledBefore != "1234567" || late.Money.PlanVersion != "pro@2026-01-01" {
		t.Errorf("late line billed before %s with version %s, want 1234567 and pro@2026-01-01", late.Money.BilledBefore, late.Money.PlanVersion)
	}
	if _, ok := got["c2"]; ok {
		t.Errorf("c2 is not registered and used nothing in July: no invoice, got %s", amounts(got["c2"]))
	}

	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Fatalf("verify of priced invoices: %s", problems(rep))
	}

	// An amount edited in the database: verify recomputes it from the
	// invoice's own price snapshot.
	e.allowEdits("invoice_lines")
	e.Exec(`UPDATE invoice_lines SET amount = '600.00' WHERE invoice_id = ? AND line_no = 1`, june.Invoices[0].ID)
	rep, err = invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if p := problems(rep); !strings.Contains(p, "money: line 1 (api 2026-06) recomputes to 666.28") {
		t.Errorf("verify after editing an amount:\n%s", p)
	}
}

// A late line for a period whose plan priced it in another currency than
// the invoice's own cannot be added up: the close refuses, naming both.
// One customer's change of currency does not stop the close for anyone:
// late usage priced in another currency than the customer's invoice now
// goes on an invoice of its own in that currency (no fee, no minimum), the
// customer's own usage and every other customer are invoiced, and verify
// is clean.
func TestCloseInvoicesLateUsageOfAnotherCurrencyApart(t *testing.T) {
	e := newEnv(t)
	cat := catalogOf(t,
		pricing.Plan{Name: "us", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("10.00"), Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec("1")}}},
		pricing.Plan{Name: "eu", Currency: "EUR", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec("1")}}})
	pr := &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("us", []customer.PlanAssignment{
		{Customer: "c1", Plan: "eu", EffectiveFrom: "2026-07-01"}, {Customer: "c3", Plan: "eu", EffectiveFrom: "2026-07-01"}})}
	e.SetClock(ts("2026-06-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-06-10T00:00:00Z")},
		row{Customer: "c3", Meter: "api", Qty: q("1"), At: ts("2026-06-10T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-06", "UTC"), All: true, Meters: invMeters, Now: at("2026-07-02T00:00:00Z"), Pricing: pr})
	e.SetClock(ts("2026-07-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("3"), At: ts("2026-06-11T00:00:00Z")}, // late June, priced in USD
		row{Customer: "c1", Meter: "api", Qty: q("5"), At: ts("2026-07-11T00:00:00Z")}, // July, in EUR
		row{Customer: "c2", Meter: "api", Qty: q("7"), At: ts("2026-07-12T00:00:00Z")},
		row{Customer: "c3", Meter: "api", Qty: q("4"), At: ts("2026-06-12T00:00:00Z")}, // c3: late June only, no July usage
	)
	july := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-07", "UTC"), All: true, Meters: invMeters, Now: at("2026-08-02T00:00:00Z"), Pricing: pr})
	var got []string
	for _, inv := range july.Invoices {
		got = append(got, inv.Customer+": "+amounts(inv))
	}
	want := []string{
		"c1: api 2026-07=5.00 | fee 0.00 true-up 0.00 total 5.00 EUR",
		// June's 3 late units at June's USD price, with no fee: late lines count toward neither.
		"c1: api 2026-06*=3.00 | fee  true-up  total 3.00 USD",
		"c2: api 2026-07=7.00 | fee 10.00 true-up 0.00 total 17.00 USD",
		// c3's plan charges nothing of its own in July: only the late-only invoice.
		"c3: api 2026-06*=4.00 | fee  true-up  total 4.00 USD",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("July's invoices:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	late, err := invoice.LateUsage(e.Ctx, e.DB, "c1", invMeters)
	if err != nil {
		t.Fatal(err)
	}
	if len(late) != 0 {
		t.Errorf("usage late: %+v, want nothing pending", late)
	}
	// August: nothing is left over, nothing is billed twice; c3's late
	// July usage is priced by July's plan (eu, in EUR), not by the version
	// of its July invoice of late June usage.
	e.SetClock(ts("2026-08-20T00:00:00Z"))
	e.Write(row{Customer: "c3", Meter: "api", Qty: q("2"), At: ts("2026-07-20T00:00:00Z")})
	aug := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-08", "UTC"), All: true, Meters: invMeters, Now: at("2026-09-02T00:00:00Z"), Pricing: pr})
	got = nil
	for _, inv := range aug.Invoices {
		got = append(got, inv.Customer+": "+amounts(inv))
	}
	if s := strings.Join(got, "\n"); s != "c3: api 2026-07*=2.00 | fee 0.00 true-up 0.00 total 2.00 EUR" {
		t.Errorf("August's invoices:\n%s", s)
	}
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Fatalf("verify: %s", problems(rep))
	}
	// The late-only invoice's total is recomputed like any: an edited one is caught.
	e.allowEdits("invoices")
	e.Exec(`UPDATE invoices SET total = '30.00' WHERE total = '3.00' AND currency = 'USD'`)
	rep, err = invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if s := problems(rep); !strings.Contains(s, "fee, true-up and total recompute to , , 3.00 USD; invoice says , , 30.00") {
		t.Errorf("verify after the late-only invoice's total was edited:\n%s", s)
	}
}

// A preview prices the open period as a close would, and stores nothing.
func TestPreviewOpenPeriod(t *testing.T) {
	e := newEnv(t)
	e.SetClock(ts("2026-06-10T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("101000"), At: ts("2026-06-09T00:00:00Z")})
	req := invoice.CloseRequest{Period: month(t, "2026-06", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2026-06-10T00:00:00Z"), Pricing: moneyPricing(t)}
	if _, err := invoice.Close(e.Ctx, e.DB, req); err == nil || !strings.Contains(err.Error(), "has not ended") {
		t.Fatalf("a close of the open month: %v", err)
	}
	req.Preview = true
	res, err := invoice.Close(e.Ctx, e.DB, req)
	if err != nil {
		t.Fatal(err)
	}
	// 99,000 × 0.001 + 1,000 × 0.0005 = 99.50, fee 29.
	if len(res.Invoices) != 1 || amounts(res.Invoices[0]) != "api 2026-06=99.50 | fee 29.00 true-up 0.00 total 128.50 USD" {
		t.Errorf("preview: %+v", res.Invoices)
	}
	if e.Count("invoices") != 0 || e.Count("period_closes") != 0 {
		t.Errorf("a preview stored %d invoices, %d closes", e.Count("invoices"), e.Count("period_closes"))
	}
}

// Two plans may take effect on the same day: a late line priced with the
// plan the customer was on then, on the invoice of the plan it is on now,
// names its version by plan and date, and verify finds each.
func TestLateLineOfAnotherPlanSameDate(t *testing.T) {
	e := newEnv(t)
	plans := []pricing.Plan{
		{Name: "basic", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec("1")}}},
		{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec("2")}}},
	}
	for i := range plans {
		if err := plans[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	cat, _ := pricing.NewCatalog(plans)
	pr := &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("basic", []customer.PlanAssignment{{Customer: "c1", Plan: "pro", EffectiveFrom: "2026-07-01"}})}
	e.SetClock(ts("2026-06-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("3"), At: ts("2026-06-10T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-06", "UTC"), All: true, Meters: invMeters, Now: at("2026-07-02T00:00:00Z"), Pricing: pr})
	e.SetClock(ts("2026-07-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("5"), At: ts("2026-06-11T00:00:00Z")},
		row{Customer: "c1", Meter: "api", Qty: q("7"), At: ts("2026-07-11T00:00:00Z")})
	res := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-07", "UTC"), All: true, Meters: invMeters, Now: at("2026-08-02T00:00:00Z"), Pricing: pr})
	// July at pro's 2 a unit: 14; late June at basic's 1: 5.
	if got := amounts(res.Invoices[0]); got != "api 2026-07=14.00 api 2026-06*=5.00 | fee 0.00 true-up 0.00 total 19.00 USD" {
		t.Errorf("July: %s", got)
	}
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Errorf("verify: %s", problems(rep))
	}
}

// A close for all customers that cannot invoice one customer (here its plan
// is no longer declared) invoices every other one and records the
// customer, with why; the period stays open for them (their usage is not
// late, verify is clean), and once that is fixed a close of theirs alone
// makes their invoice.
func TestCloseForAllExcludesACustomerItCannotInvoice(t *testing.T) {
	e := newEnv(t)
	us := pricing.Plan{Name: "us", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec("1")}}}
	legacy := pricing.Plan{Name: "legacy", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec("2")}}}
	as := []customer.PlanAssignment{{Customer: "c1", Plan: "legacy", EffectiveFrom: "2026-01-01"}}
	broken := &invoice.Pricing{Catalog: catalogOf(t, us), Plans: customer.NewPlans("us", as)} // legacy left out of the configuration
	e.SetClock(ts("2026-06-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("3"), At: ts("2026-06-10T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("5"), At: ts("2026-06-11T00:00:00Z")})
	june := month(t, "2026-06", "UTC")
	res := e.closePeriod(t, invoice.CloseRequest{Period: june, All: true, Meters: invMeters, Now: at("2026-07-02T00:00:00Z"), Pricing: broken})
	if len(res.Invoices) != 1 || res.Invoices[0].Customer != "c2" || res.Invoices[0].Money.Total != "5.00" {
		t.Fatalf("the close made %+v, want c2's invoice of 5.00", res.Invoices)
	}
	if len(res.Excluded) != 1 || res.Excluded[0].Customer != "c1" || !strings.Contains(res.Excluded[0].Error, `plan "legacy" is not declared`) {
		t.Fatalf("excluded %+v, want c1 with why", res.Excluded)
	}
	if late, err := invoice.LateUsage(e.Ctx, e.DB, "", invMeters); err != nil || len(late) != 0 {
		t.Errorf("usage late: %+v, %v; want none: June stays open for c1", late, err)
	}
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Fatalf("verify with c1 excluded: %s", problems(rep))
	}
	// The close again for all: existing, and it names c1 still open.
	again := e.closePeriod(t, invoice.CloseRequest{Period: june, All: true, Meters: invMeters, Now: at("2026-07-03T00:00:00Z"), Pricing: broken})
	if !again.Existing || len(again.Excluded) != 1 || again.Excluded[0].Customer != "c1" {
		t.Errorf("close for all again: existing %v, excluded %+v; want existing with c1 still open", again.Existing, again.Excluded)
	}
	// legacy declared again: c1's own close makes its invoice of June.
	fixed := &invoice.Pricing{Catalog: catalogOf(t, us, legacy), Plans: customer.NewPlans("us", as)}
	own := e.closePeriod(t, invoice.CloseRequest{Period: june, Customer: "c1", Meters: invMeters, Now: at("2026-07-04T00:00:00Z"), Pricing: fixed})
	if own.Existing || len(own.Invoices) != 1 || own.Invoices[0].Money.Total != "6.00" {
		t.Fatalf("c1's close: existing %v, %+v; want a new invoice of 3 × 2.00", own.Existing, own.Invoices)
	}
	if again := e.closePeriod(t, invoice.CloseRequest{Period: june, All: true, Meters: invMeters, Now: at("2026-07-05T00:00:00Z"), Pricing: fixed}); len(again.Excluded) != 0 {
		t.Errorf("after c1's close, the close for all still names %+v", again.Excluded)
	}
	// Usage of June recorded now is late for both, on their July invoices.
	e.SetClock(ts("2026-07-10T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-06-12T00:00:00Z")})
	late, err := invoice.LateUsage(e.Ctx, e.DB, "", invMeters)
	if err != nil || len(late) != 1 || late[0].Customer != "c1" || late[0].Quantity.String() != "1" {
		t.Errorf("usage late: %+v, %v; want c1's 1", late, err)
	}
	if rep, err = invoice.Verify(e.Ctx, e.DB); err != nil {
		t.Fatal(err)
	} else if rep.First() != nil {
		t.Fatalf("verify: %s", problems(rep))
	}
}
