package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/pricing"
)

func dec(s string) *pricing.Decimal { d := pricing.MustDecimal(s); return &d }

// planPricing is one plan, the default for every customer, pricing
// api_requests graduated over tiers (up_to, unit) with a fee and a minimum.
func planPricing(t testing.TB, name, fee, minimum string, tiers ...[2]string) *invoice.Pricing {
	t.Helper()
	var ts []pricing.Tier
	for _, tr := range tiers {
		tier := pricing.Tier{Unit: pricing.MustDecimal(tr[1])}
		if tr[0] != "" {
			tier.UpTo = dec(tr[0])
		}
		ts = append(ts, tier)
	}
	plans := []pricing.Plan{{Name: name, Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec(fee), Minimum: dec(minimum),
		Prices: []pricing.Price{{Meter: "api_requests", Model: pricing.Graduated, Tiers: ts}}}}
	if err := plans[0].Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.NewCatalog(plans)
	if err != nil {
		t.Fatal(err)
	}
	return &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans(name, nil)}
}

// proPricing: 1,000 requests free, 0.001 up to 100,000, 0.0005 above; a
// 29.00 fee and a 50.00 minimum.
func proPricing(t testing.TB) *invoice.Pricing {
	return planPricing(t, "pro", "29.00", "50.00", [2]string{"1000", "0"}, [2]string{"100000", "0.001"}, [2]string{"", "0.0005"})
}

