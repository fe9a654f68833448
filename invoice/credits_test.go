package invoice_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// catalogOf validates plans and makes them a catalog.
func catalogOf(t *testing.T, plans ...pricing.Plan) *pricing.Catalog {
	t.Helper()
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

// flatPricing is two fee-only USD plans: flat480 (the default) and flat80.
func flatPricing(t *testing.T, as ...customer.PlanAssignment) *invoice.Pricing {
	t.Helper()
	cat := catalogOf(t,
		pricing.Plan{Name: "flat480", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("480.00")},
		pricing.Plan{Name: "flat80", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("80.00")})
	return &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("flat480", as)}
}

func (e *env) grant(r invoice.GrantRequest) *custody.GrantCredit {
	e.T.Helper()
	if r.Reason == "" {
		r.Reason = "prepaid"
	}
	if r.Actor == "" {
		r.Actor = "test"
	}
	op := &custody.GrantCredit{Request: r}
	if err := e.Writer.Submit(e.Ctx, op); err != nil {
		e.T.Fatal(err)
	}
	return op
}

func credits(inv invoice.Invoice) string {
	var parts []string
	for _, c := range inv.Credits {
		parts = append(parts, c.Grant+"="+c.Amount+"("+c.Balance+" left)")
	}
	return strings.Join(parts, " ") + " | total " + inv.Money.Total + " credits " + inv.Money.Credits + " due " + inv.Money.AmountDue
}

// The burn order, worked out by hand: priority first (lower pays first),
// then the earliest expiry, then the oldest; a grant expired by the close
// gives nothing, a grant in another currency never pays.
func TestCreditBurnOrder(t *testing.T) {
	e := newEnv(t)
	pr := flatPricing(t, customer.PlanAssignment{Customer: "c2", Plan: "flat80", EffectiveFrom: "2026-01-01"})
	ms := func(s string) int64 { return ts(s).UnixMilli() }

	e.SetClock(ts("2026-11-01T00:00:00Z"))
	e.grant(invoice.GrantRequest{ID: "c1-a", Customer: "c1", Currency: "USD", Amount: "100.00", Priority: 1, ExpiresAt: ms("2026-11-20T00:00:00Z")})
	e.grant(invoice.GrantRequest{ID: "c1-b", Customer: "c1", Currency: "USD", Amount: "500", Priority: 2})
	e.grant(invoice.GrantRequest{ID: "c1-yen", Customer: "c1", Currency: "JPY", Amount: "100000", Priority: 0})
	// c2: three grants of equal priority; the one that never expires was
	// made first, the one expiring soonest last.
	e.grant(invoice.GrantRequest{ID: "c2-never", Customer: "c2", Currency: "USD", Amount: "50.00", Priority: 5})
	e.grant(invoice.GrantRequest{ID: "c2-march", Customer: "c2", Currency: "USD", Amount: "50.00", Priority: 5, ExpiresAt: ms("2027-03-01T00:00:00Z")})
	e.grant(invoice.GrantRequest{ID: "c2-feb", Customer: "c2", Currency: "USD", Amount: "50.00", Priority: 5, ExpiresAt: ms("2027-02-01T00:00:00Z")})
	// c3: a grant that takes effect after November ends pays nothing of it.
	e.grant(invoice.GrantRequest{ID: "c3-dec", Customer: "c3", Currency: "USD", Amount: "10.00", EffectiveAt: ms("2026-12-01T00:00:00Z")})

	nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters,
		Now: at("2026-12-02T00:00:00Z"), Pricing: pr, Registered: []string{"c1", "c2", "c3"}})
	got := byCustomer(nov.Invoices)
	for cust, want := range map[string]string{
		// c1-a expired on the 20th, before the close: nothing. 480.00 of c1-b's 500.00.
		"c1": "c1-b=480.00(20.00 left) | total 480.00 credits 480.00 due 0.00",
		// 80.00: c2-feb's 50.00 (earliest expiry), then 30.00 of c2-march; c2-never untouched.
		"c2": "c2-feb=50.00(0.00 left) c2-march=30.00(20.00 left) | total 80.00 credits 80.00 due 0.00",
		"c3": " | total 480.00 credits  due ",
	} {
		if s := credits(got[cust]); s != want {
			t.Errorf("%s: %s\nwant %s", cust, s, want)
		}
	}

	// What was frozen reads back the same, and the balances follow.
	inv, err := invoice.GetInvoice(e.Ctx, e.DB, got["c1"].ID)
	if err != nil {
		t.Fatal(err)
	}
	if s := credits(*inv); s != credits(got["c1"]) {
		t.Errorf("stored invoice: %s, closed as %s", s, credits(got["c1"]))
	}
	balances := func(customer string) string {
		gs, err := invoice.Grants(e.Ctx, e.DB, customer, ts("2026-12-02T00:00:00Z").UnixMilli())
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, g := range gs {
			out = append(out, g.ID+" "+g.Balance+" "+g.Status)
		}
		return strings.Join(out, ", ")
	}
	if s, want := balances("c1"), "c1-a 100.00 expired, c1-b 20.00 active, c1-yen 100000 active"; s != want {
		t.Errorf("c1's grants: %s\nwant %s", s, want)
	}

	// The expiry row forfeits c1-a's 100.00, once.
	e.SetClock(ts("2026-12-02T00:00:01Z"))
	for range 2 {
		if err := e.Writer.Submit(e.Ctx, &custody.ExpireCredits{}); err != nil {
			t.Fatal(err)
		}
	}
	es, err := e.DB.CreditEntries(e.Ctx, schema.CreditFilter{GrantID: "c1-a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || es[1].Kind != "expiry" || es[1].Amount != "100.00" || es[1].Balance != "0.00" {
		t.Errorf("c1-a's entries: %+v, want its grant and one expiry of 100.00", es)
	}

	// December: c1 has 20.00 left of c1-b; 480.00 due less 20.00.
	dec := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-12", "UTC"), Customer: "c1", Meters: invMeters,
		Now: at("2027-01-02T00:00:00Z"), Pricing: pr})
	if s, want := credits(dec.Invoices[0]), "c1-b=20.00(0.00 left) | total 480.00 credits 20.00 due 460.00"; s != want {
		t.Errorf("December: %s\nwant %s", s, want)
	}

	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Fatalf("verify: %s", problems(rep))
	}

	// An edited burn, or an edited balance, is caught: by the chain (the
	// row's hash) and by the recomputation from grants and invoices.
	e.allowEdits("credit_entries")
	for _, tc := range []struct{ edit, undo, want string }{
		{`UPDATE credit_entries SET amount = '380.00' WHERE grant_id = 'c1-b' AND kind = 'burn' AND amount = '480.00'`,
			`UPDATE credit_entries SET amount = '480.00' WHERE grant_id = 'c1-b' AND kind = 'burn' AND amount = '380.00'`,
			"credits recomputed from the grants: c1-b 480.00; stored burns: c1-b 380.00"},
		{`UPDATE credit_entries SET balance = '120.00' WHERE grant_id = 'c1-b' AND kind = 'burn' AND balance = '20.00'`,
			`UPDATE credit_entries SET balance = '20.00' WHERE grant_id = 'c1-b' AND kind = 'burn' AND balance = '120.00'`,
			"burn of grant c1-b: balance 120.00, but the grant's entries leave 20.00"},
	} {
		e.Exec(tc.edit)
		rep, err := invoice.Verify(e.Ctx, e.DB)
		if err != nil {
			t.Fatal(err)
		}
		found := problems(rep)
		if !strings.Contains(found, "row_hash does not match") || !strings.Contains(found, tc.want) {
			t.Errorf("after %s, verify found:\n%s\nwant the edited row's hash and %q", tc.edit, found, tc.want)
		}
		e.Exec(tc.undo)
	}

	// A truncated tail of the credit chain is caught by its anchor.
	anchors, err := invoice.LoadAnchors(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	e.Exec(`DELETE FROM credit_entries WHERE id = (SELECT MAX(id) FROM credit_entries)`)
	rep, err = invoice.Verify(e.Ctx, e.DB, anchors...)
	if err != nil {
		t.Fatal(err)
	}
	if found := problems(rep); !strings.Contains(found, "anchored entries were deleted") {
		t.Errorf("after the last credit entry was deleted, verify with the anchors found:\n%s", found)
	}
}

