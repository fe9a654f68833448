package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// starterPricing: 2 requests at 1.00, 3 more at 0.50, then 0.25; a 3.00 fee
// and a 5.00 minimum (the browser test's plan).
func starterPricing(t testing.TB) *invoice.Pricing {
	return planPricing(t, "starter", "3.00", "5.00", [2]string{"2", "1"}, [2]string{"5", "0.50"}, [2]string{"", "0.25"})
}

// The customer page shows the money: the customer's closed invoices with
// their totals, and the draft of the month shown, which is what `invoice
// preview` computes (invoice.Preview). Without period= it opens on the month
// to close, as the usage page does, and says so; period= picks another.
func TestCustomerPageMoney(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, false, func(o *testenv.Options) { o.Backend = backend })
		e.Pricing = starterPricing(t)
		e.Console.Catalog, e.Console.DefaultPlan = e.Pricing.Catalog, "starter"
		// November: 6 requests, 2 × 1 + 3 × 0.50 + 1 × 0.25 + 3.00 = 6.75.
		for i, q := range []string{"1", "2", "3"} {
			e.send(t, fmt.Sprintf("nov_%d", i), "cus_1", q)
		}
		e.Clock.Set(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
		// December so far: 10 requests, 2 + 1.50 + 5 × 0.25 + 3.00 = 7.75.
		if r := e.Send("dec_0", usageBody("cus_1", "api_requests", "10", e.Now())); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
		e.signIn(t)

		preview := func(month string) string {
			t.Helper()
			p, err := ledger.MonthPeriod(month, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			res, err := invoice.Preview(context.Background(), e.DB, invoice.CloseRequest{Period: p, Customer: "cus_1", Meters: e.Console.Meters,
				Now: e.Now, Pricing: e.Pricing})
			if err != nil || len(res.Invoices) != 1 {
				t.Fatalf("preview of %s: %+v, %v", month, res, err)
			}
			return res.Invoices[0].Money.Total + " " + res.Invoices[0].Money.Currency
		}
		draftTotal := func(doc *html.Node) string {
			cells := find(doc, func(n *html.Node) bool { return n.Data == "td" && strings.Contains(attr(n, "class"), "draft-total") })
			if len(cells) != 1 {
				return fmt.Sprintf("%d draft totals", len(cells))
			}
			return text(cells[0])
		}

		// On the 6th, November is not closed: the page shows it.
		doc := e.page(t, "/ui/customer?id=cus_1")
		if got := text(byID(doc, "month")); !strings.Contains(got, "2026-11 in UTC (the default: the last month, until it is closed)") {
			t.Errorf("the page says %q", got)
		}
		if got, want := draftTotal(doc), preview("2026-11"); got != want || want != "6.75 USD" {
			t.Errorf("November's draft total %q, invoice preview's %q, want 6.75 USD", got, want)
		}
		if got := text(byID(doc, "draft-state")); !strings.Contains(got, "invoice preview cus_1 --period 2026-11") || !strings.Contains(got, "has ended and is not closed yet") {
			t.Errorf("the draft says %q", got)
		}
		if r := tableRows(t, doc, "customer-invoices"); len(r) != 1 || !strings.Contains(r[0][0], "no closed invoice") {
			t.Errorf("invoices before any close: %q", r)
		}
		// period= picks the month.
		doc = e.page(t, "/ui/customer?id=cus_1&period=2026-12")
		if got, want := draftTotal(doc), preview("2026-12"); got != want || want != "7.75 USD" {
			t.Errorf("December's draft total %q, invoice preview's %q, want 7.75 USD", got, want)
		}
		if got := text(byID(doc, "month")); !strings.Contains(got, "2026-12 in UTC.") || strings.Contains(got, "default") {
			t.Errorf("with period=2026-12 the page says %q", got)
		}
		if code, body, _ := e.get(t, "/ui/customer?id=cus_1&period=December"); code != http.StatusBadRequest || !strings.Contains(body, "period") {
			t.Errorf("a bad period: %d", code)
		}

		// Once November is closed: December by default, November's invoice
		// listed with its total, and November's page shows it closed.
		e.closeMonth(t, "2026-11", e.Now())
		doc = e.page(t, "/ui/customer?id=cus_1")
		if got := text(byID(doc, "month")); !strings.Contains(got, "2026-12 in UTC (the default: the current month, since the last one is closed)") {
			t.Errorf("after the close the page says %q", got)
		}
		if got := draftTotal(doc); got != "7.75 USD" {
			t.Errorf("December's draft total after November's close: %q", got)
		}
		rows := tableRows(t, doc, "customer-invoices")
		if len(rows) != 1 || rows[0][0] != "1" || rows[0][1] != "2026-11" || rows[0][6] != "6.75 USD" {
			t.Errorf("the customer's invoices: %q", rows)
		}
		if got := text(byID(doc, "customer-totals")); !strings.Contains(got, "1 invoice(s) in USD") || !strings.Contains(got, "6.75 USD") {
			t.Errorf("the invoices' totals: %q", got)
		}
		doc = e.page(t, "/ui/customer?id=cus_1&period=2026-11")
		if got := text(byID(doc, "draft-state")); !strings.Contains(got, "2026-11 is closed: invoice 1, 6.75 USD") {
			t.Errorf("November once closed: %q", got)
		}
	})
}

// The usage page marks late usage beside the total it is part of: usage of
// a closed month recorded after its close, on none of the month's invoices,
// as `hookledger usage late` lists it.
func TestUsageMarksLateUsage(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, false, func(o *testenv.Options) { o.Backend = backend })
		e.send(t, "nov_0", "cus_1", "100")
		e.send(t, "nov_1", "cus_2", "7")
		e.closeMonth(t, "2026-11", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
		e.Clock.Set(time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC))
		if r := e.Send("evt_late", usageBody("cus_1", "api_requests", "5", time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC))); r.Code != 200 {
			t.Fatalf("late event: %d", r.Code)
		}
		e.signIn(t)
		late, err := invoice.LateUsage(context.Background(), e.DB, "", e.Console.Meters)
		if err != nil || len(late) != 1 || late[0].Quantity.String() != "5" {
			t.Fatalf("usage late: %+v, %v", late, err)
		}
		for _, path := range []string{"/ui/usage?period=2026-11", "/ui/usage?period=2026-11&customer=cus_1"} {
			doc := e.page(t, path)
			var got []string
			for _, r := range tableRows(t, doc, "usage") {
				got = append(got, r[0]+" "+r[3])
			}
			want := "cus_1 1055 late | cus_2 7"
			if strings.Contains(path, "customer") {
				want = "cus_1 1055 late"
			}
			if strings.Join(got, " | ") != want {
				t.Errorf("%s: %q, want %q", path, strings.Join(got, " | "), want)
			}
			if note := text(byID(doc, "late-note")); !strings.Contains(note, "hookledger usage late") {
				t.Errorf("%s: the late note says %q", path, note)
			}
			if links(doc, func(n *html.Node) bool { return attr(n, "href") == "#late-note" }) == nil {
				t.Errorf("%s: no link from the late usage to its note", path)
			}
		}
		// December's page has no late usage of November to mark.
		if doc := e.page(t, "/ui/usage?period=2026-12"); byID(doc, "late-note") != nil {
			t.Error("December's usage page marks late usage")
		}
	})
}
