package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/pricing"
)

// The invoice page of a month split at a plan change shows each part (its
// dates, plan version, prorated fee and true-up) and each line's part.
func TestInvoicePageShowsParts(t *testing.T) {
	e := newEnv(t, false)
	basic := planPricing(t, "basic", "30.00", "0.00", [2]string{"", "1"}).Catalog.Versions("basic")[0]
	pro := planPricing(t, "pro", "60.00", "0.00", [2]string{"", "0.5"}).Catalog.Versions("pro")[0]
	cat, err := pricing.NewCatalog([]pricing.Plan{*basic, *pro})
	if err != nil {
		t.Fatal(err)
	}
	e.Pricing = &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("basic", []customer.PlanAssignment{{Customer: "cus_1", Plan: "pro", EffectiveFrom: "2026-11-16"}})}
	e.send(t, "e1", "cus_1", "4") // testenv.UsageBody's time: 2026-11-29, in pro's part
	e.closeMonth(t, "2026-11", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	e.signIn(t)
	invs, err := invoice.ListInvoices(t.Context(), e.DB, invoice.InvoiceFilter{})
	if err != nil || len(invs) != 1 || len(invs[0].Parts) != 2 {
		t.Fatalf("invoices: %+v, %v", invs, err)
	}
	_, body, _ := e.get(t, "/ui/invoices/"+itoa(invs[0].ID))
	// basic's 30.00 for 15 of 30 days: 15.00; pro's 60.00: 30.00; 4 × 0.5 = 2.00.
	for _, want := range []string{"basic@2026-01-01, fee 15.00, true-up 0.00", "pro@2026-01-01, fee 30.00, true-up 0.00", "11-16 to 12-01", "47.00 USD"} {
		if !strings.Contains(body, want) {
			t.Errorf("the invoice page lacks %q", want)
		}
	}
}
