package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"golang.org/x/net/html"
)

// limitedEnv is a console whose default plan "free" limits api_requests to
// 10 a month (hard), alerting at 50% and 100%, and whose api_requests are
// pushed to Stripe (stream mode; no relay runs, so every push stays
// pending), wired as serve wires them.
func limitedEnv(t *testing.T) *env {
	t.Helper()
	plans := []pricing.Plan{{Name: "free", Currency: "USD", EffectiveFrom: "2026-01-01",
		Limits: []pricing.Limit{{Meter: "api_requests", Limit: pricing.MustDecimal("10"), Alerts: []string{"50%", "100%"}}}}}
	catalog := testenv.Catalog(t, plans)
	e := newEnv(t, false, func(o *testenv.Options) {
		o.Edits = append(o.Edits, func(c *config.Config) {
			c.Plans, c.Catalog, c.Customers.DefaultPlan = plans, catalog, "free"
			c.Meters = []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum,
				Stripe: &ledger.StripeMeter{EventName: "api_requests", Mode: ledger.StripeStream}}}
			c.Stripe = &config.Stripe{APIKey: config.Secret{Value: "sk_test_console"}, APIBase: "http://127.0.0.1:1",
				Customers: config.StripeIdentity, MaxAttempts: 5, Concurrency: 1}
		})
		o.Writer = func(w *custody.Writer) { w.Limits = entitle.NewPolicy(catalog, "free") }
	})
	if built, err := e.Writer.BuildUsageState(t.Context(), "UTC"); err != nil || !built {
		t.Fatalf("build usage state: %v %v", built, err)
	}
	e.Console.DefaultPlan = "free"
	e.Console.Entitlements = e.Server.Entitlements.(*entitle.Checker)
	e.Console.Stripe = true
	return e
}

// The customer page shows, for this month, each meter's used, limit,
// remaining and allowed as GET /v1/entitlements answers them, the
// thresholds that fired with the event whose row crossed each, and the
// customer's Stripe pushes as `stripe status` counts them.
func TestCustomerLimitsCrossingsAndStripe(t *testing.T) {
	e := limitedEnv(t)
	e.send(t, "evt_1", "cus_a", "4")
	e.send(t, "evt_2", "cus_a", "3") // 7: crosses 50%
	e.send(t, "evt_3", "cus_a", "3") // 10: crosses 100%, the hard limit
	e.send(t, "evt_4", "cus_b", "1")
	e.signIn(t)

	doc := e.page(t, "/ui/customer?id=cus_a")
	limits := tableRows(t, doc, "limits")
	if len(limits) != 1 || strings.Join(limits[0], "|") != "api_requests|10|10 (hard)|0|no" {
		t.Errorf("limits %q", limits)
	}
	// The same numbers as the entitlement check the API answers.
	es, err := e.Server.Entitlements.(*entitle.Checker).CheckAll(t.Context(), "cus_a", []string{"api_requests"})
	if err != nil || es[0].Used.String() != "10" || es[0].Allowed {
		t.Errorf("entitlement %+v %v", es, err)
	}
	cs := tableRows(t, doc, "crossings")
	if len(cs) != 2 {
		t.Fatalf("crossings %q", cs)
	}
	// Newest first: 100% by evt_3's row, then 50% by evt_2's.
	for i, want := range []struct{ threshold, used, event string }{{"100%", "10", "evt_3"}, {"50%", "7", "evt_2"}} {
		r := cs[i]
		if r[1] != "api_requests" || r[2] != want.threshold || r[4] != want.used || !strings.HasSuffix(r[5], "/"+want.event) {
			t.Errorf("crossing %d: %q, want %s used %s by %s", i, r, want.threshold, want.used, want.event)
		}
	}
	hrefs := links(doc, func(n *html.Node) bool { return true })
	for _, want := range []string{"/ui/event?id=evt_3&provider=", "/ui/event?id=evt_2&provider=", "/ui/dispute?target=row%3A"} {
		found := false
		for _, h := range hrefs {
			found = found || strings.HasPrefix(h, want)
		}
		if !found {
			t.Errorf("no link %s… in %q", want, hrefs)
		}
	}
	// No relay runs here: the three rows are one open push, pending, and none
	// was sent (PUSHED 0).
	st := tableRows(t, doc, "stripe")
	if len(st) != 1 || strings.Join(st[0][:9], "|") != "api_requests|api_requests|stream|10|0|0|1|0|differs" {
		t.Errorf("stripe %q", st)
	}

	// Another customer: its own numbers, no crossing.
	doc = e.page(t, "/ui/customer?id=cus_b")
	if got := tableRows(t, doc, "limits"); len(got) != 1 || strings.Join(got[0], "|") != "api_requests|1|10 (hard)|9|yes" {
		t.Errorf("cus_b limits %q", got)
	}
	if got := tableRows(t, doc, "crossings"); len(got) != 1 || got[0][0] != "no threshold has fired" {
		t.Errorf("cus_b crossings %q", got)
	}
	if got := tableRows(t, doc, "stripe"); len(got) != 1 || strings.Join(got[0][3:8], "|") != "1|0|0|1|0" {
		t.Errorf("cus_b stripe %q", got)
	}

	// Without entitlements or Stripe wired, the page has neither section.
	e.Console.Entitlements, e.Console.Stripe = nil, false
	doc = e.page(t, "/ui/customer?id=cus_a")
	for _, id := range []string{"limits", "crossings", "stripe"} {
		if byID(doc, id) != nil {
			t.Errorf("#%s shown without entitlements or Stripe", id)
		}
	}
}

// In a browser, the customer page shows the limits, the crossings and the
// Stripe pushes, and a crossing's event link opens the event whose row
// crossed the threshold.
func TestBrowserCustomerLimits(t *testing.T) {
	ctx := newBrowser(t)
	e := limitedEnv(t)
	e.send(t, "evt_1", "cus_a", "4")
	e.send(t, "evt_2", "cus_a", "3")
	e.send(t, "evt_3", "cus_a", "3")
	shots := screenshotDir(t, e)
	base := e.Admin.URL
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	step("sign in", chromedp.Navigate(base+"/ui/customer?id=cus_a"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), Token), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#limits")))
	cells := `Array.from(document.querySelectorAll("#%s tbody tr")[%d].cells).map(c => c.textContent.trim()).join(" | ")`
	if got := eval(fmt.Sprintf(cells, "limits", 0)); got != "api_requests | 10 | 10 (hard) | 0 | no" {
		t.Errorf("the limits read %q", got)
	}
	if got := eval(fmt.Sprintf(cells, "stripe", 0)); !strings.HasPrefix(got, "api_requests | api_requests | stream | 10 | 0 | 0 | 1 | 0 | differs") {
		t.Errorf("the Stripe pushes read %q", got)
	}
	screenshot(t, ctx, shots, "customer-limits")
	// The newest crossing (100%) was crossed by evt_3's row: its link opens that event.
	step("crossing's event", chromedp.Click(chromedp.CSS(`#crossings tbody tr:first-child a[href^="/ui/event?id=evt_3"]`)),
		chromedp.WaitVisible(chromedp.CSS("#attempts")))
	if got := eval(`document.querySelector("h1 .mono").textContent`); got != "evt_3" {
		t.Errorf("the crossing's link opened event %q", got)
	}
}
