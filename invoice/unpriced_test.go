package invoice_test

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/pricing"
)

// Usage no price bills is billed as a quantity with no amount, and the
// close says so: a meter the customer's version does not price (unless it
// says unpriced: free), and a customer without a plan while plans exist.
func TestCloseReportsUsageNothingPrices(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("10"), At: ts("2026-10-05T00:00:00Z")},
		row{Customer: "c1", Meter: "exports", Qty: q("3"), At: ts("2026-10-05T00:00:00Z")},
		row{Customer: "c2", Meter: "exports", Qty: q("1"), At: ts("2026-10-05T00:00:00Z")},
		row{Customer: "c3", Meter: "api", Qty: q("1"), At: ts("2026-10-05T00:00:00Z")})
	free := unitPlan("free", "0.10")
	free.Unpriced = pricing.UnpricedFree
	pr := plansOf(t, "", []customer.PlanAssignment{{Customer: "c1", Plan: "usd", EffectiveFrom: "2026-01-01"}, {Customer: "c2", Plan: "free", EffectiveFrom: "2026-01-01"}},
		unitPlan("usd", "0.10"), free)
	res := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters,
		Now: at("2026-11-02T00:00:00Z"), Pricing: pr})
	var got []string
	for _, u := range res.Unpriced {
		got = append(got, u.String())
	}
	want := []string{
		`customer "c1": plan usd@2026-01-01 has no price for meter "exports", so its usage in 2026-10 is billed as a quantity with no amount (price it, or add unpriced: free to the version)`,
		`customer "c3" has api usage in 2026-10 and no plan: it is billed as a quantity with no amount (assign a plan, or set customers.default_plan)`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("unpriced usage:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The invoices are made all the same, exports as a quantity.
	if len(res.Invoices) != 3 || amounts(res.Invoices[0]) != "api 2026-10=1.00 exports 2026-10= | fee 0.00 true-up 0.00 total 1.00 USD" {
		t.Errorf("invoices: %d, c1's %s", len(res.Invoices), amounts(res.Invoices[0]))
	}
}
