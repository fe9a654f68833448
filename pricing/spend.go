package pricing

import (
	"fmt"
)

// Spend is a plan version's spend section (entitlements, issue 28): an
// optional cap on what a customer spends in a month, in the plan's
// currency, and the thresholds that raise an alert when spend crosses them
// ("tell sales when an account passes $1,000 this month"). Like Limits it
// is no part of the price snapshot: an invoice's amounts never depend on it.
//
// Spend is what the invoice of the month would charge so far before the
// minimum's true-up: the fee plus each priced meter's amount on its
// month's total, each rounded once, as the invoice rounds its lines
// (Plan.Spent). A minimum is a floor on the invoice, not money spent.
type Spend struct {
	Limit  *Decimal `yaml:"limit"`  // the cap; none: alerts only
	Period string   `yaml:"period"` // month (the only period; the default)
	Kind   string   `yaml:"kind"`   // hard (the default) or soft; only with a limit
	Alerts []string `yaml:"alerts"` // "80%" of the limit, or an amount "500.00"
}

// Validate checks s against the plan's currency and fills its defaults.
// The error starts with the key it concerns ("alerts[1]: ...").
func (s *Spend) Validate(cur Currency) error {
	if s.Limit != nil {
		if err := s.Limit.checkConfigured(cur.Decimals()); err != nil {
			return fmt.Errorf("limit: %v (an amount in %s, which has %d decimals)", err, cur, cur.Decimals())
		}
	}
	switch s.Period {
	case "":
		s.Period = PeriodMonth
	case PeriodMonth:
	default:
		return fmt.Errorf("period: %q is not a period (month)", clip(s.Period))
	}
	switch {
	case s.Kind != "" && s.Limit == nil:
		return fmt.Errorf("kind: a kind needs a limit (spend: {limit: \"1000.00\", kind: %s})", clip(s.Kind))
	case s.Kind == "" && s.Limit != nil:
		s.Kind = LimitHard
	case s.Kind == "", s.Kind == LimitHard, s.Kind == LimitSoft:
	default:
		return fmt.Errorf("kind: %q is not hard or soft", clip(s.Kind))
	}
	if s.Limit == nil && len(s.Alerts) == 0 {
		return fmt.Errorf("limit: a spend section needs a limit, alerts, or both")
	}
	seen := map[string]bool{}
	for i, a := range s.Alerts {
		t, err := parseThreshold(a, `a positive amount ("500.00")`)
		if err != nil {
			return fmt.Errorf("alerts[%d]: %v", i, err)
		}
		if seen[t.Spelling] {
			return fmt.Errorf("alerts[%d]: %q is listed twice", i, t.Spelling)
		}
		seen[t.Spelling] = true
		switch {
		case t.Percent && s.Limit == nil:
			return fmt.Errorf("alerts[%d]: %q is a percentage of the limit, and this spend section has none", i, t.Spelling)
		case !t.Percent:
			if err := t.Value.checkConfigured(cur.Decimals()); err != nil {
				return fmt.Errorf("alerts[%d]: %v (an amount in %s, which has %d decimals)", i, err, cur, cur.Decimals())
			}
		}
	}
	return nil
}

// Thresholds parses s's alerts (Validate has checked them).
func (s *Spend) Thresholds() []Threshold { return thresholds(s.Alerts) }

// SpendThreshold is the amount a threshold stands for under limit (nil:
// none), in currency cur: an amount as written, a percentage of the limit
// exactly (80% of 999.99 is 799.992: spend, in whole minor units, reaches it
// at 800.00). It is written with the currency's places when it is whole
// minor units ("800.00"), else with no trailing zeros.
func SpendThreshold(t Threshold, limit *Decimal, cur Currency) (Decimal, error) {
	v := t.Value
	if t.Percent {
		if limit == nil {
			return Decimal{}, fmt.Errorf("threshold %s: a percentage needs a limit", t.Spelling)
		}
		x, err := mul(*limit, t.Value)
		if err != nil {
			return Decimal{}, err
		}
		if v, err = mul(x, NewDecimal(1, -2)); err != nil {
			return Decimal{}, err
		}
	}
	if w, err := cur.places(v); err == nil {
		return w, nil
	}
	var r Decimal
	r.d.Reduce(&v.d)
	return r, nil
}

// Spending is what a customer has spent in a period so far under one plan
// version (Plan.Spent).
type Spending struct {
	Currency string      `json:"currency"`
	Fee      Decimal     `json:"fee"`
	Lines    []SpendLine `json:"lines"`
	Total    Decimal     `json:"total"` // fee + the lines' amounts; no minimum true-up
}

// SpendLine is one priced meter's share of a Spending.
type SpendLine struct {
	Meter    string  `json:"meter"`
	Quantity Decimal `json:"quantity"`
	Amount   Decimal `json:"amount"` // rounded, as the invoice line
}

// Spent is what the month's invoice under p would charge so far, before
// the minimum's true-up: the fee, plus each price's amount on its meter's
// period total (totals, by meter; a meter without one has used nothing),
// each rounded once to the currency as the invoice rounds its lines. It is
// exact and pure: the writer decides spend thresholds with it, the
// entitlement check, the console and verify recompute with it.
func (p *Plan) Spent(totals map[string]Decimal) (Spending, error) {
	s := Spending{Currency: p.cur.String(), Lines: make([]SpendLine, 0, len(p.Prices))}
	var fee Decimal
	if p.Fee != nil {
		fee = *p.Fee
	}
	var err error
	if s.Fee, err = p.cur.places(fee); err != nil {
		return Spending{}, err
	}
	s.Total = s.Fee
	for i := range p.Prices {
		pr := &p.Prices[i]
		q := totals[pr.Meter]
		a, err := meterSpend(pr, q, p.cur)
		if err != nil {
			return Spending{}, err
		}
		s.Lines = append(s.Lines, SpendLine{Meter: pr.Meter, Quantity: q, Amount: a})
		if s.Total, err = add(s.Total, a); err != nil {
			return Spending{}, err
		}
	}
	if s.Total, err = p.cur.places(s.Total); err != nil { // a sum of whole minor units: nothing rounds
		return Spending{}, err
	}
	return s, nil
}

// meterSpend is the rounded amount price pr makes of its meter's period
// total, as the period's invoice line does (the margin from zero, rounded
// once, half-even). It is the one place spend reads a price: a price that
// varies by a dimension's value would need the period's total per value
// here, which the usage state (one total per customer, meter and month)
// does not keep.
func meterSpend(pr *Price, total Decimal, cur Currency) (Decimal, error) {
	c, err := pr.Charge(total)
	if err != nil {
		return Decimal{}, err
	}
	return cur.Round(c.Amount)
}
