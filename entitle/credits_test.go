package entitle

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// countingStore is a Store that counts the reads a Tracker makes and
// answers with nothing (a built state in UTC, no usage) but entries, the
// credit ledger; the read named fail fails.
type countingStore struct {
	calls   map[string]int
	entries []schema.CreditEntry
	fail    string
}

var errRead = errors.New("read failed")

func (s *countingStore) call(name string) error {
	s.calls[name]++
	if name == s.fail {
		return errRead
	}
	return nil
}

func (s *countingStore) StateZone(context.Context) (schema.StateZone, bool, error) {
	return schema.StateZone{Zone: "UTC"}, true, s.call("StateZone")
}
func (s *countingStore) UsageState(context.Context, string, string, int64) (schema.UsageState, bool, error) {
	return schema.UsageState{}, false, s.call("UsageState")
}
func (s *countingStore) SaveUsageState(context.Context, schema.UsageState) error {
	return s.call("SaveUsageState")
}
func (s *countingStore) FiredThresholds(context.Context, string, string, int64) ([]string, error) {
	return nil, s.call("FiredThresholds")
}
func (s *countingStore) PlanAssignments(context.Context, string) ([]schema.PlanAssignment, error) {
	return nil, s.call("PlanAssignments")
}
func (s *countingStore) LimitOverrides(context.Context, string, string) ([]schema.LimitOverride, error) {
	return nil, s.call("LimitOverrides")
}
func (s *countingStore) FiredSpendThresholds(context.Context, string, int64) ([]string, error) {
	return nil, s.call("FiredSpendThresholds")
}
func (s *countingStore) SpendOverrides(context.Context, string) ([]schema.SpendOverride, error) {
	return nil, s.call("SpendOverrides")
}
func (s *countingStore) CreditEntries(context.Context, schema.CreditFilter) ([]schema.CreditEntry, error) {
	return s.entries, s.call("CreditEntries")
}
func (s *countingStore) FiredCreditThresholds(context.Context, string) ([]schema.FiredCredit, error) {
	return nil, s.call("FiredCreditThresholds")
}

// Without credit alerts configured, Credits reads nothing and costs a row
// nothing but a check of the policy; with them, a row that does not
// increase usage reads nothing either, and a customer without a grant
// costs one read of its credit ledger per batch, not per row.
func TestCreditsCostNothingUnconfigured(t *testing.T) {
	catalog, err := pricing.NewCatalog(nil)
	if err != nil {
		t.Fatal(err)
	}
	row := func(q int64) *ledger.Row {
		return &ledger.Row{ID: 1, Customer: "cus_1", Meter: "api_requests", Quantity: ledger.TotalOf(ledger.Quantity(q * ledger.Scale)), OccurredAt: 1_000}
	}
	for _, p := range []*Policy{nil, NewPolicy(nil, ""), NewPolicy(catalog, "free")} {
		s := &countingStore{calls: map[string]int{}}
		tr := NewTracker(s, p, nil)
		for range 3 {
			cs, err := tr.Credits(t.Context(), row(5), 2_000)
			if err != nil || cs != nil {
				t.Fatalf("unconfigured: %v %v", cs, err)
			}
		}
		if len(s.calls) != 0 {
			t.Errorf("policy %+v: the tracker read %v, want nothing", p, s.calls)
		}
	}
	p := NewPolicy(catalog, "")
	p.CreditAlerts.Depleted = true
	s := &countingStore{calls: map[string]int{}}
	tr := NewTracker(s, p, nil)
	if cs, err := tr.Credits(t.Context(), row(-5), 2_000); err != nil || cs != nil || len(s.calls) != 0 {
		t.Errorf("a row that decreases usage: %v %v, read %v", cs, err, s.calls)
	}
	for range 3 {
		if cs, err := tr.Credits(t.Context(), row(5), 2_000); err != nil || cs != nil {
			t.Fatalf("no grants: %v %v", cs, err)
		}
	}
	if s.calls["CreditEntries"] != 1 || s.calls["FiredCreditThresholds"] != 0 || s.calls["UsageState"] != 0 {
		t.Errorf("no grants: read %v, want the credit ledger once and nothing else of credits", s.calls)
	}
	tr.ForgetCredits()
	if _, err := tr.Credits(t.Context(), row(5), 2_000); err != nil || s.calls["CreditEntries"] != 2 {
		t.Errorf("after ForgetCredits: %v, read %v, want the credit ledger read again", err, s.calls)
	}
	// A row of another month than now's draws nothing from the open one.
	if cs, err := tr.Credits(t.Context(), row(5), 40*24*3600*1000); err != nil || cs != nil || s.calls["CreditEntries"] != 2 {
		t.Errorf("a row of another month: %v %v, read %v", cs, err, s.calls)
	}
}

