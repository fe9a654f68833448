package pricing

import (
	"fmt"
	"strings"
)

// Limit is a plan version's limit on one meter's usage per period
// (entitlements, issue 28): a quantity, whether reaching it blocks (hard) or
// only warns (soft), and the thresholds that raise an alert when usage
// crosses them. It is no part of the price snapshot: an invoice's amounts
// never depend on it.
type Limit struct {
	Meter  string   `yaml:"meter"`
	Limit  Decimal  `yaml:"limit"`
	Period string   `yaml:"period"` // month (the only period so far; the default)
	Kind   string   `yaml:"kind"`   // hard (the default) or soft
	Alerts []string `yaml:"alerts"` // "80%" of the limit, or an absolute quantity "5000"
}

// Limit kinds.
const (
	LimitHard = "hard" // allowed turns false when usage reaches the limit
	LimitSoft = "soft" // allowed stays true; thresholds still alert
)

// PeriodMonth is the calendar month, in the zone invoices are closed in.
const PeriodMonth = "month"

// Threshold is one alert threshold of a limit: Percent of the limit, or an
// absolute quantity (Percent false).
type Threshold struct {
	Spelling string  // as configured, the threshold's name in alerts: "80%", "5000"
	Percent  bool    // Value is a percentage of the limit
	Value    Decimal // the percentage, or the quantity
}

// ParseThreshold reads "80%" or "5000".
func ParseThreshold(s string) (Threshold, error) {
	return parseThreshold(s, `a positive quantity ("5000")`)
}

// parseThreshold is ParseThreshold, whose error names what other than a
// percentage a threshold may be.
func parseThreshold(s, other string) (Threshold, error) {
	t := Threshold{Spelling: strings.TrimSpace(s)}
	num := t.Spelling
	if p, ok := strings.CutSuffix(num, "%"); ok {
		t.Percent, num = true, strings.TrimSpace(p)
	}
	d, err := ParseDecimal(num)
	if err != nil || d.Sign() <= 0 {
		return Threshold{}, fmt.Errorf("%q is not a threshold: use a percentage of the limit (\"80%%\") or %s", clip(s), other)
	}
	t.Value = d
	return t, nil
}

// Validate checks l and fills its defaults. The error starts with the key
// it concerns.
func (l *Limit) Validate() error {
	if l.Meter == "" {
		return fmt.Errorf("meter: required")
	}
	if err := l.Limit.Check(); err != nil {
		return fmt.Errorf("limit: %v", err)
	}
	if l.Limit.Sign() < 0 {
		return fmt.Errorf("limit: must not be negative")
	}
	switch l.Period {
	case "":
		l.Period = PeriodMonth
	case PeriodMonth:
	default:
		return fmt.Errorf("period: %q is not a period (month)", clip(l.Period))
	}
	switch l.Kind {
	case "":
		l.Kind = LimitHard
	case LimitHard, LimitSoft:
	default:
		return fmt.Errorf("kind: %q is not hard or soft", clip(l.Kind))
	}
	seen := map[string]bool{}
	for i, a := range l.Alerts {
		t, err := ParseThreshold(a)
		if err != nil {
			return fmt.Errorf("alerts[%d]: %v", i, err)
		}
		if seen[t.Spelling] {
			return fmt.Errorf("alerts[%d]: %q is listed twice", i, t.Spelling)
		}
		seen[t.Spelling] = true
	}
	return nil
}

// Thresholds parses l's alerts (Validate has checked them).
func (l *Limit) Thresholds() []Threshold { return thresholds(l.Alerts) }

// thresholds parses alerts that Validate has checked.
func thresholds(alerts []string) []Threshold {
	ts := make([]Threshold, 0, len(alerts))
	for _, a := range alerts {
		if t, err := ParseThreshold(a); err == nil {
			ts = append(ts, t)
		}
	}
	return ts
}

// LimitOf returns the version's limit on meter, or nil.
func (p *Plan) LimitOf(meter string) *Limit {
	for i := range p.Limits {
		if p.Limits[i].Meter == meter {
			return &p.Limits[i]
		}
	}
	return nil
}
