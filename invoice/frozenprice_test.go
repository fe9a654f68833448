package invoice_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// Prices are history (DESIGN.md, invariants 8 and 9): a plan version that
// priced a closed invoice is frozen, an assignment does not reach into a
// closed period, late usage of a closed period is priced by what priced it,
// and the amounts billed for a period add up to its total priced once.

func newBackendEnv(t *testing.T, backend string) *env {
	t.Helper()
	e := &env{testenv.NewLedger(t, testenv.Options{Backend: backend})}
	t.Cleanup(e.Close)
	return e
}

// plansOf validates plans into a pricing with default plan def.
func plansOf(t *testing.T, def string, as []customer.PlanAssignment, plans ...pricing.Plan) *invoice.Pricing {
	t.Helper()
	return &invoice.Pricing{Catalog: testenv.Catalog(t, plans), Plans: customer.NewPlans(def, as)}
}

// proPlan is pro from 2026-01-01: api free to 1,000, 0.001 to 100,000,
// then third a unit.
func proPlan(third string) pricing.Plan {
	return pricing.Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{
		{Meter: "api", Model: pricing.Graduated, Tiers: []pricing.Tier{
			{UpTo: dec("1000"), Unit: pricing.MustDecimal("0")}, {UpTo: dec("100000"), Unit: pricing.MustDecimal("0.001")}, {Unit: pricing.MustDecimal(third)}}}}}
}

func unitPlan(name, unit string) pricing.Plan {
	return pricing.Plan{Name: name, Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api", Model: pricing.Unit, Unit: dec(unit)}}}
}

// The first hole: October closed with pro@2026-01-01 (third tier
// 0.0005), then that tier edited in place to 0.0009. Every command that
// prices loads its pricing through LoadPricing, which refuses the edit
// naming the plan, the date and the invoice; a close handed the edited
// catalog refuses too. With the version put back and the change added as a
// new version, late October usage is billed at the frozen 0.0005:
// 10,000 × 0.0005 = 5.00 (not 9.00).
func TestEditedPlanVersionIsRefused(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newBackendEnv(t, backend)
		e.SetClock(ts("2026-10-20T00:00:00Z"))
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("150000"), At: ts("2026-10-10T00:00:00Z")})
		oct := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters,
			Now: at("2026-11-02T00:00:00Z"), Pricing: plansOf(t, "pro", nil, proPlan("0.0005"))})
		// 99,000 × 0.001 + 50,000 × 0.0005 = 124.00
		if got := amounts(oct.Invoices[0]); got != "api 2026-10=124.00 | fee 0.00 true-up 0.00 total 124.00 USD" {
			t.Fatalf("October: %s", got)
		}
		e.SetClock(ts("2026-11-05T00:00:00Z"))
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("10000"), At: ts("2026-10-30T00:00:00Z")})

		edited := plansOf(t, "pro", nil, proPlan("0.0009"))
		_, _, err := invoice.LoadPricing(e.Ctx, e.DB, edited.Catalog, "pro")
		want := `plan "pro" version 2026-01-01 (effective_from 2026-01-01) in the configuration differs from the version that priced invoice 1`
		if !errors.Is(err, invoice.ErrFrozenVersion) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "a later effective_from") {
			t.Fatalf("loading an edited version: %v\nwant ErrFrozenVersion naming it: %s", err, want)
		}
		_, err = invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters,
			Now: at("2026-12-02T00:00:00Z"), Pricing: edited})
		if !errors.Is(err, invoice.ErrFrozenVersion) {
			t.Fatalf("a close with the edited version: %v, want ErrFrozenVersion", err)
		}

		// The change as a new version from November: accepted.
		next := proPlan("0.0009")
		next.EffectiveFrom = "2026-11-01"
		pr, _, err := invoice.LoadPricing(e.Ctx, e.DB, testenv.Catalog(t, []pricing.Plan{proPlan("0.0005"), next}), "pro")
		if err != nil {
			t.Fatal(err)
		}
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("2000"), At: ts("2026-11-10T00:00:00Z")})
		nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters,
			Now: at("2026-12-02T00:00:00Z"), Pricing: pr})
		// November at the new version: 1,000 × 0.001 = 1.00; late October at
		// the frozen one: 10,000 × 0.0005 = 5.00.
		if got := amounts(nov.Invoices[0]); got != "api 2026-11=1.00 api 2026-10*=5.00 | fee 0.00 true-up 0.00 total 6.00 USD" {
			t.Errorf("November: %s", got)
		}
		if v := lineMap(nov.Invoices[0])["api 2026-10*"].Money.PlanVersion; v != "pro@2026-01-01" {
			t.Errorf("late October priced with %s, want pro@2026-01-01", v)
		}
		verifyClean(t, e)
	})
}

