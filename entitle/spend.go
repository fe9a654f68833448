package entitle

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Spend: what a customer's month costs so far, its cap and its alerts
// (docs/entitlements.md, "Spend limits and alerts"). The spend is never
// stored: it is pricing.Plan.Spent of the month's totals in the usage state,
// priced with the plan version that prices the month's invoice (the one in
// force on the month's first day, as the close decides it). Only a version
// with a spend section keeps spend: config refuses one that prices a meter
// aggregating by anything but sum, whose invoice quantity is not the
// month's sum.

// Spending reports whether any plan version has spend alerts: only then does
// the writer price the rows it appends.
func (p *Policy) Spending() bool { return p != nil && p.spending }

// SpendLimit is what caps and alerts a customer's spend in one month.
type SpendLimit struct {
	Version    *pricing.Plan    // prices the month and declares its spend section
	Limit      *pricing.Decimal // nil: alerts only
	Kind       string           // pricing.LimitHard or LimitSoft ("" without a limit)
	Thresholds []pricing.Threshold
	Override   int64 // the override that set Limit, if any
	// values are SpendThreshold of each threshold under Limit (an entry's
	// ok false: a percentage without a limit, which config refuses); nil:
	// not computed.
	values []spendValue
}

type spendValue struct {
	amount pricing.Decimal
	ok     bool
}

// planSpend is plan version v's spend section as ResolveSpend gives it,
// with its thresholds' values.
func planSpend(v *pricing.Plan) SpendLimit {
	l := SpendLimit{Version: v, Limit: v.Spend.Limit, Kind: v.Spend.Kind, Thresholds: v.Spend.Thresholds()}
	values := make([]spendValue, len(l.Thresholds))
	for i := range values {
		values[i].amount, values[i].ok = l.thresholdValue(i)
	}
	l.values = values
	return l
}

// thresholdValue is SpendThreshold of l's threshold i (ok false: a
// percentage without a limit).
func (l SpendLimit) thresholdValue(i int) (pricing.Decimal, bool) {
	if l.values != nil {
		return l.values[i].amount, l.values[i].ok
	}
	v, err := pricing.SpendThreshold(l.Thresholds[i], l.Limit, l.Version.CurrencyOf())
	return v, err == nil
}

// VersionKey names the version: name@effective_from.
func (l SpendLimit) VersionKey() string {
	return l.Version.Name + "@" + string(l.Version.EffectiveFrom)
}

// ResolveSpend returns the spend section of the month whose first day is
// periodDay: the plan version the customer is on that day, if it has one,
// with the customer's latest spend override in force on day. ok is false
// when the version keeps no spend (no plan, or no spend section).
func (p *Policy) ResolveSpend(customer string, periodDay, day pricing.Date, assignments []schema.PlanAssignment, overrides []schema.SpendOverride) (SpendLimit, bool) {
	v := p.versionOn(customer, periodDay, assignments)
	if v == nil || v.Spend == nil {
		return SpendLimit{}, false
	}
	l, ok := p.spends[v]
	if !ok {
		l = planSpend(v)
	}
	for i := len(overrides) - 1; i >= 0; i-- { // the latest in force: by date, then the later recorded
		o := overrides[i]
		if o.EffectiveFrom > string(day) {
			continue
		}
		value, err := pricing.ParseDecimal(o.Limit)
		if err != nil {
			continue // SetSpendOverride refuses such a value
		}
		l.Limit, l.Override, l.values = &value, o.ID, nil
		switch {
		case o.Kind != "":
			l.Kind = o.Kind
		case l.Kind == "":
			l.Kind = pricing.LimitHard
		}
		break
	}
	return l, true
}

// Allowed is the spend check's answer: a hard limit allows while spend is
// below it, so the answer turns false at exactly the limit; a soft limit,
// or none, always allows.
func (l SpendLimit) Allowed(spent pricing.Decimal) bool {
	return l.Limit == nil || l.Kind == pricing.LimitSoft || spent.Cmp(*l.Limit) < 0
}

