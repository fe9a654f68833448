package entitle

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Credit alerts (docs/entitlements.md, "Credit alerts"): credits.balance_low
// when a grant's available credit (its balance less what the open month's
// spend draws from it, in the burn order) is at or below a configured
// threshold, credits.depleted when it reaches zero. Each fires once per
// grant and threshold, ever (credit_crossings' unique key), in the
// transaction of the usage row whose draw took the grant there.

// Credit alert event types: events of provider hookledger like the usage
// and spend alerts, with types of their own so a destination takes the ones
// it wants.
const (
	CreditBalanceLowType = "credits.balance_low"
	CreditDepletedType   = "credits.depleted"
)

// CreditAlertEventID is a credit alert's event id: derived from the grant
// and the threshold, the key it fires once for ("crd_", never equal to a
// usage alert's "thr_" or a spend alert's "spd_").
func CreditAlertEventID(grant, threshold string) string {
	h := sha256.New()
	fmt.Fprintf(h, "credit\x00%s\x00%s", grant, threshold)
	return "crd_" + alertEncoding.EncodeToString(h.Sum(nil)[:20])
}

// CreditCrossing is a credit threshold a row's draw took a grant to: the
// writer records it (once per grant and threshold) and raises its alert.
type CreditCrossing struct {
	Customer    string
	Threshold   string          // as configured, or Depleted
	Value       pricing.Decimal // the amount the threshold stands for
	Grant       invoice.GrantDraw
	Spent       pricing.Decimal // the month's spend after the row
	Plan        string          // name@effective_from of the version that priced it
	PeriodStart int64
	PeriodEnd   int64
	Zone        string
	Row         *ledger.Row
}

// Type is the alert's event type.
func (c CreditCrossing) Type() string {
	if c.Threshold == Depleted {
		return CreditDepletedType
	}
	return CreditBalanceLowType
}

// thresholds are the configured credit thresholds, depleted (an amount of
// zero) last.
func (a CreditAlerts) thresholds() []pricing.Threshold {
	ts := a.BalanceLow
	if a.Depleted {
		ts = append(ts[:len(ts):len(ts)], pricing.Threshold{Spelling: Depleted, Value: pricing.NewDecimal(0, 0)})
	}
	return ts
}

// CreditThresholdValue is the amount threshold t stands for on a grant of
// amount in cur: a percentage of the amount, exactly, or the amount
// written; with cur's places when it is whole minor units ("25.00").
func CreditThresholdValue(t pricing.Threshold, amount pricing.Decimal, cur pricing.Currency) (pricing.Decimal, error) {
	return pricing.SpendThreshold(t, &amount, cur)
}

// Credits draws the open month's spend, after r (just appended and counted
// by Add), from r's customer's credit at now, and returns the credit
// thresholds it took a grant to. It does nothing unless credit alerts are
// configured, for a row that does not increase usage, of another month
// than now's (the open month's draw is not its), of a customer without a
// grant that may pay, or of a meter the month's plan version does not
// price (it spends nothing).
func (t *Tracker) Credits(ctx context.Context, r *ledger.Row, now int64) ([]CreditCrossing, error) {
	if r.Quantity.Sign() <= 0 || !t.policy.CreditAlerting() {
		return nil, nil
	}
	if ok, err := t.ready(ctx); err != nil || !ok {
		return nil, err
	}
	start, end := ledger.MonthOf(r.OccurredAt, t.loc)
	if open, _ := ledger.MonthOf(now, t.loc); open != start {
		return nil, nil
	}
	c, err := t.credit(ctx, r.Customer)
	if err != nil || !invoice.HasCredit(c.grants, now) {
		return nil, err
	}
	as, err := t.assignments(ctx, r.Customer)
	if err != nil {
		return nil, err
	}
	v := t.policy.versionOn(r.Customer, Day(start, t.loc), as)
	if v == nil || v.Price(r.Meter) == nil {
		return nil, nil
	}
	if err := t.readFired(ctx, r.Customer, c); err != nil {
		return nil, err
	}
	ths := t.policy.CreditAlerts.thresholds()
	if allFired(c, ths) {
		return nil, nil // every grant fired every threshold: nothing to price
	}
	used, err := t.monthTotals(ctx, r.Customer, start, end, v)
	if err != nil {
		return nil, err
	}
	spent, err := spentOf(v, used)
	if err != nil {
		return nil, fmt.Errorf("spend of %s: %w", r.Customer, err)
	}
	d, err := invoice.DrawCredit(c.grants, spent.Currency, spent.Total, now)
	if err != nil {
		return nil, fmt.Errorf("credit of %s: %w", r.Customer, err)
	}
	var out []CreditCrossing
	for _, g := range d.Grants {
		amount, err := pricing.ParseDecimal(g.Grant.Amount)
		if err != nil {
			return nil, fmt.Errorf("grant %s: amount %q: %w", g.Grant.ID, g.Grant.Amount, err)
		}
		for _, th := range ths {
			k := firedKey{g.Grant.ID, th.Spelling}
			if c.fired[k] {
				continue
			}
			value, err := CreditThresholdValue(th, amount, v.CurrencyOf())
			if err != nil {
				return nil, fmt.Errorf("grant %s: threshold %s: %w", g.Grant.ID, th.Spelling, err)
			}
			if g.Available.Cmp(value) > 0 {
				continue
			}
			c.fired[k] = true
			t.journal = append(t.journal, func() { delete(c.fired, k) })
			out = append(out, CreditCrossing{Customer: r.Customer, Threshold: th.Spelling, Value: value, Grant: g, Spent: spent.Total,
				Plan: versionKey(v), PeriodStart: start, PeriodEnd: end, Zone: t.loc.String(), Row: r})
		}
	}
	return out, nil
}

