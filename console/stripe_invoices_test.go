package console_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/stripe"
)

// The invoice pages show an invoice's state in Stripe (close mode) and
// every Stripe invoice event that billed it; the list shows the events
// that billed none.
func TestInvoicePagesShowStripeState(t *testing.T) {
	e := newEnv(t, false, func(o *testenv.Options) {
		o.Edits = append(o.Edits, func(c *config.Config) {
			c.Meters = []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum,
				Stripe: &ledger.StripeMeter{EventName: "api_requests", Mode: ledger.StripeClose}}}
			c.Stripe = &config.Stripe{APIKey: config.Secret{Value: "sk_test_console"}, APIBase: "http://127.0.0.1:1",
				Customers: config.StripeIdentity, MaxAttempts: 5, Concurrency: 1}
			c.Providers = append(c.Providers, config.Provider{Name: "stripe", Scheme: "stripe",
				Secrets: []config.Secret{{Value: "whsec_consoleTestSecret0123456789"}}, Tolerance: config.Duration{Duration: 5 * time.Minute}, MaxBody: 1 << 20})
		})
	})
	e.send(t, "evt_1", "cus_a", "4")
	e.send(t, "evt_2", "cus_b", "1")
	p, err := ledger.MonthPeriod("2026-11", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	res, err := invoice.Close(t.Context(), e.DB, invoice.CloseRequest{Period: p, All: true, Meters: e.Console.Meters,
		Now: func() time.Time { return now }, OnClose: stripe.NewSync(e.Config).OnClose(func() time.Time { return now })})
	if err != nil || len(res.Invoices) != 2 {
		t.Fatalf("close: %v %+v", err, res)
	}
	paidA := res.Invoices[0].ID
	if res.Invoices[0].Customer != "cus_a" {
		paidA = res.Invoices[1].ID
	}
	post := func(id, typ, customer string) {
		body := fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"created":%d,"data":{"object":{"id":"in_1","object":"invoice",`+
			`"customer":%q,"lines":{"data":[{"period":{"start":%d,"end":%d}}]}}}}`, id, typ, now.Unix(), customer, p.Start.Unix(), p.End.Unix())
		if r := e.PostReply("stripe", e.Sign("stripe", "", "", body, e.Now()), body); r.Code != 200 {
			t.Fatalf("post %s: %d %+v", id, r.Code, r.Body)
		}
	}
	post("evt_s1", stripe.EventInvoicePaid, "cus_a")
	post("evt_s2", stripe.EventInvoiceFinalized, "cus_nobody")
	e.signIn(t)

	doc := e.page(t, fmt.Sprintf("/ui/invoices/%d", paidA))
	if got := text(byID(doc, "stripe-state")); !strings.HasPrefix(got, "paid") {
		t.Errorf("state %q, want paid", got)
	}
	if rows := tableRows(t, doc, "stripe-events"); len(rows) != 1 || rows[0][1] != "invoice.paid" || !strings.Contains(rows[0][2], "in_1") {
		t.Errorf("events %q", rows)
	}
	doc = e.page(t, "/ui/invoices")
	states := map[string]string{}
	for _, r := range tableRows(t, doc, "invoices") {
		states[r[1]] = r[len(r)-1]
	}
	if states["cus_a"] != "paid" || states["cus_b"] != "pushed" {
		t.Errorf("states %v, want cus_a paid and cus_b pushed", states)
	}
	if rows := tableRows(t, doc, "stripe-unlinked"); len(rows) != 1 || !strings.Contains(rows[0][2], "cus_nobody") {
		t.Errorf("unlinked %q", rows)
	}
}