// SpendCrossing is a spend threshold a row crossed: the writer records it
// (once per threshold and period, spend_crossings' unique key) and raises
// its alert.
type SpendCrossing struct {
	Customer    string
	PeriodStart int64
	PeriodEnd   int64
	Zone        string
	Threshold   pricing.Threshold
	Value       pricing.Decimal // the amount the threshold stands for
	Limit       SpendLimit
	Spent       pricing.Spending // after the row
	Row         *ledger.Row
}

// Spend prices the month of r (just appended and counted by Add) and
// returns the spend thresholds it crossed. The rule is the usage
// thresholds' (Add): a threshold fires with the first row of a period that
// increases spend to or past it, once per threshold and period.
func (t *Tracker) Spend(ctx context.Context, r *ledger.Row) ([]SpendCrossing, error) {
	if r.Quantity.Sign() <= 0 || !t.policy.Spending() {
		return nil, nil
	}
	if ok, err := t.ready(ctx); err != nil || !ok {
		return nil, err
	}
	start, end := ledger.MonthOf(r.OccurredAt, t.loc)
	as, err := t.assignments(ctx, r.Customer)
	if err != nil {
		return nil, err
	}
	os, err := once(t.spendOverrides, t.cached().spendOverrides, r.Customer, func() ([]schema.SpendOverride, error) {
		return t.b.SpendOverrides(ctx, r.Customer)
	})
	if err != nil {
		return nil, err
	}
	l, ok := t.policy.ResolveSpend(r.Customer, Day(start, t.loc), Day(r.OccurredAt, t.loc), as, os)
	if !ok || len(l.Thresholds) == 0 || l.Version.Price(r.Meter) == nil {
		return nil, nil // a meter the version does not price spends nothing
	}
	k := spendKey{r.Customer, start}
	fired := t.spendFired[k]
	if fired == nil {
		fired = maps.Clone(t.cached().spendFired[k]) // the batch's own: it may fire more
	}
	if fired == nil {
		fs, err := t.b.FiredSpendThresholds(ctx, r.Customer, start)
		if err != nil {
			return nil, err
		}
		fired = map[string]bool{}
		for _, f := range fs {
			fired[f] = true
		}
	}
	if t.spendFired[k] == nil {
		t.spendFired[k] = fired
		t.journal = append(t.journal, func() { delete(t.spendFired, k) })
	}
	if !slices.ContainsFunc(l.Thresholds, func(th pricing.Threshold) bool { return !fired[th.Spelling] }) {
		return nil, nil // every threshold fired this month: nothing to price
	}
	used, err := t.monthTotals(ctx, r.Customer, start, end, l.Version)
	if err != nil {
		return nil, err
	}
	spent, err := spentOf(l.Version, used)
	if err != nil {
		return nil, fmt.Errorf("spend of %s: %w", r.Customer, err)
	}
	var out []SpendCrossing
	for i, th := range l.Thresholds {
		if fired[th.Spelling] {
			continue
		}
		v, ok := l.thresholdValue(i)
		if !ok || spent.Total.Cmp(v) < 0 {
			continue // !ok: a percentage without a limit, which Validate refuses
		}
		fired[th.Spelling] = true
		t.journal = append(t.journal, func() { delete(fired, th.Spelling) })
		out = append(out, SpendCrossing{Customer: r.Customer, PeriodStart: start, PeriodEnd: end, Zone: t.loc.String(),
			Threshold: th, Value: v, Limit: l, Spent: spent, Row: r})
	}
	return out, nil
}

type spendKey struct {
	customer string
	start    int64
}

