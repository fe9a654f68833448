package config

import (
	"fmt"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"

	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// Credits is the credits section: what hookledger watches of prepaid
// credit (docs/entitlements.md, "Credits in checks and alerts"). Grants
// themselves are made with `credits grant`, not configured.
type Credits struct {
	Alerts CreditAlerts `yaml:"alerts"`
}

// CreditAlerts are the credit alerts; none by default. Each fires once per
// grant and threshold, in the transaction of the usage row whose draw (the
// open month's spend, drawn from the customer's grants in the burn order)
// takes the grant's available credit to it.
type CreditAlerts struct {
	// BalanceLow fires credits.balance_low when a grant's available credit
	// is at or below a threshold: a percentage of the grant's amount
	// ("25%", above 0 and at most 100) or an amount in its currency
	// ("10.00"). Default none.
	BalanceLow []string `yaml:"balance_low"`
	// Depleted fires credits.depleted when a grant's available credit
	// reaches zero. Default false.
	Depleted bool `yaml:"depleted"`

	// Thresholds are BalanceLow, parsed (set by resolve).
	Thresholds []pricing.Threshold `yaml:"-"`
}

// CreditAlerts are the credit alerts as the writer decides them
// (entitle.Policy.CreditAlerts).
func (c *Config) CreditAlerts() entitle.CreditAlerts {
	return entitle.CreditAlerts{BalanceLow: c.Credits.Alerts.Thresholds, Depleted: c.Credits.Alerts.Depleted}
}

// maxThreshold bounds an amount threshold, as pricing bounds every
// configured value.
var maxThreshold = pricing.MustDecimal("1000000000000000")

// creditLimit is a plan version's limit of kind credit, set aside while
// pricing validates the version's other limits (pricing.Limit knows hard
// and soft only) and checked by resolveCredits.
type creditLimit struct {
	plan, index int // plans[plan].limits[index]
	limit       pricing.Limit
}

// noteCreditLimitValues records which limits of kind credit the file gives
// a `limit:` (a zero Decimal cannot tell `limit: 0` from none), so that
// resolveCredits can refuse it.
func (c *Config) noteCreditLimitValues(file *ast.File) {
	for i, p := range c.Plans {
		for j, l := range p.Limits {
			if l.Kind != entitle.LimitCredit {
				continue
			}
			yp, err := yaml.PathString(fmt.Sprintf("$.plans[%d].limits[%d].limit", i, j))
			if err != nil {
				continue
			}
			if n, err := yp.FilterFile(file); err == nil && n != nil {
				if c.creditLimitValues == nil {
					c.creditLimitValues = map[[2]int]bool{}
				}
				c.creditLimitValues[[2]int{i, j}] = true
			}
		}
	}
}

// setAsideCreditLimits takes the limits of kind credit out of the plans
// before pricing validates them (resolvePlans); resolveCredits puts them
// back where they were and checks them.
func (c *Config) setAsideCreditLimits(string) error {
	for i := range c.Plans {
		p := &c.Plans[i]
		kept := p.Limits[:0:0]
		for j, l := range p.Limits {
			if l.Kind == entitle.LimitCredit {
				c.creditLimits = append(c.creditLimits, creditLimit{plan: i, index: j, limit: l})
				continue
			}
			kept = append(kept, l)
		}
		if len(kept) < len(p.Limits) {
			p.Limits = kept
		}
	}
	return nil
}

// resolveCredits puts the limits of kind credit back into their plan
// versions, checks them, and checks the credits section.
func (c *Config) resolveCredits(string) error {
	aggregation := map[string]ledger.Aggregation{}
	for _, m := range c.Meters {
		aggregation[m.Name] = m.Aggregation
	}
	for _, cl := range c.creditLimits {
		p := &c.Plans[cl.plan]
		p.Limits = append(p.Limits, pricing.Limit{})
		copy(p.Limits[cl.index+1:], p.Limits[cl.index:])
		p.Limits[cl.index] = cl.limit
	}
	for _, cl := range c.creditLimits {
		if err := c.checkCreditLimit(cl, aggregation); err != nil {
			return err
		}
	}
	c.creditLimits = nil
	return c.resolveCreditAlerts(aggregation)
}

// checkCreditLimit checks one limit of kind credit: no value and no
// alerts; a meter the version prices; a version whose spend can be priced
// from the month's totals, as a spend section's must.
func (c *Config) checkCreditLimit(cl creditLimit, aggregation map[string]ledger.Aggregation) error {
	at := fmt.Sprintf("plans[%d].limits[%d]", cl.plan, cl.index)
	p, l := &c.Plans[cl.plan], &c.Plans[cl.plan].Limits[cl.index]
	switch {
	case c.creditLimitValues[[2]int{cl.plan, cl.index}] || l.Limit.Sign() != 0 || l.Limit.Check() != nil:
		return errAt(at+".limit", "a limit of kind credit has no value: it allows usage while the customer's credit covers the month's spend (drop limit, or make the limit hard or soft)")
	case len(l.Alerts) > 0:
		return errAt(at+".alerts", "a limit of kind credit takes no alerts: credits.alerts (balance_low, depleted) alert on credit")
	case l.Meter == "":
		return errAt(at+".meter", "required")
	}
	switch l.Period {
	case "":
		l.Period = pricing.PeriodMonth
	case pricing.PeriodMonth:
	default:
		return errAt(at+".period", "%q is not a period (month)", l.Period)
	}
	if _, ok := aggregation[l.Meter]; !ok {
		return errAt(at+".meter", "meter %q is not declared under meters (declare it to limit it)", l.Meter)
	}
	for j := range p.Limits {
		if j != cl.index && p.Limits[j].Meter == l.Meter {
			return errAt(at+".meter", "meter %q is limited twice in this version", l.Meter)
		}
	}
	if p.Price(l.Meter) == nil {
		return errAt(at+".meter", "plan %q from %s does not price meter %q: a limit of kind credit allows usage while credit covers the month's spend, which this meter adds nothing to (price it, or limit it by quantity)",
			p.Name, p.EffectiveFrom, l.Meter)
	}
	return spendFromTotals(fmt.Sprintf("plans[%d]", cl.plan), p, aggregation, "a limit of kind credit")
}

// resolveCreditAlerts checks credits.alerts and parses its thresholds.
// Alerts draw every customer's month's spend from its plan version's
// priced meters' month totals, as spend does: every version must allow it.
func (c *Config) resolveCreditAlerts(aggregation map[string]ledger.Aggregation) error {
	a := &c.Credits.Alerts
	a.Thresholds = nil
	finest, plans := 0, false
	for i := range c.Plans {
		finest, plans = max(finest, c.Plans[i].CurrencyOf().Decimals()), true
	}
	seen := map[string]bool{}
	for i, s := range a.BalanceLow {
		at := fmt.Sprintf("credits.alerts.balance_low[%d]", i)
		t, err := pricing.ParseThreshold(s)
		if err != nil {
			return errAt(at, "%q is not a threshold: a percentage of a grant's amount (\"25%%\") or an amount in its currency (\"10.00\")", s)
		}
		switch {
		case seen[t.Spelling]:
			return errAt(at, "%q is listed twice", t.Spelling)
		case t.Percent && t.Value.Cmp(pricing.NewDecimal(100, 0)) > 0:
			return errAt(at, "%q is more than a grant's whole amount: at most \"100%%\"", t.Spelling)
		case !t.Percent && t.Value.Cmp(maxThreshold) >= 0:
			return errAt(at, "%s is not below 10^15", t.Value)
		case !t.Percent && plans && t.Value.Decimals() > finest:
			return errAt(at, "%s has %d decimal places; the plans' currencies have at most %d (a grant draws only in its plan's currency)",
				t.Value, t.Value.Decimals(), finest)
		}
		seen[t.Spelling] = true
		a.Thresholds = append(a.Thresholds, t)
	}
	if len(a.Thresholds) == 0 && !a.Depleted {
		return nil
	}
	for i := range c.Plans {
		if err := spendFromTotals(fmt.Sprintf("plans[%d]", i), &c.Plans[i], aggregation, "credits.alerts"); err != nil {
			return err
		}
	}
	return nil
}

// spendFromTotals checks that version p's spend can be priced from the
// usage state (spendPriceable, the spend section's rule), for what, which
// needs it, naming the price at fault.
func spendFromTotals(at string, p *pricing.Plan, aggregation map[string]ledger.Aggregation, what string) error {
	for j := range p.Prices {
		pr := &p.Prices[j]
		switch spendPriceable(pr, aggregation[pr.Meter]) {
		case "meter":
			return errAt(fmt.Sprintf("%s.prices[%d].meter", at, j), "meter %q aggregates by %s: with %s, a plan version prices only sum meters (its spend is priced from each meter's month total)",
				pr.Meter, aggregation[pr.Meter], what)
		case "by":
			return errAt(fmt.Sprintf("%s.prices[%d].by", at, j), "with %s, a plan version cannot price meter %q by %s: its spend is priced from each meter's month total, not each value's",
				what, pr.Meter, pr.By)
		}
	}
	return nil
}