// A grant's id is its idempotency key: 32 concurrent grants with one id
// make one grant (the rest are duplicates); the same id with another
// amount is refused and writes nothing.
func TestCreditGrantOnce(t *testing.T) {
	e := newEnv(t)
	req := invoice.GrantRequest{ID: "topup-42", Customer: "c1", Currency: "USD", Amount: "25.00", Reason: "top-up", Actor: "billing"}
	var wg sync.WaitGroup
	ops := make([]*custody.GrantCredit, 32)
	errs := make([]error, 32)
	for i := range ops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ops[i] = &custody.GrantCredit{Request: req}
			errs[i] = e.Writer.Submit(e.Ctx, ops[i])
		}()
	}
	wg.Wait()
	fresh := 0
	for i, op := range ops {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if !op.Duplicate {
			fresh++
		}
	}
	es, err := e.DB.CreditEntries(e.Ctx, schema.CreditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if fresh != 1 || len(es) != 1 || es[0].Amount != "25.00" {
		t.Fatalf("%d grants reported new, %d entries stored (%+v): want one of each", fresh, len(es), es)
	}

	other := req
	other.Amount = "30.00"
	err = e.Writer.Submit(e.Ctx, &custody.GrantCredit{Request: other})
	if !errors.Is(err, custody.ErrGrantConflict) {
		t.Fatalf("the same id with another amount: %v, want ErrGrantConflict", err)
	}
	if es, _ := e.DB.CreditEntries(e.Ctx, schema.CreditFilter{}); len(es) != 1 {
		t.Fatalf("a refused grant wrote: %d entries", len(es))
	}
}