// SpendAnswer is the spend check's answer for one customer now.
type SpendAnswer struct {
	Customer string `json:"customer"`
	// Plan is the version that prices the month (name@effective_from); ""
	// and a null spent when the customer's version keeps no spend.
	Plan      string           `json:"plan,omitempty"`
	Currency  string           `json:"currency,omitempty"`
	Spent     *pricing.Decimal `json:"spent"`
	Limit     *pricing.Decimal `json:"limit"` // null: no limit
	Kind      string           `json:"kind,omitempty"`
	Remaining *pricing.Decimal `json:"remaining"` // null: no limit
	// Allowed is false once spend has reached a hard limit.
	Allowed     bool             `json:"allowed"`
	Alerts      []string         `json:"alerts,omitempty"`
	Fee         *pricing.Decimal `json:"fee,omitempty"`
	Meters      []SpendMeter     `json:"meters,omitempty"`
	PeriodStart string           `json:"period_start"`
	PeriodEnd   string           `json:"period_end"`
	AsOf        string           `json:"as_of"`
	LastRowID   int64            `json:"last_row_id"`
	Override    int64            `json:"override,omitempty"` // the override that set the limit
}

// SpendMeter is one priced meter's share of the spend.
type SpendMeter struct {
	Meter    string          `json:"meter"`
	Quantity ledger.Total    `json:"quantity"`
	Amount   pricing.Decimal `json:"amount"` // rounded, as the invoice line
}

// spendOf is the spend answer for customer in period p, from the usage
// state of its month, its assignments and its spend overrides (in): no scan
// of the ledger, no write.
func spendOf(pol *Policy, customer string, p period, in schema.CheckReads) (SpendAnswer, error) {
	a := SpendAnswer{Customer: customer, Allowed: true, PeriodStart: p.start, PeriodEnd: p.end, AsOf: p.asOf}
	l, ok := pol.ResolveSpend(customer, p.firstDay, p.day, in.Assignments, in.SpendOverrides)
	if !ok {
		return a, nil
	}
	used := map[string]ledger.Total{}
	for _, s := range in.States {
		q, err := ledger.ParseTotal(s.Used)
		if err != nil {
			return SpendAnswer{}, fmt.Errorf("usage state %s/%s: used %q: %w", customer, s.Meter, s.Used, err)
		}
		if l.Version.Price(s.Meter) != nil {
			used[s.Meter] = q
			a.LastRowID = max(a.LastRowID, s.LastRowID)
		}
	}
	totals := make(map[string]pricing.Decimal, len(used))
	for m, q := range used {
		totals[m] = q.Decimal()
	}
	sp, err := l.Version.Spent(totals)
	if err != nil {
		return SpendAnswer{}, fmt.Errorf("spend of %s: %w", customer, err)
	}
	a.Plan, a.Currency, a.Spent, a.Fee, a.Alerts = l.VersionKey(), sp.Currency, &sp.Total, &sp.Fee, l.Version.Spend.Alerts
	for _, line := range sp.Lines {
		a.Meters = append(a.Meters, SpendMeter{Meter: line.Meter, Quantity: used[line.Meter], Amount: line.Amount})
	}
	if l.Limit != nil {
		rem, err := pricing.Sub(*l.Limit, sp.Total)
		if err != nil {
			return SpendAnswer{}, err
		}
		if rem.Sign() < 0 {
			rem, _ = pricing.Sub(*l.Limit, *l.Limit) // zero, written as the limit is ("0.00")
		}
		a.Limit, a.Kind, a.Remaining, a.Override = l.Limit, l.Kind, &rem, l.Override
	}
	a.Allowed = l.Allowed(sp.Total)
	return a, nil
}

// SpendOverride is a customer's own spend limit from a date: it replaces the
// limit of the spend section of the customer's plan version (and its kind,
// when Kind is set) from EffectiveFrom on, until a later override. A plan
// version without a spend section keeps no spend: an override there has
// nothing to cap. Appended, never edited.
type SpendOverride struct {
	ID            int64           `json:"id"`
	Customer      string          `json:"customer"`
	Limit         pricing.Decimal `json:"limit"`
	Kind          string          `json:"kind,omitempty"`
	EffectiveFrom pricing.Date    `json:"effective_from"`
	RecordedAt    time.Time       `json:"recorded_at"`
	Note          string          `json:"note,omitempty"`
}

