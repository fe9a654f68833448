package forward_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/stripe"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

// November 2026 in UTC, the month testenv.UsageBody's usage is in: the
// period of the Stripe subscription invoice that bills it.
var (
	novStart = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC).Unix()
	novEnd   = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
	// finalizedAt is when Stripe finalizes November's invoice (its event's created).
	finalizedAt = time.Date(2026, 12, 1, 1, 0, 0, 0, time.UTC).Unix()
)

// invoiceEvent is a Stripe snapshot event of type typ about invoice in_1
// of customer, with one metered line for [start, end) and the invoice's own
// period looking back one period, as a subscription invoice's does.
func invoiceEvent(id, typ string, created int64, customer string, start, end int64) []byte {
	status := map[string]string{stripe.EventInvoiceFinalized: "open", stripe.EventInvoicePaid: "paid", stripe.EventInvoicePaymentFailed: "open"}[typ]
	return fmt.Appendf(nil, `{"id":%q,"object":"event","api_version":"2025-03-31.basil","created":%d,"type":%q,"livemode":false,`+
		`"data":{"object":{"id":"in_1","object":"invoice","customer":%q,"status":%q,"period_start":%d,"period_end":%d,`+
		`"lines":{"object":"list","has_more":false,"data":[{"id":"il_1","object":"line_item","amount":700,`+
		`"period":{"start":%d,"end":%d}}]}}}}`, id, created, typ, customer, status, start, end, start, end)
}

// closedNovember is a close-mode ledger whose November invoice for cus_1
// was closed and its line pushed: the invoice's id.
func closedNovember(t *testing.T) (*testenv.Env, int64) { return closedNovemberWith(t, nil) }

// closedNovemberWith is closedNovember with more configuration, and setup
// run before the usage arrives.
func closedNovemberWith(t *testing.T, setup func(*testenv.Env), more ...func(*config.Config)) (*testenv.Env, int64) {
	t.Helper()
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeClose, "1", append([]func(*config.Config){withStripeProvider}, more...)...)
	if setup != nil {
		setup(e)
	}
	for i := range 3 {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	p, err := ledger.MonthPeriod("2026-11", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: p, All: true,
		Meters: ledger.NewMeters(e.Config.Meters), OnClose: stripe.NewSync(e.Config).OnClose(nil)})
	if err != nil || len(res.Invoices) != 1 {
		t.Fatalf("close: %v, %d invoices", err, len(res.Invoices))
	}
	await.Eventually(t, 10*time.Second, "the line's push delivered", func() bool { return rowsPushed(e, "delivered") == 1 })
	return e, res.Invoices[0].ID
}

// postStripe posts a Stripe event signed by Stripe to the stripe provider.
func postStripe(t *testing.T, e *testenv.Env, body []byte) testenv.Response {
	t.Helper()
	r := e.PostReply("stripe", e.Sign("stripe", "", "", body, time.Now()), body)
	if r.Code != 200 {
		t.Fatalf("post: %d %+v", r.Code, r.Body)
	}
	return r
}

// stateOf is invoice id's Stripe state and how many events billed it.
func stateOf(t *testing.T, e *testenv.Env, id int64) (string, int) {
	t.Helper()
	states, err := stripe.States(context.Background(), e.DB, []int64{id})
	if err != nil {
		t.Fatal(err)
	}
	if states[id] == nil {
		return "", 0
	}
	return states[id].State, len(states[id].Events)
}

