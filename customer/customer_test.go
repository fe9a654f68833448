package customer_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/pricing"
)

func testCatalog(t *testing.T) *pricing.Catalog {
	t.Helper()
	plans := []pricing.Plan{
		{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01"},
		{Name: "pro", Currency: "USD", EffectiveFrom: "2026-07-01"},
		{Name: "team", Currency: "EUR", EffectiveFrom: "2026-03-01"},
	}
	for i := range plans {
		if err := plans[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := pricing.NewCatalog(plans)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRegistryHistory(t *testing.T) {
	e := testenv.NewLedger(t, testenv.Options{})
	cat := testCatalog(t)
	at := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	err := customer.AddCustomer(e.Ctx, e.DB, customer.Customer{ID: "cus_1", Name: "Acme", Email: "billing@acme.test",
		ExternalIDs: map[string]string{"stripe": "cus_Q3xz"}, RecordedAt: at},
		&customer.PlanAssignment{Plan: "pro", EffectiveFrom: "2026-01-01", RecordedAt: at}, cat)
	if err != nil {
		t.Fatal(err)
	}
	if err := customer.AddCustomer(e.Ctx, e.DB, customer.Customer{ID: "cus_1", RecordedAt: at}, nil, cat); !errors.Is(err, customer.ErrCustomerExists) {
		t.Errorf("adding cus_1 twice: %v", err)
	}
	email := "ap@acme.test"
	if _, err := customer.UpdateCustomer(e.Ctx, e.DB, "cus_1", customer.CustomerChange{Email: &email,
		ExternalIDs: map[string]string{"stripe": "", "crm": "42"}, At: at.Add(time.Hour), Note: "new AP contact"}); err != nil {
		t.Fatal(err)
	}
	if _, err := customer.UpdateCustomer(e.Ctx, e.DB, "cus_1", customer.CustomerChange{Email: &email, At: at}); !errors.Is(err, customer.ErrNothingToChange) {
		t.Errorf("an update that changes nothing: %v", err)
	}
	if _, err := customer.UpdateCustomer(e.Ctx, e.DB, "cus_9", customer.CustomerChange{Email: &email, At: at}); !errors.Is(err, customer.ErrNoCustomer) {
		t.Errorf("updating an unregistered customer: %v", err)
	}
	hist, err := customer.CustomerHistory(e.Ctx, e.DB, "cus_1")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].Email != "billing@acme.test" || hist[0].ExternalIDs["stripe"] != "cus_Q3xz" ||
		hist[1].Email != email || hist[1].ExternalIDs["crm"] != "42" || len(hist[1].ExternalIDs) != 1 || hist[1].Note != "new AP contact" {
		t.Errorf("history: %+v", hist)
	}
	now, err := customer.Customers(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if len(now) != 1 || now[0].Email != email {
		t.Errorf("customers now: %+v", now)
	}
	if n := e.Count("customers"); n != 2 {
		t.Errorf("%d registry rows, want 2 (one per change)", n)
	}
}

func TestPlanAssignments(t *testing.T) {
	e := testenv.NewLedger(t, testenv.Options{})
	cat := testCatalog(t)
	assign := func(cust, plan string, from pricing.Date) error {
		_, err := customer.AssignPlan(e.Ctx, e.DB, customer.PlanAssignment{Customer: cust, Plan: plan, EffectiveFrom: from, RecordedAt: time.Now()}, cat)
		return err
	}
	for _, a := range []struct {
		cust, plan string
		from       pricing.Date
	}{{"cus_1", "pro", "2026-01-01"}, {"cus_1", "team", "2026-04-01"}, {"cus_1", "pro", "2026-04-01"}, {"cus_2", "team", "2026-03-01"}} {
		if err := assign(a.cust, a.plan, a.from); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name, cust, plan string
		from             pricing.Date
		want             string
	}{
		{"undeclared plan", "cus_1", "gold", "2026-01-01", `no such plan "gold" in the configuration (plans: [pro team])`},
		{"before the plan's first version", "cus_1", "team", "2026-02-01", `plan "team" has no version in force on 2026-02-01`},
		{"not a date", "cus_1", "pro", "2026-02-30", `"2026-02-30" is not a date`},
		{"not a customer id", "cus\x00", "pro", "2026-02-01", "not a customer id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := assign(tc.cust, tc.plan, tc.from); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("assign: %v, want %q", err, tc.want)
			}
		})
	}
	as, err := customer.PlanAssignments(e.Ctx, e.DB, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(as) != 4 {
		t.Fatalf("%d assignments stored, want 4 (refused ones store nothing)", len(as))
	}
	plans := customer.NewPlans("free", as)
	for _, tc := range []struct {
		cust string
		day  pricing.Date
		want string
	}{
		{"cus_1", "2025-12-31", "free"}, // before any assignment: the default
		{"cus_1", "2026-01-01", "pro"},
		{"cus_1", "2026-03-31", "pro"},
		{"cus_1", "2026-04-01", "pro"}, // two for one date: the later recorded wins
		{"cus_2", "2026-02-28", "free"},
		{"cus_2", "2026-03-01", "team"},
		{"cus_3", "2026-06-01", "free"},
	} {
		if got, _ := plans.On(tc.cust, tc.day); got != tc.want {
			t.Errorf("%s on %s: %q, want %q", tc.cust, tc.day, got, tc.want)
		}
	}
}

// The registry is append-only: the database itself refuses an edit or a
// removal, so history cannot be rewritten around the CLI.
func TestRegistryAppendOnly(t *testing.T) {
	e := testenv.NewLedger(t, testenv.Options{})
	at := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	if err := customer.AddCustomer(e.Ctx, e.DB, customer.Customer{ID: "cus_1", RecordedAt: at},
		&customer.PlanAssignment{Plan: "pro", EffectiveFrom: "2026-01-01", RecordedAt: at}, testCatalog(t)); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE customers SET email = 'x@y.test'`,
		`DELETE FROM customers`,
		`UPDATE plan_assignments SET plan = 'team'`,
		`DELETE FROM plan_assignments`,
	} {
		if _, err := e.DB.Write.Exec(stmt); err == nil || !strings.Contains(err.Error(), "never") {
			t.Errorf("%s: %v, want it refused", stmt, err)
		}
	}
	if e.Count("customers") != 1 || e.Count("plan_assignments") != 1 {
		t.Errorf("rows changed: %d customers, %d assignments", e.Count("customers"), e.Count("plan_assignments"))
	}
}
