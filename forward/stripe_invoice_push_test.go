package forward_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/stripe"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

// invoicePlans price api_requests in three currencies with a fee and a
// minimum: USD and KWD (2 and 3 decimals) and JPY (none).
func invoicePlans(t *testing.T) *pricing.Catalog {
	t.Helper()
	plan := func(name, currency, unit, fee, minimum string) pricing.Plan {
		u, f, m := pricing.MustDecimal(unit), pricing.MustDecimal(fee), pricing.MustDecimal(minimum)
		p := pricing.Plan{Name: name, Currency: currency, EffectiveFrom: "2026-01-01", Fee: &f, Minimum: &m,
			Prices: []pricing.Price{{Meter: "api_requests", Model: pricing.Unit, Unit: &u}}}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cat, err := pricing.NewCatalog([]pricing.Plan{
		plan("usd", "USD", "0.0015", "10", "50"),  // 10,000 requests: 15.00 + 10.00 fee + 25.00 true-up = 50.00
		plan("jpy", "JPY", "0.3", "1000", "0"),    // 10,000 requests: 3,000 + 1,000 fee = 4,000
		plan("kwd", "KWD", "0.0001234", "1", "0"), // 10,000 requests: 1.234 + 1.000 fee = 2.234
		plan("free", "USD", "0", "0", "0"),        // nothing to charge: never sent
	})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

// runningClock runs from a start the test picks, and jumps when told:
// the relay's and the fake Stripe's clock (both back off and expire keys
// by it).
type runningClock struct {
	mu     sync.Mutex
	at     time.Time // the reading at began
	began  time.Time
	jumped time.Duration
}

func newRunningClock(at time.Time) *runningClock { return &runningClock{at: at, began: time.Now()} }

func (c *runningClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at.Add(time.Since(c.began) + c.jumped)
}

func (c *runningClock) Jump(d time.Duration) {
	c.mu.Lock()
	c.jumped += d
	c.mu.Unlock()
}

// invoiceEnv is a ledger that sends closed invoices to Stripe at base
// (identity customers), its writer's clock stopped at now, the fake's
// running from now.
func invoiceEnv(t *testing.T, fake *fakestripe.Stripe, now time.Time, more ...func(*config.Config)) (*testenv.Env, *runningClock) {
	t.Helper()
	e := testenv.New(t, testenv.Options{Now: now, Edits: append([]func(*config.Config){func(c *config.Config) {
		c.Meters = []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum}}
		on := true
		s := &config.Stripe{APIKey: config.Secret{Value: stripeKey}, APIBase: fake.URL, Customers: config.StripeIdentity,
			MaxAttempts: 100, Concurrency: 2, Invoices: &config.StripeInvoices{Enabled: true, CollectionMethod: config.ChargeAutomatically,
				DaysUntilDue: 30, Finalize: &on}}
		s.Timeout.Duration, s.MaxAge.Duration = 2*time.Second, 30*24*time.Hour
		s.Backoff.Duration, s.MaxBackoff.Duration = 10*time.Millisecond, 50*time.Millisecond
		c.Stripe = s
	}}, more...)})
	clock := newRunningClock(now)
	fake.Mu.Lock()
	fake.Now = clock.Now
	fake.Mu.Unlock()
	return e, clock
}