// Two closed invoices whose snapshots hold one label with two prices (what
// an edit in place left behind before it was refused) fail verify.
func TestVerifyFindsAVersionEditedAfterItPriced(t *testing.T) {
	e := newEnv(t)
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("150000"), At: ts("2026-10-10T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters,
		Now: at("2026-11-02T00:00:00Z"), Pricing: plansOf(t, "pro", nil, proPlan("0.0005"))})
	e.SetClock(ts("2026-11-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("150000"), At: ts("2026-11-10T00:00:00Z")})
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters,
		Now: at("2026-12-02T00:00:00Z"), Pricing: plansOf(t, "pro", nil, proPlan("0.0009"))})
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if p := problems(rep); !strings.Contains(p, "invoices row 2: money: its price snapshot holds plan version pro@2026-01-01 with other prices than invoice 1's") {
		t.Errorf("verify after a version was edited between two closes:\n%s", p)
	}

	// Such a history still closes: late November usage is priced as
	// November was (10,000 × 0.0009 = 9.00), beside December's own version.
	next := proPlan("0.0001")
	next.EffectiveFrom = "2026-12-01"
	e.SetClock(ts("2026-12-05T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("10000"), At: ts("2026-11-30T00:00:00Z")})
	dec := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-12", "UTC"), All: true, Meters: invMeters,
		Now: at("2027-01-02T00:00:00Z"), Pricing: plansOf(t, "pro", nil, proPlan("0.0005"), next)})
	if got := amounts(dec.Invoices[0]); got != "api 2026-11*=9.00 | fee 0.00 true-up 0.00 total 9.00 USD" {
		t.Errorf("December: %s", got)
	}
}

