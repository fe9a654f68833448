// Package entitle answers "may this customer use more of this meter?" and
// decides threshold alerts. Its numbers come from the usage state the
// writer keeps in the transaction of every ledger row (ledger/state.go,
// usage_state): Tracker is the writer's side, Checker the readers'.
package entitle

import (
	"math/big"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Policy resolves the limit in force for a customer's meter on a day: the
// plan version the customer is on (its assignment, else the default plan)
// and its limit on the meter, replaced by the customer's latest override in
// force.
type Policy struct {
	Catalog     *pricing.Catalog // nil: no plans
	DefaultPlan string
	// CreditAlerts are the credit alerts (credits.go); none by default.
	CreditAlerts CreditAlerts

	alerting map[string]bool // meters with alert thresholds in some plan version
	spending bool            // some plan version has spend alerts (spend.go)
	// limits are the plan versions' limits resolved once (NewPolicy): the
	// writer resolves a row's limit per row, and parsing it, its alerts
	// and their values each time was most of the usage limit's check.
	limits map[*pricing.Limit]Limit
	// spends are the plan versions' spend sections resolved once, as
	// limits (spend.go).
	spends map[*pricing.Plan]SpendLimit
}

// NewPolicy returns the policy of the configured plans.
func NewPolicy(catalog *pricing.Catalog, defaultPlan string) *Policy {
	p := &Policy{Catalog: catalog, DefaultPlan: defaultPlan, alerting: map[string]bool{},
		limits: map[*pricing.Limit]Limit{}, spends: map[*pricing.Plan]SpendLimit{}}
	if catalog != nil {
		for _, name := range catalog.Names() {
			for _, v := range catalog.Versions(name) {
				for i := range v.Limits {
					l := &v.Limits[i]
					if len(l.Alerts) > 0 {
						p.alerting[l.Meter] = true
					}
					if pl, ok := planLimit(v, l); ok {
						p.limits[l] = pl
					}
				}
				if v.Spend != nil {
					p.spends[v] = planSpend(v)
					p.spending = p.spending || len(v.Spend.Alerts) > 0
				}
			}
		}
	}
	return p
}

// Alerting reports whether any plan version has alert thresholds on meter:
// only then does the writer resolve limits for its rows.
func (p *Policy) Alerting(meter string) bool { return p != nil && p.alerting[meter] }

// Limit is the limit in force for one customer's meter.
type Limit struct {
	Value      ledger.Total
	Kind       string              // pricing.LimitHard, LimitSoft, or LimitCredit (no Value: credits.go)
	Thresholds []pricing.Threshold // the plan's alerts on the meter
	Plan       string              // the plan version it comes from (name@date), if any
	Override   int64               // the override that set Value, if any
	values     []ledger.Total      // ThresholdValue of each threshold under Value; nil: not computed
}

// planLimit is plan version v's limit l as Resolve gives it (ok false: a
// value that does not parse, which config refuses).
func planLimit(v *pricing.Plan, l *pricing.Limit) (Limit, bool) {
	value, err := ledger.ParseTotal(l.Limit.String())
	if err != nil {
		return Limit{}, false
	}
	out := Limit{Value: value, Kind: l.Kind, Thresholds: l.Thresholds(), Plan: v.Name + "@" + string(v.EffectiveFrom)}
	out.values = make([]ledger.Total, len(out.Thresholds))
	for i, th := range out.Thresholds {
		out.values[i] = ThresholdValue(th, value)
	}
	return out, true
}

// thresholdValue is ThresholdValue of l's threshold i.
func (l Limit) thresholdValue(i int) ledger.Total {
	if l.values != nil {
		return l.values[i]
	}
	return ThresholdValue(l.Thresholds[i], l.Value)
}

// Resolve returns the limit in force on day; ok is false when neither the
// customer's plan nor an override limits the meter. assignments are the
// customer's, overrides the customer's by meter, oldest first (those of
// other meters are passed over).
func (p *Policy) Resolve(customer, meter string, day pricing.Date, assignments []schema.PlanAssignment, overrides []schema.LimitOverride) (Limit, bool) {
	var l Limit
	found := false
	if v := p.versionOn(customer, day, assignments); v != nil {
		if pl := v.LimitOf(meter); pl != nil {
			var ok bool
			if l, ok = p.limits[pl]; !ok {
				l, ok = planLimit(v, pl)
			}
			found = ok
		}
	}
	for i := len(overrides) - 1; i >= 0; i-- { // the latest in force: by date, then the later recorded
		o := overrides[i]
		if o.Meter != meter || o.EffectiveFrom > string(day) {
			continue
		}
		value, err := ledger.ParseTotal(o.Limit)
		if err != nil {
			continue // InsertOverride refuses such a value; a row edited by hand is verify's business
		}
		l.Value, l.Override, l.values = value, o.ID, nil
		switch {
		case o.Kind != "":
			l.Kind = o.Kind
		case l.Kind == "", l.Kind == LimitCredit: // a quantity replaces a credit limit: hard unless it says
			l.Kind = pricing.LimitHard
		}
		found = true
		break
	}
	return l, found
}

// versionOn is the plan version customer id is on on day (its assignments,
// else the default plan), nil when none.
func (p *Policy) versionOn(id string, day pricing.Date, assignments []schema.PlanAssignment) *pricing.Plan {
	if p == nil || p.Catalog == nil {
		return nil
	}
	as := make([]customer.PlanAssignment, len(assignments))
	for i, a := range assignments {
		as[i] = customer.PlanAssignment{ID: a.ID, Customer: a.CustomerID, Plan: a.Plan, EffectiveFrom: pricing.Date(a.EffectiveFrom)}
	}
	name, _ := customer.NewPlans(p.DefaultPlan, as).On(id, day)
	if name == "" {
		return nil
	}
	v, err := p.Catalog.Version(name, day)
	if err != nil {
		return nil
	}
	return v
}

// ThresholdValue is the quantity a threshold stands for under limit l: an
// absolute threshold as written, a percentage of the limit rounded up to a
// micro-unit (so usage has really reached the percentage when it fires).
func ThresholdValue(t pricing.Threshold, l ledger.Total) ledger.Total {
	if !t.Percent {
		v, _ := ledger.ParseTotal(t.Value.String())
		return v
	}
	pct, ok := new(big.Rat).SetString(t.Value.String())
	if !ok {
		return l
	}
	r := new(big.Rat).Mul(new(big.Rat).SetInt(l.Micro()), pct)
	r.Quo(r, big.NewRat(100, 1))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return ledger.TotalOfMicro(q)
}

// Allowed is the entitlement's answer: a hard limit allows usage while it is
// below the limit, so the answer turns false at exactly the limit; a soft
// limit always allows.
func (l Limit) Allowed(used ledger.Total) bool {
	return l.Kind == pricing.LimitSoft || used.Cmp(l.Value) < 0
}

// Remaining is what is left under the limit, never below zero.
func (l Limit) Remaining(used ledger.Total) ledger.Total {
	r := l.Value.Minus(used)
	if r.Sign() < 0 {
		return ledger.Total{}
	}
	return r
}

// Day is the calendar day of instant ms in loc, as plan dates are written.
func Day(ms int64, loc *time.Location) pricing.Date {
	return pricing.Date(time.UnixMilli(ms).In(loc).Format(time.DateOnly))
}