// allFired reports whether every grant of c fired every threshold of ths.
func allFired(c *customerCredit, ths []pricing.Threshold) bool {
	for _, g := range c.grants {
		for _, th := range ths {
			if !c.fired[firedKey{g.ID, th.Spelling}] {
				return false
			}
		}
	}
	return true
}

// readFired reads the thresholds fired for customer's grants, once per
// batch.
func (t *Tracker) readFired(ctx context.Context, customer string, c *customerCredit) error {
	if c.fired != nil {
		return nil
	}
	fs, err := t.b.FiredCreditThresholds(ctx, customer)
	if err != nil {
		return err
	}
	c.fired = make(map[firedKey]bool, len(fs))
	for _, f := range fs {
		c.fired[firedKey{f.GrantID, f.Threshold}] = true
	}
	t.journal = append(t.journal, func() { c.fired = nil })
	return nil
}

// CreditAlert is the body of a credits.balance_low or credits.depleted
// event.
type CreditAlert struct {
	Type      string           `json:"type"`
	Customer  string           `json:"customer"`
	Grant     CreditAlertGrant `json:"grant"`
	Threshold string           `json:"threshold"` // as configured ("25%", "10.00"), or "depleted"
	Amount    pricing.Decimal  `json:"amount"`    // the amount the threshold stands for
	Balance   pricing.Decimal  `json:"balance"`   // the grant's balance in the credit ledger
	Drawn     pricing.Decimal  `json:"drawn"`     // what the open month's spend draws from it
	Available pricing.Decimal  `json:"available"` // balance − drawn
	Spent     pricing.Decimal  `json:"spent"`     // the month's spend after the row
	Plan      string           `json:"plan"`      // name@date of the version that priced it
	Period    PeriodJSON       `json:"period"`
	Row       AlertRow         `json:"row"`
	CrossedAt string           `json:"crossed_at"`
}

// CreditAlertGrant is the grant a credit alert is about.
type CreditAlertGrant struct {
	ID       string `json:"id"`
	Currency string `json:"currency"`
	Amount   string `json:"amount"` // granted
	Category string `json:"category"`
	Priority int64  `json:"priority"`
}

// CreditAlertBody is the JSON body of c's event, raised at now.
func CreditAlertBody(c CreditCrossing, now time.Time) []byte {
	loc, err := ledger.LoadZone(c.Zone)
	if err != nil {
		loc = time.UTC
	}
	g := c.Grant.Grant
	a := CreditAlert{Type: c.Type(), Customer: c.Customer,
		Grant:     CreditAlertGrant{ID: g.ID, Currency: g.Currency, Amount: g.Amount, Category: g.Category, Priority: g.Priority},
		Threshold: c.Threshold, Amount: c.Value, Balance: c.Grant.Balance, Drawn: c.Grant.Drawn, Available: c.Grant.Available,
		Spent: c.Spent, Plan: c.Plan, Period: Period(c.PeriodStart, c.PeriodEnd, loc), CrossedAt: now.UTC().Format(time.RFC3339Nano),
		Row: AlertRow{ID: c.Row.ID, Kind: c.Row.Kind, Provider: c.Row.Provider, EventID: c.Row.EventID, Quantity: c.Row.Quantity,
			OccurredAt: time.UnixMilli(c.Row.OccurredAt).UTC().Format(time.RFC3339Nano)}}
	b, _ := json.Marshal(a) // strings and numbers only
	return b
}

// CreditRecord is what credit_crossings stores of c.
func CreditRecord(c CreditCrossing, receiptID, now int64) schema.CreditCrossing {
	g := c.Grant
	return schema.CreditCrossing{GrantID: g.Grant.ID, Customer: c.Customer, Currency: g.Grant.Currency, Threshold: c.Threshold,
		ThresholdValue: c.Value.String(), Balance: g.Balance.String(), Drawn: g.Drawn.String(), Available: g.Available.String(),
		Plan: c.Plan, PeriodStart: c.PeriodStart, PeriodEnd: c.PeriodEnd, RowID: c.Row.ID, ReceiptID: receiptID, CrossedAt: now}
}