// The second hole: October closed at 1.00 a unit (plan usd, the
// default), 10 units: 10.00. Assigning c1 to usd2 (3.00 a unit) from
// 2026-10-01, or from inside October, is refused naming the close; from
// November it is accepted. 5 late October units are then billed at usd's
// 1.00: October costs 15.00 as usd gives it (usd2 would give 45.00; the
// hole billed 25.00, which neither plan gives).
func TestAssignmentIntoClosedPeriodIsRefused(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newBackendEnv(t, backend)
		cat := []pricing.Plan{unitPlan("usd", "1.00"), unitPlan("usd2", "3.00")}
		catalog := testenv.Catalog(t, cat)
		e.SetClock(ts("2026-10-20T00:00:00Z"))
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("10"), At: ts("2026-10-10T00:00:00Z")})
		pr, _, err := invoice.LoadPricing(e.Ctx, e.DB, catalog, "usd")
		if err != nil {
			t.Fatal(err)
		}
		oct := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters,
			Now: at("2026-11-02T00:00:00Z"), Pricing: pr})
		if got := amounts(oct.Invoices[0]); got != "api 2026-10=10.00 | fee 0.00 true-up 0.00 total 10.00 USD" {
			t.Fatalf("October: %s", got)
		}
		for _, from := range []pricing.Date{"2026-10-01", "2026-10-15", "2026-09-01"} {
			_, err := customer.AssignPlan(e.Ctx, e.DB, customer.PlanAssignment{Customer: "c1", Plan: "usd2", EffectiveFrom: from, RecordedAt: e.Clock.Now()}, catalog)
			var input *customer.InputError
			want := `plan "usd2" from ` + string(from) + ` would change the plan of 2026-10 (2026-10-01 to 2026-10-31, UTC), closed for all customers by close 1 on 2026-11-02`
			if !errors.Is(err, customer.ErrAssignmentInClosedPeriod) || !errors.As(err, &input) || !strings.Contains(err.Error(), want) ||
				!strings.Contains(err.Error(), "assign from 2026-11-01") {
				t.Errorf("assign from %s: %v\nwant a refusal naming the close: %s", from, err, want)
			}
		}
		// A new customer on a plan from inside the period closed for all: the same.
		err = customer.AddCustomer(e.Ctx, e.DB, customer.Customer{ID: "c9", RecordedAt: e.Clock.Now()},
			&customer.PlanAssignment{Plan: "usd2", EffectiveFrom: "2026-10-01", RecordedAt: e.Clock.Now()}, catalog)
		if !errors.Is(err, customer.ErrAssignmentInClosedPeriod) {
			t.Errorf("add a customer on a plan from a closed period: %v", err)
		}
		if n := e.Count("plan_assignments"); n != 0 {
			t.Fatalf("refused assignments stored %d rows", n)
		}
		if _, err := customer.AssignPlan(e.Ctx, e.DB, customer.PlanAssignment{Customer: "c1", Plan: "usd2", EffectiveFrom: "2026-11-01", RecordedAt: e.Clock.Now()}, catalog); err != nil {
			t.Fatalf("assign from the first open day: %v", err)
		}

		e.SetClock(ts("2026-11-05T00:00:00Z"))
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("5"), At: ts("2026-10-30T00:00:00Z")},
			row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-11-10T00:00:00Z")})
		if pr, _, err = invoice.LoadPricing(e.Ctx, e.DB, catalog, "usd"); err != nil {
			t.Fatal(err)
		}
		nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters,
			Now: at("2026-12-02T00:00:00Z"), Pricing: pr})
		// November at usd2: 3.00; late October at usd: 5 × 1.00 = 5.00.
		if got := amounts(nov.Invoices[0]); got != "api 2026-11=3.00 api 2026-10*=5.00 | fee 0.00 true-up 0.00 total 8.00 USD" {
			t.Errorf("November: %s", got)
		}
		if got := octoberBilled(t, e, "c1"); got != "15.00" {
			t.Errorf("October billed %s in all, want 15.00 (15 units at usd's 1.00)", got)
		}
		verifyClean(t, e)
	})
}

// Late usage of a closed period is priced by the version that priced the
// period's invoice, whatever the configuration says today: here the
// assignment already in the database before assignments into closed
// periods were refused, and the default plan changed after the close.
func TestLateUsageIsPricedByThePeriodsVersion(t *testing.T) {
	for name, late := range map[string]*invoice.Pricing{
		"assignment stored before the refusal": plansOf(t, "usd", []customer.PlanAssignment{{Customer: "c1", Plan: "usd2", EffectiveFrom: "2026-10-01"}},
			unitPlan("usd", "1.00"), unitPlan("usd2", "3.00")),
		"default plan changed": plansOf(t, "usd2", nil, unitPlan("usd", "1.00"), unitPlan("usd2", "3.00")),
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.SetClock(ts("2026-10-20T00:00:00Z"))
			e.Write(row{Customer: "c1", Meter: "api", Qty: q("10"), At: ts("2026-10-10T00:00:00Z")})
			e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters,
				Now: at("2026-11-02T00:00:00Z"), Pricing: plansOf(t, "usd", nil, unitPlan("usd", "1.00"), unitPlan("usd2", "3.00"))})
			e.SetClock(ts("2026-11-05T00:00:00Z"))
			e.Write(row{Customer: "c1", Meter: "api", Qty: q("5"), At: ts("2026-10-30T00:00:00Z")})
			nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters,
				Now: at("2026-12-02T00:00:00Z"), Pricing: late})
			l := lineMap(nov.Invoices[0])["api 2026-10*"]
			if l.Money.Amount != "5.00" || l.Money.PlanVersion != "usd@2026-01-01" {
				t.Errorf("late October: %s with %s, want 5.00 with usd@2026-01-01 (15.00 with usd2 would make October 25.00)", l.Money.Amount, l.Money.PlanVersion)
			}
			if got := octoberBilled(t, e, "c1"); got != "15.00" {
				t.Errorf("October billed %s in all, want 15.00", got)
			}
			verifyClean(t, e)

			// A correction's dry run prices a change to October the same way:
			// voiding the late 5 units takes 5 × 1.00 off, not 5 × 3.00.
			recs, err := e.DB.EventLedgerRows(e.Ctx, "test", "evt_000002")
			if err != nil {
				t.Fatal(err)
			}
			changes := ledger.Changes(ledger.StoredRows(recs), nil, invMeters, time.UTC)
			if err := invoice.PriceChanges(e.Ctx, e.DB, late, invMeters, changes); err != nil {
				t.Fatal(err)
			}
			if len(changes) != 1 || pricing.MustDecimal(changes[0].Money).Cmp(pricing.MustDecimal("-5")) != 0 {
				t.Errorf("voiding the late units would change October by %+v, want -5.00", changes)
			}
		})
	}
}

