package entitle

import (
	"context"
	"fmt"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Credits in checks and alerts (docs/entitlements.md): a customer's
// prepaid credit as the month's spend draws it (invoice.DrawCredit), asked
// by a plan limit of kind credit and watched by the credit alerts. The
// spend is Tracker.Spend's (pricing.Plan.Spent of the month's totals in the
// usage state, with the plan version in force on the month's first day);
// the grants' balances are the credit ledger's.

// LimitCredit is the kind of a plan limit that allows usage while the
// customer's available credit covers the month's spend: `{meter:
// api_requests, kind: credit}`, with no limit value. pricing.Limit knows
// hard and soft only: config sets a credit limit aside while pricing
// validates the others, and checks it itself.
const LimitCredit = "credit"

// CreditAlerts are the credit alerts configured (config's credits.alerts).
type CreditAlerts struct {
	// BalanceLow fire when a grant's available credit is at or below
	// them: a percentage of the grant's amount ("25%") or an amount in its
	// currency ("10.00").
	BalanceLow []pricing.Threshold
	// Depleted fires when a grant's available credit reaches zero.
	Depleted bool
}

// Depleted is the threshold name of credits.depleted, in credit_crossings
// and alerts.
const Depleted = "depleted"

// CreditAlerting reports whether credit alerts are configured: only then
// does the writer draw credit for the rows it appends.
func (p *Policy) CreditAlerting() bool {
	return p != nil && (len(p.CreditAlerts.BalanceLow) > 0 || p.CreditAlerts.Depleted)
}

// creditVersion is the plan version whose spend draws a customer's credit
// in the month whose first day is firstDay: the version in force that day
// (it prices the month's invoice), else the one in force on day.
func (p *Policy) creditVersion(customer string, firstDay, day pricing.Date, assignments []schema.PlanAssignment) *pricing.Plan {
	if v := p.versionOn(customer, firstDay, assignments); v != nil {
		return v
	}
	return p.versionOn(customer, day, assignments)
}

// versionKey names v: name@effective_from.
func versionKey(v *pricing.Plan) string { return v.Name + "@" + string(v.EffectiveFrom) }

// spentOf is what v charges for a month whose totals (by meter) are
// used: pricing.Plan.Spent, the spend section's rule.
func spentOf(v *pricing.Plan, used map[string]ledger.Total) (pricing.Spending, error) {
	totals := make(map[string]pricing.Decimal, len(v.Prices))
	for _, pr := range v.Prices {
		totals[pr.Meter] = used[pr.Meter].Decimal()
	}
	return v.Spent(totals)
}

// CreditCheck is a customer's credit as the month's spend draws it, in the
// currency of the plan version that prices the month: the numbers of an
// entitlement check of a credit limit, and of a consume against one.
type CreditCheck struct {
	Plan      string          `json:"plan"` // name@effective_from of the version that prices the spend
	Currency  string          `json:"currency"`
	Spent     pricing.Decimal `json:"spent"`     // the month's spend (after the consume, for a consume)
	Balance   pricing.Decimal `json:"balance"`   // the active grants' balances
	Drawn     pricing.Decimal `json:"drawn"`     // what the spend draws from them
	Available pricing.Decimal `json:"available"` // balance − drawn
}

func creditCheck(v *pricing.Plan, d *invoice.CreditDraw) *CreditCheck {
	return &CreditCheck{Plan: versionKey(v), Currency: d.Currency, Spent: d.Spent, Balance: d.Balance, Drawn: d.Drawn, Available: d.Available}
}

// Allowed is a credit limit's answer: allowed while credit is available,
// so it turns false when the spend reaches the balance exactly.
func (c *CreditCheck) Allowed() bool { return c.Available.Sign() > 0 }

// customerCredit is what a batch read of one customer's credit: its
// grants, replayed from the credit ledger, and the thresholds fired.
type customerCredit struct {
	grants []*invoice.Grant
	fired  map[firedKey]bool // nil until read (alerts only)
}

type firedKey struct{ grant, threshold string }

// credit returns customer's grants, read from the credit ledger once per
// batch (ForgetCredits: until an op of the batch writes it).
func (t *Tracker) credit(ctx context.Context, customer string) (*customerCredit, error) {
	if c := t.credits[customer]; c != nil {
		return c, nil
	}
	es, err := t.b.CreditEntries(ctx, schema.CreditFilter{Customer: customer})
	if err != nil {
		return nil, err
	}
	grants, err := invoice.GrantsOf(es)
	if err != nil {
		return nil, err
	}
	c := &customerCredit{grants: grants}
	if t.credits == nil {
		t.credits = map[string]*customerCredit{}
	}
	t.credits[customer] = c
	t.journal = append(t.journal, func() { delete(t.credits, customer) })
	return c, nil
}

// ForgetCredits drops the credit the batch has read: an op of the batch
// wrote the credit ledger (a grant, a void, an expiry), so the rows after
// it read the balances again.
func (t *Tracker) ForgetCredits() {
	if len(t.credits) > 0 {
		clear(t.credits)
	}
}

// monthTotals are customer's month totals (from start) of v's priced
// meters, with the batch's own rows, read from usage_state once per batch.
func (t *Tracker) monthTotals(ctx context.Context, customer string, start, end int64, v *pricing.Plan) (map[string]ledger.Total, error) {
	used := make(map[string]ledger.Total, len(v.Prices))
	for _, pr := range v.Prices {
		s, err := t.state(ctx, ledger.StateKey{Customer: customer, Meter: pr.Meter, PeriodStart: start}, end)
		if err != nil {
			return nil, err
		}
		used[pr.Meter] = s.used
	}
	return used, nil
}

// CreditFits says whether a row of quantity q of customer's meter at (unix
// ms), under a limit of kind credit, keeps the month's spend after it
// within the customer's credit balance at now (docs/entitlements.md,
// "Usage that never overshoots"). It reads what Credits reads, with the
// batch's own rows: the consume decided here and the row it appends see the
// same totals. The answer's numbers are those after the row (for q zero,
// now's). ErrNotBuilt: the usage state is not kept yet.
func (t *Tracker) CreditFits(ctx context.Context, customer, meter string, at int64, q ledger.Total, now int64) (bool, *CreditCheck, error) {
	if built, err := t.ready(ctx); err != nil || !built {
		if err == nil {
			err = ErrNotBuilt
		}
		return false, nil, err
	}
	start, end := ledger.MonthOf(at, t.loc)
	as, err := t.assignments(ctx, customer)
	if err != nil {
		return false, nil, err
	}
	v := t.policy.creditVersion(customer, Day(start, t.loc), Day(at, t.loc), as)
	if v == nil {
		return false, nil, fmt.Errorf("credit limit of %s on %s: no plan version", customer, meter)
	}
	used, err := t.monthTotals(ctx, customer, start, end, v)
	if err != nil {
		return false, nil, err
	}
	if _, priced := used[meter]; priced {
		used[meter] = used[meter].Plus(q)
	}
	spent, err := spentOf(v, used)
	if err != nil {
		return false, nil, fmt.Errorf("spend of %s: %w", customer, err)
	}
	c, err := t.credit(ctx, customer)
	if err != nil {
		return false, nil, err
	}
	d, err := invoice.DrawCredit(c.grants, spent.Currency, spent.Total, now)
	if err != nil {
		return false, nil, fmt.Errorf("credit of %s: %w", customer, err)
	}
	return spent.Total.Cmp(d.Balance) <= 0, creditCheck(v, d), nil
}

// creditOf is the credit check's answer for customer, with v the version
// that prices the month: in holds the month's usage state and the
// customer's credit ledger; no scan of the ledger, no write.
func creditOf(v *pricing.Plan, customer string, in schema.CreditReads, now int64) (*CreditCheck, error) {
	used := map[string]ledger.Total{}
	for _, s := range in.States {
		if v.Price(s.Meter) == nil {
			continue
		}
		q, err := ledger.ParseTotal(s.Used)
		if err != nil {
			return nil, fmt.Errorf("usage state %s/%s: used %q: %w", customer, s.Meter, s.Used, err)
		}
		used[s.Meter] = q
	}
	spent, err := spentOf(v, used)
	if err != nil {
		return nil, fmt.Errorf("spend of %s: %w", customer, err)
	}
	grants, err := invoice.GrantsOf(in.Entries)
	if err != nil {
		return nil, err
	}
	d, err := invoice.DrawCredit(grants, spent.Currency, spent.Total, now)
	if err != nil {
		return nil, fmt.Errorf("credit of %s: %w", customer, err)
	}
	return creditCheck(v, d), nil
}