// SpendOverrideStore stores and reads spend overrides (*schema.DB).
type SpendOverrideStore interface {
	InsertSpendOverride(ctx context.Context, o schema.SpendOverride) (int64, error)
	SpendOverrides(ctx context.Context, customer string) ([]schema.SpendOverride, error)
}

// SetSpendOverride validates o against the plans of p and appends it. The
// limit is an amount in the currency of the customer's plan version, so it
// may have no more decimal places than the finest currency of the versions
// that keep spend (as a plan's own spend limit, which config checks).
func SetSpendOverride(ctx context.Context, db SpendOverrideStore, p *Policy, o SpendOverride) (SpendOverride, error) {
	bad := func(format string, args ...any) (SpendOverride, error) {
		return SpendOverride{}, fmt.Errorf("%w: %s", ErrBadOverride, fmt.Sprintf(format, args...))
	}
	switch {
	case ledger.CheckIdentifier(o.Customer) != nil || o.Customer == "":
		return bad("customer %q is not a customer id", o.Customer)
	case o.Limit.Check() != nil:
		return bad("%v", o.Limit.Check())
	case o.Limit.Sign() < 0:
		return bad("spend limit %s is negative", o.Limit)
	case o.Kind != "" && o.Kind != pricing.LimitHard && o.Kind != pricing.LimitSoft:
		return bad("kind %q is not hard or soft", o.Kind)
	}
	if cur, ok := p.finestSpendCurrency(); ok && o.Limit.Decimals() > cur.Decimals() {
		return bad("spend limit %s has %d decimal places; the plans keep spend in currencies of at most %d (%s)",
			o.Limit, o.Limit.Decimals(), cur.Decimals(), cur)
	}
	if err := o.EffectiveFrom.Check(); err != nil {
		return bad("%v", err)
	}
	if err := ledger.CheckTexts(ledger.Text{Field: "note", Value: o.Note}); err != nil {
		return bad("%v", err)
	}
	id, err := db.InsertSpendOverride(ctx, schema.SpendOverride{Customer: o.Customer, Limit: o.Limit.String(), Kind: o.Kind,
		EffectiveFrom: string(o.EffectiveFrom), RecordedAt: o.RecordedAt.UnixMilli(), Note: o.Note})
	if err != nil {
		return SpendOverride{}, err
	}
	o.ID = id
	return o, nil
}

// SpendOverrides lists the spend overrides of customer ("" for all), by
// customer, date and the order they were recorded.
func SpendOverrides(ctx context.Context, db SpendOverrideStore, customer string) ([]SpendOverride, error) {
	rs, err := db.SpendOverrides(ctx, customer)
	if err != nil {
		return nil, err
	}
	out := make([]SpendOverride, 0, len(rs))
	for _, r := range rs {
		l, err := pricing.ParseDecimal(r.Limit)
		if err != nil {
			return nil, fmt.Errorf("spend override %d: %q is not an amount", r.ID, r.Limit)
		}
		out = append(out, SpendOverride{ID: r.ID, Customer: r.Customer, Limit: l, Kind: r.Kind,
			EffectiveFrom: pricing.Date(r.EffectiveFrom), RecordedAt: time.UnixMilli(r.RecordedAt).UTC(), Note: r.Note})
	}
	return out, nil
}

// finestSpendCurrency is the currency with the most decimal places among
// the plan versions that keep spend (ok false: none does).
func (p *Policy) finestSpendCurrency() (cur pricing.Currency, ok bool) {
	if p == nil || p.Catalog == nil {
		return cur, false
	}
	for _, name := range p.Catalog.Names() {
		for _, v := range p.Catalog.Versions(name) {
			if v.Spend != nil && (!ok || v.CurrencyOf().Decimals() > cur.Decimals()) {
				cur, ok = v.CurrencyOf(), true
			}
		}
	}
	return cur, ok
}