// Finalized, then paid: the invoice shows pushed, invoiced, then paid, and
// keeps both events; Stripe's redelivery of an event adds nothing.
func TestStripeInvoicePaidAfterFinalized(t *testing.T) {
	e, id := closedNovember(t)
	if s, n := stateOf(t, e, id); s != stripe.InvoicePushed || n != 0 {
		t.Fatalf("after the close: %s with %d events, want pushed with none", s, n)
	}
	postStripe(t, e, invoiceEvent("evt_fin", stripe.EventInvoiceFinalized, finalizedAt, "cus_1", novStart, novEnd))
	if s, n := stateOf(t, e, id); s != stripe.InvoiceInvoiced || n != 1 {
		t.Fatalf("after invoice.finalized: %s with %d events, want invoiced with 1", s, n)
	}
	paid := invoiceEvent("evt_paid", stripe.EventInvoicePaid, finalizedAt+3600, "cus_1", novStart, novEnd)
	postStripe(t, e, paid)
	if s, n := stateOf(t, e, id); s != stripe.InvoicePaid || n != 2 {
		t.Fatalf("after invoice.paid: %s with %d events, want paid with 2", s, n)
	}
	if r := postStripe(t, e, paid); !r.Body.Duplicate {
		t.Errorf("redelivery: %+v, want a duplicate", r.Body)
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_invoice_states WHERE invoice_id = ? AND stripe_event = 'evt_paid'
		AND receipt_id = (SELECT id FROM receipts WHERE provider = 'stripe' AND event_id = 'evt_paid')`, id); n != 1 {
		t.Errorf("%d states of evt_paid after a redelivery, want 1", n)
	}
	if n := e.Count("stripe_invoice_states"); n != 2 {
		t.Errorf("%d states, want 2", n)
	}
	// The invoice as invoice show and the admin API write it.
	invs, err := invoice.ListInvoices(context.Background(), e.DB, invoice.InvoiceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if err := stripe.WithStates(context.Background(), e.DB, invs); err != nil {
		t.Fatal(err)
	}
	if len(invs) != 1 || invs[0].Stripe == nil || invs[0].Stripe.State != stripe.InvoicePaid ||
		invs[0].Stripe.Events[0].StripeEvent != "evt_fin" || invs[0].Stripe.Events[1].StripeInvoice != "in_1" {
		t.Errorf("listed: %+v", invs)
	}
	// The admin API's invoice endpoints answer the same.
	mux := http.NewServeMux()
	(&admin.Customers{DB: e.DB, Now: time.Now}).Routes(mux)
	for _, path := range []string{fmt.Sprintf("/v1/invoices/%d", id), "/v1/invoices?period=2026-11"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var got struct {
			Stripe struct {
				State  string `json:"state"`
				Events []struct {
					StripeEvent string `json:"stripe_event"`
				} `json:"events"`
			} `json:"stripe"`
		}
		body := rec.Body.Bytes()
		if path != fmt.Sprintf("/v1/invoices/%d", id) {
			var list []json.RawMessage
			if err := json.Unmarshal(body, &list); err != nil || len(list) != 1 {
				t.Fatalf("GET %s: %d %s", path, rec.Code, body)
			}
			body = list[0]
		}
		if err := json.Unmarshal(body, &got); err != nil || rec.Code != 200 || got.Stripe.State != "paid" || len(got.Stripe.Events) != 2 {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body.Bytes())
		}
	}
}

// A failed payment, then a paid one: each state in turn, every event kept.
func TestStripeInvoicePaymentFailedThenPaid(t *testing.T) {
	e, id := closedNovember(t)
	postStripe(t, e, invoiceEvent("evt_fin", stripe.EventInvoiceFinalized, finalizedAt, "cus_1", novStart, novEnd))
	postStripe(t, e, invoiceEvent("evt_fail", stripe.EventInvoicePaymentFailed, finalizedAt+60, "cus_1", novStart, novEnd))
	if s, n := stateOf(t, e, id); s != stripe.InvoicePaymentFailed || n != 2 {
		t.Fatalf("after invoice.payment_failed: %s with %d events, want payment_failed with 2", s, n)
	}
	postStripe(t, e, invoiceEvent("evt_paid", stripe.EventInvoicePaid, finalizedAt+86400, "cus_1", novStart, novEnd))
	if s, n := stateOf(t, e, id); s != stripe.InvoicePaid || n != 3 {
		t.Fatalf("after invoice.paid: %s with %d events, want paid with 3", s, n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_invoice_states WHERE invoice_id = ? AND state = 'payment_failed'`, id); n != 1 {
		t.Errorf("%d payment_failed states, want 1 (a later event erases no earlier one)", n)
	}
}

// Stripe does not promise order: paid arrives before finalized (and a
// failure before both). The state is the one Stripe reached last by its
// events' created, and every event is kept.
func TestStripeInvoiceEventsOutOfOrder(t *testing.T) {
	e, id := closedNovember(t)
	postStripe(t, e, invoiceEvent("evt_paid", stripe.EventInvoicePaid, finalizedAt+7200, "cus_1", novStart, novEnd))
	postStripe(t, e, invoiceEvent("evt_fail", stripe.EventInvoicePaymentFailed, finalizedAt+60, "cus_1", novStart, novEnd))
	postStripe(t, e, invoiceEvent("evt_fin", stripe.EventInvoiceFinalized, finalizedAt, "cus_1", novStart, novEnd))
	if s, n := stateOf(t, e, id); s != stripe.InvoicePaid || n != 3 {
		t.Fatalf("after paid, failed, finalized arrived in that order: %s with %d events, want paid with 3", s, n)
	}
	states, err := stripe.States(context.Background(), e.DB, []int64{id})
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, ev := range states[id].Events {
		order = append(order, ev.State)
	}
	if fmt.Sprint(order) != "[invoiced payment_failed paid]" {
		t.Errorf("events in %v, want Stripe's order", order)
	}
	// Stripe stamps whole seconds: finalized and paid in the same second
	// show paid, whichever arrived last.
	e2, id2 := closedNovember(t)
	postStripe(t, e2, invoiceEvent("evt_paid", stripe.EventInvoicePaid, finalizedAt, "cus_1", novStart, novEnd))
	postStripe(t, e2, invoiceEvent("evt_fin", stripe.EventInvoiceFinalized, finalizedAt, "cus_1", novStart, novEnd))
	if s, _ := stateOf(t, e2, id2); s != stripe.InvoicePaid {
		t.Errorf("finalized and paid in one second: %s, want paid", s)
	}
}