// The rounding drift: 0.005 USD a unit. October's 1 unit is billed
// 0.00 (0.005, half-even); a late unit then carries it: 2 units priced once
// are 0.01, less 0.00 billed: 0.01 (rounded on its own, 0.005 → 0.00 again,
// and October would add up to 0.00). A third late unit: 0.015 → 0.02, less
// 0.01: 0.01. verify checks that each late line carries what the period's
// earlier lines billed and that they add up to the total priced once.
func TestLateLinesCarryThePeriodsRounding(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newBackendEnv(t, backend)
		pr := plansOf(t, "half", nil, unitPlan("half", "0.005"))
		e.SetClock(ts("2026-10-20T00:00:00Z"))
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-10-10T00:00:00Z")})
		oct := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z"), Pricing: pr})
		if a := oct.Invoices[0].Lines[0].Money.Amount; a != "0.00" {
			t.Fatalf("October's unit: %s, want 0.00", a)
		}
		for i, c := range []struct{ period, close, want string }{
			{"2026-11", "2026-12-02T00:00:00Z", "0.01"},
			{"2026-12", "2027-01-02T00:00:00Z", "0.01"},
		} {
			e.SetClock(ts(c.close).Add(-20 * 24 * time.Hour))
			e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-10-30T00:00:00Z")})
			res := e.closePeriod(t, invoice.CloseRequest{Period: month(t, c.period, "UTC"), All: true, Meters: invMeters, Now: at(c.close), Pricing: pr})
			l := lineMap(res.Invoices[0])["api 2026-10*"]
			if l.Money.Amount != c.want {
				t.Errorf("late unit %d (%s): %s, want %s", i+1, c.period, l.Money.Amount, c.want)
			}
		}
		if got := octoberBilled(t, e, "c1"); got != "0.02" {
			t.Errorf("October billed %s in all, want 0.02 (3 units priced once: 0.015 → 0.02)", got)
		}
		verifyClean(t, e)

		// A late line that no longer carries what was billed before it.
		e.allowInvoiceEdits()
		e.Exec(`UPDATE invoice_lines SET amount = '0.00' WHERE invoice_id = 2 AND late = ?`, true)
		rep, err := invoice.Verify(e.Ctx, e.DB)
		if err != nil {
			t.Fatal(err)
		}
		p := problems(rep)
		if !strings.Contains(p, "invoices row 3: money: line 1 (api 2026-10) carries 0.01 billed before it, but the period's earlier lines billed 0.00") ||
			!strings.Contains(p, "invoices row 3: money: the lines billing api 2026-10 add up to 0.01, but its total priced once and rounded is 0.02") {
			t.Errorf("verify after a late amount was edited:\n%s", p)
		}
	})
}

// octoberBilled is the sum of every amount billed for customer's October.
func octoberBilled(t *testing.T, e *env, customer string) string {
	t.Helper()
	invs, err := invoice.ListInvoices(e.Ctx, e.DB, invoice.InvoiceFilter{Customer: customer})
	if err != nil {
		t.Fatal(err)
	}
	var sum pricing.Decimal
	for _, inv := range invs {
		for _, l := range inv.Lines {
			if l.Period != "2026-10" || l.Money.Amount == "" {
				continue
			}
			if sum, err = pricing.Add(sum, pricing.MustDecimal(l.Money.Amount)); err != nil {
				t.Fatal(err)
			}
		}
	}
	return sum.String()
}

func verifyClean(t *testing.T, e *env) {
	t.Helper()
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Errorf("verify: %s", problems(rep))
	}
}