var cent = pricing.MustDecimal("0.01")

// creditCatalog is a plan "credit" pricing api_requests 0.01 each.
func creditCatalog(t *testing.T) *pricing.Catalog {
	t.Helper()
	plans := []pricing.Plan{{Name: "credit", Currency: "USD", EffectiveFrom: "2026-01-01",
		Prices: []pricing.Price{{Meter: "api_requests", Model: pricing.Unit, Unit: &cent}}}}
	if err := plans[0].Validate(); err != nil {
		t.Fatal(err)
	}
	c, err := pricing.NewCatalog(plans)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Every read Credits and CreditFits make can fail: the error is theirs,
// and the batch's (the writer fails the op that appended the row). A
// credit ledger that does not add up fails them too.
func TestCreditsReadErrors(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC).UnixMilli()
	r := &ledger.Row{ID: 1, Customer: "cus_1", Meter: "api_requests", Quantity: ledger.TotalOf(5 * ledger.Scale), OccurredAt: now}
	grant := schema.CreditEntry{ID: 1, Kind: invoice.CreditGranted, GrantID: "g1", Customer: "cus_1", Currency: "USD", Amount: "100.00",
		Balance: "100.00", Category: "paid", Priority: 50}
	p := NewPolicy(creditCatalog(t), "credit")
	p.CreditAlerts.Depleted = true
	for _, read := range []string{"StateZone", "CreditEntries", "PlanAssignments", "FiredCreditThresholds", "UsageState"} {
		s := &countingStore{calls: map[string]int{}, entries: []schema.CreditEntry{grant}, fail: read}
		if _, err := NewTracker(s, p, nil).Credits(t.Context(), r, now); !errors.Is(err, errRead) {
			t.Errorf("Credits, %s failing: %v", read, err)
		}
		if read == "FiredCreditThresholds" {
			continue // a consume reads no alerts
		}
		if _, _, err := NewTracker(s, p, nil).CreditFits(t.Context(), "cus_1", "api_requests", now, ledger.Total{}, now); !errors.Is(err, errRead) {
			t.Errorf("CreditFits, %s failing: %v", read, err)
		}
	}
	bad := grant
	bad.Balance = "99.00" // a grant's balance is its amount
	s := &countingStore{calls: map[string]int{}, entries: []schema.CreditEntry{bad}}
	if _, err := NewTracker(s, p, nil).Credits(t.Context(), r, now); err == nil || !strings.Contains(err.Error(), "run hookledger verify") {
		t.Errorf("Credits of a credit ledger that does not add up: %v", err)
	}
	if _, _, err := NewTracker(s, p, nil).CreditFits(t.Context(), "cus_1", "api_requests", now, ledger.Total{}, now); err == nil {
		t.Error("CreditFits of a credit ledger that does not add up: want an error")
	}
	// Not built: nothing to decide by; no plan version: no credit limit.
	s = &countingStore{calls: map[string]int{}}
	unbuilt := &unbuiltStore{s}
	if _, _, err := NewTracker(unbuilt, p, nil).CreditFits(t.Context(), "cus_1", "api_requests", now, ledger.Total{}, now); !errors.Is(err, ErrNotBuilt) {
		t.Errorf("CreditFits before the state is built: %v", err)
	}
	if cs, err := NewTracker(unbuilt, p, nil).Credits(t.Context(), r, now); cs != nil || err != nil {
		t.Errorf("Credits before the state is built: %v %v", cs, err)
	}
	if _, _, err := NewTracker(s, NewPolicy(nil, ""), nil).CreditFits(t.Context(), "cus_1", "api_requests", now, ledger.Total{}, now); err == nil ||
		!strings.Contains(err.Error(), "no plan version") {
		t.Errorf("CreditFits without a plan: %v", err)
	}
}