// pricedInvoices: invoice 1 is October's, closed before prices (quantities
// only); November is priced: cus_big (invoice 2) used 150,001 requests,
// cus_small (3) 500; 20,000 more of cus_big's November arrive after that
// close and are billed late on its December invoice (4) beside 3,000.
func pricedInvoices(t *testing.T, e *env) {
	t.Helper()
	send := func(id, customer, qty string, at time.Time) {
		t.Helper()
		if r := e.Send(id, usageBody(customer, "api_requests", qty, at)); r.Code != 200 {
			t.Fatalf("%s: %d", id, r.Code)
		}
	}
	send("evt_old", "cus_old", "7", time.Date(2026, 10, 15, 0, 0, 0, 0, time.UTC))
	e.closeMonth(t, "2026-10", time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC))
	e.Pricing = proPricing(t)
	send("evt_big_1", "cus_big", "100000", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC))
	send("evt_big_2", "cus_big", "50001", time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
	send("evt_small", "cus_small", "500", time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
	e.closeMonth(t, "2026-11", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	e.Clock.Set(time.Date(2026, 12, 10, 0, 0, 0, 0, time.UTC))
	send("evt_big_late", "cus_big", "20000", time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	send("evt_big_3", "cus_big", "3000", time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC))
	e.closeMonth(t, "2026-12", time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC))
}

// The invoice pages show the money every figure of which is worked out by
// hand: totals in the list, and per line the amount, exact amount, plan
// version and the price's breakdown tier by tier.
func TestInvoiceMoneyPages(t *testing.T) {
	e := newEnv(t, false)
	pricedInvoices(t, e)
	e.signIn(t)

	// id, customer, period, tz, lines, late, plan, total, …
	list := tableRows(t, e.page(t, "/ui/invoices"), "invoices")
	got := make([]string, len(list))
	for i, r := range list {
		got[i] = strings.Join([]string{r[0], r[1], r[6], r[7]}, " ")
	}
	// 2: 99 + 25.0005 → 124.00, + 29 fee. 3: 500 is free: 29 + 21 true-up.
	// 4: 2.00 + 29 is 19 short of 50, + the late 10.00.
	want := []string{"4 cus_big pro 60.00 USD", "3 cus_small pro 50.00 USD", "2 cus_big pro 153.00 USD", "1 cus_old — —"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("invoice list:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	doc := e.page(t, "/ui/invoices/2")
	for id, want := range map[string]string{"plan": "pro", "fee": "29.00 USD", "true-up": "0.00 USD (up to the plan's minimum)", "total": "153.00 USD"} {
		if got := textOf(doc, id); got != want {
			t.Errorf("invoice 2 #%s: %q, want %q", id, got, want)
		}
	}
	amounts := tableRows(t, doc, "amounts")
	wantRow := []string{"1", "api_requests", "2026-11", "150001", "0", "pro@2026-01-01", "124.00 USD", "124.0005000000",
		"1000 × 0 = 0; 99000 × 0.001 = 99; 50001 × 0.0005 = 25.0005; total 124.0005"}
	if len(amounts) != 1 || strings.Join(amounts[0], "|") != strings.Join(wantRow, "|") {
		t.Errorf("invoice 2 amounts %q\nwant %q", amounts, wantRow)
	}
	if txt := text(doc); !strings.Contains(txt, "every amount, the fee, true-up and total recompute from the invoice's prices") ||
		!strings.Contains(txt, "The invoice and every line recompute to what was frozen") {
		t.Errorf("invoice 2 does not say its money recomputes: %s", txt)
	}

	doc = e.page(t, "/ui/invoices/4")
	if got := textOf(doc, "total"); got != "60.00 USD" {
		t.Errorf("invoice 4 total %q", got)
	}
	if got := textOf(doc, "true-up"); !strings.HasPrefix(got, "19.00 USD") {
		t.Errorf("invoice 4 true-up %q", got)
	}
	amounts = tableRows(t, doc, "amounts")
	// The late line, at the margin above the 150,001 November billed:
	// (99 + 70,001 × 0.0005) − (99 + 50,001 × 0.0005) = 10.
	if len(amounts) != 2 || amounts[0][6] != "2.00 USD" || !strings.Contains(amounts[1][0], "late") || amounts[1][4] != "150001" ||
		amounts[1][6] != "10.00 USD" || !strings.HasPrefix(amounts[1][8], "price(170001) − price(150001) = 134.0005 − 124.0005 = 10;") {
		t.Errorf("invoice 4 amounts %q", amounts)
	}

	// Invoice 1 was closed without prices: no money on its page.
	doc = e.page(t, "/ui/invoices/1")
	if byID(doc, "amounts") != nil || byID(doc, "total") != nil || !strings.Contains(text(doc), "no plan priced this invoice") {
		t.Errorf("unpriced invoice 1 shows money: %s", text(doc))
	}

	// The trace of the late line shows the same money.
	tdoc := e.page(t, "/ui/dispute?target=invoice:4/2")
	txt := text(tdoc)
	for _, want := range []string{"fee 29.00, true-up 19.00, total 60.00 USD recomputes from the prices", "10.00 USD", "150001",
		"price(170001) − price(150001)"} {
		if !strings.Contains(txt, want) {
			t.Errorf("trace lacks %q: %s", want, txt)
		}
	}
}

// textOf is the text of the element with id, "" when there is none.
func textOf(doc *html.Node, id string) string {
	if n := byID(doc, id); n != nil {
		return text(n)
	}
	return ""
}

// An amount edited in the database: the invoice page recomputes it from
// the invoice's prices and says what differs.
func TestInvoiceMoneyTamper(t *testing.T) {
	e := newEnv(t, false)
	pricedInvoices(t, e)
	if e.DB.Postgres() {
		e.Exec(`ALTER TABLE invoice_lines DISABLE TRIGGER invoice_lines_no_change`)
	} else {
		e.Exec(`DROP TRIGGER invoice_lines_no_update`)
	}
	e.Exec(`UPDATE invoice_lines SET amount = '99.00' WHERE invoice_id = 2 AND line_no = 1`)
	e.signIn(t)
	txt := text(e.page(t, "/ui/invoices/2"))
	if !strings.Contains(txt, "MISMATCH") || !strings.Contains(txt, "line 1 (api_requests 2026-11) recomputes to 124.00") {
		t.Errorf("the edited amount does not show: %s", txt)
	}
	if txt := text(e.page(t, "/ui/dispute?target=invoice:2/1")); !strings.Contains(txt, fmt.Sprintf("invoice %d: money: line 1", 2)) {
		t.Errorf("the trace does not name the money problem: %s", txt)
	}
}