func startInvoiceRelay(t *testing.T, e *testenv.Env, clock *runningClock) *forward.Relay {
	t.Helper()
	r := &forward.Relay{DB: e.DB, Writer: e.Writer, Stripe: e.Config.Stripe, Pushes: e.DB, Poll: 20 * time.Millisecond, Sole: true,
		Now: clock.Now, Log: slog.New(slog.NewTextHandler(&syncBuffer{}, nil))}
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// closeNovember sends 10,000 requests of November for each customer and
// closes November with the plans; the invoices by customer.
func closeNovember(t *testing.T, e *testenv.Env, customers map[string]string) map[string]invoice.Invoice {
	t.Helper()
	var as []customer.PlanAssignment
	for c, plan := range customers {
		body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":%q,"meter":"api_requests","quantity":10000,"occurred_at":"2026-11-20T10:00:00Z"}}`, c)
		if r := e.Send("evt_"+c, body); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
		as = append(as, customer.PlanAssignment{Customer: c, Plan: plan, EffectiveFrom: "2026-01-01"})
	}
	p, err := ledger.MonthPeriod("2026-11", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	res, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: p, All: true, Meters: ledger.NewMeters(e.Config.Meters),
		Pricing: &invoice.Pricing{Catalog: invoicePlans(t), Plans: customer.NewPlans("", as)}, Now: e.Clock.Now,
		OnClose: stripe.NewSync(e.Config).OnClose(e.Clock.Now)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]invoice.Invoice{}
	for _, inv := range res.Invoices {
		out[inv.Customer] = inv
	}
	return out
}

func invoiceCount(e *testenv.Env, status string) int {
	return e.Int(`SELECT COUNT(*) FROM outbox WHERE destination = 'stripe-invoices' AND status = ?`, status)
}

// Each closed invoice with money to charge becomes one Stripe invoice, its
// items adding up to the total in the currency's minor units (USD, JPY,
// KWD), finalized, however often Stripe fails on the way: three calls in
// ten fail, half of them after Stripe did the work (the answer lost). An
// invoice with nothing to charge is not sent. What Stripe answered is kept,
// and its amount due is the invoice's total.
func TestStripeInvoicesAreCreatedOnce(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	fake.Fail = func(n int) fakestripe.Failure {
		return [...]fakestripe.Failure{fakestripe.None, fakestripe.None, fakestripe.LostReply, fakestripe.None, fakestripe.None,
			fakestripe.Down, fakestripe.None, fakestripe.None, fakestripe.LostReply, fakestripe.None}[n%10]
	}
	e, clock := invoiceEnv(t, fake, time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	startInvoiceRelay(t, e, clock)
	invs := closeNovember(t, e, map[string]string{"cus_usd": "usd", "cus_jpy": "jpy", "cus_kwd": "kwd", "cus_free": "free"})
	if n := e.Count("stripe_invoice_pushes"); n != 3 {
		t.Fatalf("%d invoice pushes, want 3 (the free plan's 0.00 is not sent)", n)
	}
	await.Eventually(t, 20*time.Second, "three invoices delivered", func() bool { return invoiceCount(e, "delivered") == 3 })
	want := map[string]struct {
		total string
		items []string // amounts in minor units
	}{
		"cus_usd": {"5000", []string{"1500", "1000", "2500"}},
		"cus_jpy": {"4000", []string{"3000", "1000"}},
		"cus_kwd": {"2234", []string{"1234", "1000"}},
	}
	got := map[string]fakestripe.Invoice{}
	for _, inv := range fake.Invoices() {
		if _, dup := got[inv.Customer]; dup {
			t.Errorf("a second Stripe invoice for %s: %+v", inv.Customer, inv)
		}
		got[inv.Customer] = inv
	}
	for c, w := range want {
		inv, ok := got[c]
		if !ok {
			t.Errorf("no Stripe invoice for %s", c)
			continue
		}
		var amounts []string
		for _, it := range inv.Items {
			amounts = append(amounts, it.Amount.String())
		}
		if fmt.Sprint(amounts) != fmt.Sprint(w.items) || inv.AmountDue().String() != w.total || inv.Status != "open" {
			t.Errorf("%s: items %v due %s (%s), want %v due %s, finalized", c, amounts, inv.AmountDue(), inv.Status, w.items, w.total)
		}
		if inv.Metadata[stripe.MetaInvoice] != fmt.Sprint(invs[c].ID) {
			t.Errorf("%s: metadata %v, want the hookledger invoice %d", c, inv.Metadata, invs[c].ID)
		}
		var due string
		if err := e.DB.Read.QueryRow(`SELECT r.amount_due FROM stripe_invoice_results r JOIN stripe_invoice_pushes p ON p.id = r.push_id
			WHERE p.customer_id = ? ORDER BY r.id DESC LIMIT 1`, c).Scan(&due); err != nil {
			t.Errorf("%s: Stripe's answer not kept: %v", c, err)
		}
		if due != w.total {
			t.Errorf("%s: Stripe's amount due kept as %q, want %s", c, due, w.total)
		}
	}
	if _, sent := got["cus_free"]; sent {
		t.Error("the free plan's invoice of 0.00 was sent")
	}
	p, _ := ledger.MonthPeriod("2026-11", time.UTC)
	lines, err := stripe.InvoiceStatus(context.Background(), e.DB, p, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || stripe.InvoicesDiffer(lines) {
		t.Errorf("invoice status %+v, want 3 agreeing", lines)
	}
	// The failures did happen: more calls than the 7 each invoice takes
	// when none fails, lost replies and outages among them.
	fake.Mu.Lock()
	calls, lost, down := fake.Calls, fake.Refused[500], fake.Refused[503]
	fake.Mu.Unlock()
	if calls <= 3*7 || lost == 0 || down == 0 {
		t.Errorf("%d calls, %d lost replies, %d outages: want more than 21 calls and both kinds of failure", calls, lost, down)
	}
}

// A relay down for more than Stripe's 24 hours of idempotency keys, after
// Stripe created the invoice but before hookledger heard: it finds that
// invoice by its metadata and completes it, never creating a second.
func TestStripeInvoiceFoundAfterADayDown(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	var down bool
	fake.Fail = func(n int) fakestripe.Failure {
		switch {
		case n == 2: // the create: done, its answer lost
			down = true
			return fakestripe.LostReply
		case down:
			return fakestripe.Down
		}
		return fakestripe.None
	}
	e, clock := invoiceEnv(t, fake, time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	startInvoiceRelay(t, e, clock)
	closeNovember(t, e, map[string]string{"cus_usd": "usd"})
	await.Eventually(t, 10*time.Second, "Stripe created the invoice and went down", func() bool {
		fake.Mu.Lock()
		defer fake.Mu.Unlock()
		return fake.Calls >= 3
	})
	fake.Mu.Lock()
	down = false
	fake.Mu.Unlock()
	clock.Jump(25 * time.Hour) // Stripe has forgotten the create's idempotency key
	await.Eventually(t, 10*time.Second, "the invoice delivered", func() bool { return invoiceCount(e, "delivered") == 1 })
	invs := fake.Invoices()
	if len(invs) != 1 || len(invs[0].Items) != 3 || invs[0].AmountDue().Cmp(big.NewInt(5000)) != 0 || invs[0].Status != "open" {
		t.Errorf("Stripe holds %+v, want one invoice of 3 items due 5000, finalized", invs)
	}
}

// Stripe's events about an invoice hookledger sent link to the hookledger
// invoice by the metadata it carries, whatever periods its lines show (an
// invoice item's period is the usage's, and no meter was pushed).
func TestStripeInvoicePaidLinksByMetadata(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, clock := invoiceEnv(t, fake, time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), withStripeProvider)
	startInvoiceRelay(t, e, clock)
	invs := closeNovember(t, e, map[string]string{"cus_usd": "usd", "cus_jpy": "jpy"})
	await.Eventually(t, 10*time.Second, "the invoices delivered", func() bool { return invoiceCount(e, "delivered") == 2 })
	if s, _ := stateOf(t, e, invs["cus_usd"].ID); s != stripe.InvoicePushed {
		t.Errorf("sent, not yet paid: %q, want pushed", s)
	}
	var sent fakestripe.Invoice
	for _, inv := range fake.Invoices() {
		if inv.Customer == "cus_usd" {
			sent = inv
		}
	}
	// invoice.paid as Stripe sends it: the invoice with its metadata, and
	// a period that bills no close-mode push.
	paid := fmt.Appendf(nil, `{"id":"evt_paid_usd","object":"event","api_version":"2025-03-31.basil","created":%d,"type":"invoice.paid",`+
		`"data":{"object":{"id":%q,"object":"invoice","customer":"cus_usd","status":"paid","period_start":%d,"period_end":%d,`+
		`"metadata":{"hookledger_invoice":"%d","hookledger_push":%q},"lines":{"object":"list","has_more":false,"data":[]}}}}`,
		time.Now().Unix(), sent.ID, time.Now().Unix(), time.Now().Unix(), invs["cus_usd"].ID, sent.Metadata[stripe.MetaPush])
	postStripeAt(t, e, paid)
	if s, n := stateOf(t, e, invs["cus_usd"].ID); s != stripe.InvoicePaid || n != 1 {
		t.Errorf("after invoice.paid: %s with %d events, want paid with 1", s, n)
	}
	if s, n := stateOf(t, e, invs["cus_jpy"].ID); s != stripe.InvoicePushed || n != 0 {
		t.Errorf("the other invoice: %s with %d events, want pushed with none", s, n)
	}
	// Metadata naming no invoice of this ledger links nothing: kept unlinked.
	other := []byte(`{"id":"evt_paid_x","object":"event","created":1,"type":"invoice.paid","data":{"object":{"id":"in_x","customer":"cus_usd",` +
		`"metadata":{"hookledger_invoice":"999"}}}}`)
	postStripeAt(t, e, other)
	if n := e.Int(`SELECT COUNT(*) FROM stripe_invoice_states WHERE stripe_event = 'evt_paid_x' AND invoice_id IS NULL`); n != 1 {
		t.Errorf("%d unlinked states of an invoice that names no invoice of ours, want 1", n)
	}
}

// postStripeAt posts a Stripe event signed at the env's clock.
func postStripeAt(t *testing.T, e *testenv.Env, body []byte) {
	t.Helper()
	if r := e.PostReply("stripe", e.Sign("stripe", "", "", body, e.Clock.Now()), body); r.Code != 200 {
		t.Fatalf("post: %d %+v", r.Code, r.Body)
	}
}