// unbuiltStore has no usage state yet.
type unbuiltStore struct{ *countingStore }

func (unbuiltStore) StateZone(context.Context) (schema.StateZone, bool, error) {
	return schema.StateZone{}, false, nil
}

// checkReader is a Reader whose state is built and holds nothing of the
// customer; it cannot read credits (creditCheckReader can: reads and err).
type checkReader struct {
	reads schema.CreditReads
	err   error
}

func (checkReader) CheckReads(context.Context, string, []string, bool, int64) (schema.CheckReads, error) {
	return schema.CheckReads{Zone: schema.StateZone{Zone: "UTC"}, Built: true}, nil
}

type creditCheckReader struct{ checkReader }

func (r creditCheckReader) CreditReads(context.Context, string, int64) (schema.CreditReads, error) {
	return r.reads, r.err
}

// A check of a credit limit: a database from before credits has none (not
// allowed), a failed read is the check's error, as is a reader that
// cannot read credits or a customer without a plan version.
func TestCreditCheckErrors(t *testing.T) {
	plans := []pricing.Plan{{Name: "credit", Currency: "USD", EffectiveFrom: "2026-01-01",
		Prices: []pricing.Price{{Meter: "api_requests", Model: pricing.Unit, Unit: &cent}}}}
	if err := plans[0].Validate(); err != nil {
		t.Fatal(err)
	}
	plans[0].Limits = []pricing.Limit{{Meter: "api_requests", Kind: LimitCredit}} // as config sets it aside and back
	catalog, err := pricing.NewCatalog(plans)
	if err != nil {
		t.Fatal(err)
	}
	at := func() time.Time { return time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC) }
	check := func(db Reader, plan string) (Entitlement, error) {
		return (&Checker{DB: db, Policy: NewPolicy(catalog, plan), Now: at}).Check(t.Context(), "cus_1", "api_requests")
	}
	e, err := check(creditCheckReader{checkReader{err: schema.ErrNoCredits}}, "credit")
	if err != nil || e.Allowed || e.Credit == nil || e.Credit.Balance.String() != "0.00" {
		t.Errorf("before credits: %+v %v", e, err)
	}
	if _, err := check(creditCheckReader{checkReader{err: errRead}}, "credit"); !errors.Is(err, errRead) {
		t.Errorf("a failed read: %v", err)
	}
	if _, err := check(checkReader{}, "credit"); err == nil || !strings.Contains(err.Error(), "cannot read the credit ledger") {
		t.Errorf("a reader without credits: %v", err)
	}
	bad := creditCheckReader{checkReader{reads: schema.CreditReads{States: []schema.UsageState{{Meter: "api_requests", Used: "x"}}}}}
	if _, err := check(bad, "credit"); err == nil || !strings.Contains(err.Error(), `used "x"`) {
		t.Errorf("a usage state that is no total: %v", err)
	}
	bad = creditCheckReader{checkReader{reads: schema.CreditReads{Entries: []schema.CreditEntry{{ID: 1, Kind: "burn", GrantID: "g"}}}}}
	if _, err := check(bad, "credit"); err == nil || !strings.Contains(err.Error(), "run hookledger verify") {
		t.Errorf("a credit ledger that does not add up: %v", err)
	}
	// Without a default plan the limit is no one's: nothing to read.
	if e, err := check(checkReader{}, ""); err != nil || e.Credit != nil || !e.Allowed {
		t.Errorf("no plan: %+v %v", e, err)
	}
}