// An invoice event for a customer none of ours maps to, or for a period
// no close pushed, is kept unlinked and listed; the invoice stays pushed.
func TestStripeInvoiceEventForUnknownCustomerIsKept(t *testing.T) {
	e, id := closedNovember(t)
	postStripe(t, e, invoiceEvent("evt_other", stripe.EventInvoicePaid, finalizedAt, "cus_someone_else", novStart, novEnd))
	dec := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC).Unix()
	postStripe(t, e, invoiceEvent("evt_dec", stripe.EventInvoiceFinalized, finalizedAt, "cus_1", dec, dec+31*86400))
	if s, n := stateOf(t, e, id); s != stripe.InvoicePushed || n != 0 {
		t.Errorf("November's invoice: %s with %d events, want pushed with none", s, n)
	}
	unlinked, err := e.DB.UnlinkedStripeInvoiceStates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(unlinked) != 2 || unlinked[0].StripeCustomer != "cus_someone_else" || unlinked[0].State != stripe.InvoicePaid ||
		unlinked[1].StripeEvent != "evt_dec" || unlinked[1].PeriodStart != dec {
		t.Errorf("unlinked: %+v, want both events", unlinked)
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_invoice_states WHERE invoice_id IS NULL`); n != 2 {
		t.Errorf("%d unlinked rows, want 2", n)
	}
}

// With customers: link, the Stripe customer an invoice names is the one
// the registry links a customer of ours to.
func TestStripeInvoiceLinksThroughTheRegistry(t *testing.T) {
	link := func(e *testenv.Env) {
		if err := customer.AddCustomer(context.Background(), e.DB, customer.Customer{ID: "cus_1",
			ExternalIDs: map[string]string{stripe.ExternalID: "cus_Stripe9"}, RecordedAt: time.Now().UTC(), Note: "test"}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	e, id := closedNovemberWith(t, link, func(c *config.Config) { c.Stripe.Customers = config.StripeLink })
	postStripe(t, e, invoiceEvent("evt_fin", stripe.EventInvoiceFinalized, finalizedAt, "cus_Stripe9", novStart, novEnd))
	if s, n := stateOf(t, e, id); s != stripe.InvoiceInvoiced || n != 1 {
		t.Errorf("after invoice.finalized for the linked customer: %s with %d events, want invoiced with 1", s, n)
	}
}

// A sample error without an identifier names the meter by its Stripe id
// and, in its message, the customer: with stripe.meter_id declared it is
// linked to that customer's latest push of the meter, and stripe status
// counts it; without a customer, to the meter's latest push.
func TestStripeErrorReportLinksByMeterID(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1", withStripeProvider, func(c *config.Config) {
		c.Meters[0].Stripe.MeterID = "mtr_1"
	})
	for i, c := range []string{"cus_1", "cus_2", "cus_1"} {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody(c, "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	await.Eventually(t, 10*time.Second, "3 pushes delivered", func() bool { return rowsPushed(e, "delivered") == 3 })
	// meterErrorEvent's sample message names cus_gone: make it name cus_2.
	body := meterErrorEvent("evt_test_mid1", "")
	body = []byte(strings.ReplaceAll(string(body), "cus_gone", "cus_2"))
	postStripe(t, e, body)
	var want int64
	e.DB.Read.QueryRow(`SELECT MAX(id) FROM stripe_pushes WHERE customer_id = 'cus_2'`).Scan(&want)
	if n := e.Int(`SELECT COUNT(*) FROM stripe_reports WHERE push_id = ? AND identifier = ''`, want); n != 1 {
		t.Errorf("%d reports linked to cus_2's push %d, want 1", n, want)
	}
	period, err := ledger.MonthPeriod("2026-11", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := stripe.Status(context.Background(), e.DB, e.Config.Meters, period, "cus_2", nil)
	if err != nil || len(lines) != 1 || lines[0].Reported != 1 || lines[0].State != stripe.StateDiffers {
		t.Errorf("cus_2's status: %+v, %v; want 1 reported push", lines, err)
	}
	// A sample that names no customer: the meter's latest push.
	body = []byte(strings.ReplaceAll(string(meterErrorEvent("evt_test_mid2", "")), "No customer with id cus_gone", "Invalid value"))
	postStripe(t, e, body)
	e.DB.Read.QueryRow(`SELECT MAX(id) FROM stripe_pushes`).Scan(&want)
	if n := e.Int(`SELECT COUNT(*) FROM stripe_reports WHERE push_id = ? AND receipt_id = (SELECT id FROM receipts WHERE event_id = 'evt_test_mid2')`, want); n != 1 {
		t.Errorf("%d reports linked to the latest push %d, want 1", n, want)
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_reports WHERE push_id IS NULL`); n != 0 {
		t.Errorf("%d unlinked reports, want none", n)
	}
}
