package console_test

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// spendEnv is a console whose default plan "team" charges a 29.00 USD fee
// and 0.01 per api_request above 1,000, with spend capped at 100.00
// (hard) and alerting at 50.00, wired as serve wires it.
func spendEnv(t *testing.T) *env {
	t.Helper()
	fee, limit, upTo := pricing.MustDecimal("29.00"), pricing.MustDecimal("100.00"), pricing.MustDecimal("1000")
	plans := []pricing.Plan{{Name: "team", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: &fee,
		Prices: []pricing.Price{{Meter: "api_requests", Model: pricing.Graduated, Tiers: []pricing.Tier{
			{UpTo: &upTo, Unit: pricing.MustDecimal("0")}, {Unit: pricing.MustDecimal("0.01")}}}},
		Spend: &pricing.Spend{Limit: &limit, Alerts: []string{"50.00"}}}}
	catalog := testenv.Catalog(t, plans)
	e := newEnv(t, false, func(o *testenv.Options) {
		o.Edits = append(o.Edits, func(c *config.Config) {
			c.Plans, c.Catalog, c.Customers.DefaultPlan = plans, catalog, "team"
			c.Meters = []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum}}
		})
		o.Writer = func(w *custody.Writer) { w.Limits = entitle.NewPolicy(catalog, "team") }
	})
	if built, err := e.Writer.BuildUsageState(t.Context(), "UTC"); err != nil || !built {
		t.Fatalf("build usage state: %v %v", built, err)
	}
	e.Console.DefaultPlan = "team"
	e.Console.Entitlements = e.Server.Entitlements.(*entitle.Checker)
	return e
}

// The customer page shows the month's spend line by line, computed from
// the usage state as GET /v1/spend computes it, its limit and whether
// more is allowed, and the spend thresholds that fired with the event of
// the row that crossed each.
func TestCustomerSpend(t *testing.T) {
	e := spendEnv(t)
	e.send(t, "evt_1", "cus_a", "3000")   // 20.00 + 29.00
	e.send(t, "evt_2", "cus_a", "2100.5") // 41.005 rounds to 41.00: 70.00, past 50.00
	e.send(t, "evt_3", "cus_b", "10")
	e.signIn(t)

	doc := e.page(t, "/ui/customer?id=cus_a")
	rows := tableRows(t, doc, "spend")
	want := []string{"fee||29.00", "api_requests|5100.5|41.00", "spent||70.00 USD"}
	if len(rows) != len(want) {
		t.Fatalf("spend rows %q", rows)
	}
	for i, w := range want {
		if got := strings.Join(rows[i], "|"); got != w {
			t.Errorf("spend row %d: %q, want %q", i, got, w)
		}
	}
	if got := text(byID(doc, "spend-limit")); got != "100.00 USD (hard)" {
		t.Errorf("spend limit %q", got)
	}
	if got := text(byID(doc, "spend-allowed")); got != "yes" {
		t.Errorf("spend allowed %q", got)
	}
	// The same figure as the spend check the API answers.
	sp, err := e.Server.Entitlements.(*entitle.Checker).Spend(t.Context(), "cus_a")
	if err != nil || sp.Spent.String() != "70.00" {
		t.Errorf("spend %+v %v", sp, err)
	}
	cs := tableRows(t, doc, "spend-crossings")
	if len(cs) != 1 || cs[0][1] != "50.00" || cs[0][2] != "50.00 USD" || cs[0][3] != "70.00" || !strings.HasSuffix(cs[0][4], "/evt_2") {
		t.Errorf("spend crossings %q", cs)
	}

	doc = e.page(t, "/ui/customer?id=cus_b")
	if got := tableRows(t, doc, "spend"); len(got) != 3 || strings.Join(got[2], "|") != "spent||29.00 USD" {
		t.Errorf("cus_b spend %q", got)
	}
	if got := tableRows(t, doc, "spend-crossings"); len(got) != 1 || got[0][0] != "no spend threshold has fired" {
		t.Errorf("cus_b spend crossings %q", got)
	}
}
