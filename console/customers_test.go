package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/pricing"
)

// twoPlans is a catalog of plans pro and team, both from 2026-01-01.
func twoPlans(t testing.TB) *pricing.Catalog {
	t.Helper()
	plans := []pricing.Plan{
		{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("29.00")},
		{Name: "team", Currency: "EUR", EffectiveFrom: "2026-01-01", Fee: dec("99.00")},
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
	return cat
}

// The customers pages show the registry as `hookledger customers` keeps it,
// the plan assignments, and the plan each customer is on today.
func TestCustomerPages(t *testing.T) {
	e := newEnv(t, false)
	e.Console.DefaultPlan = "pro"
	ctx, cat, now := context.Background(), twoPlans(t), e.Now()
	// cus_a: registered on team from June, moving to pro in 2027 (the
	// clock is in November 2026), then its email changed.
	if err := customer.AddCustomer(ctx, e.DB, customer.Customer{ID: "cus_a", Name: "Acme", Email: "billing@acme.test",
		ExternalIDs: map[string]string{"stripe": "cus_S1"}, RecordedAt: now}, &customer.PlanAssignment{Plan: "team", EffectiveFrom: "2026-06-01", RecordedAt: now}, cat); err != nil {
		t.Fatal(err)
	}
	if _, err := customer.AssignPlan(ctx, e.DB, customer.PlanAssignment{Customer: "cus_a", Plan: "pro", EffectiveFrom: "2027-01-01", RecordedAt: now}, cat); err != nil {
		t.Fatal(err)
	}
	email := "ap@acme.test"
	if _, err := customer.UpdateCustomer(ctx, e.DB, "cus_a", customer.CustomerChange{Email: &email, At: now.Add(time.Minute), Note: "new address"}); err != nil {
		t.Fatal(err)
	}
	// cus_b: registered, no assignment: the default plan. cus_c: assigned, never registered.
	if err := customer.AddCustomer(ctx, e.DB, customer.Customer{ID: "cus_b", Name: "Bee", RecordedAt: now}, nil, cat); err != nil {
		t.Fatal(err)
	}
	if _, err := customer.AssignPlan(ctx, e.DB, customer.PlanAssignment{Customer: "cus_c", Plan: "team", EffectiveFrom: "2026-11-01", RecordedAt: now}, cat); err != nil {
		t.Fatal(err)
	}
	e.signIn(t)
	var got []string
	for _, r := range tableRows(t, e.page(t, "/ui/customers"), "customers") {
		got = append(got, strings.Join(r[:6], "|"))
	}
	want := []string{"cus_a|Acme|ap@acme.test|stripe=cus_S1|team|assigned from 2026-06-01", "cus_b|Bee|||pro|default plan",
		"cus_c||||team|assigned from 2026-11-01"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("customers:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	doc := e.page(t, "/ui/customer?id=cus_a")
	if got := textOf(doc, "plan-today"); got != "team (assigned from 2026-06-01)" {
		t.Errorf("plan today %q", got)
	}
	hist := tableRows(t, doc, "history")
	if len(hist) != 2 || hist[0][2] != "billing@acme.test" || hist[1][2] != "ap@acme.test" || hist[1][4] != "new address" {
		t.Errorf("history %q", hist)
	}
	as := tableRows(t, doc, "assignments")
	if len(as) != 2 || as[0][0] != "2026-06-01" || as[0][1] != "team" || as[1][0] != "2027-01-01" || as[1][1] != "pro" {
		t.Errorf("assignments %q", as)
	}
	if got := textOf(e.page(t, "/ui/customer?id=cus_unknown"), "plan-today"); got != "pro (default plan)" {
		t.Errorf("an unregistered customer's plan today %q", got)
	}
}
