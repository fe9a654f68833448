package config

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/entitle"
)

// creditPlans declares a sum meter priced by a plan "credit", a max meter
// it leaves free, and the plan's limits (body, under limits:).
func creditPlans(limits string) string {
	return meterProvider + `meters:
  - name: api_requests
  - name: exports
  - name: seats
    aggregation: max
plans:
  - name: credit
    currency: USD
    effective_from: 2026-01-01
    unpriced: free
    prices:
      - {meter: api_requests, model: unit, unit: "0.01"}
      - {meter: exports, model: unit, unit: "1.00"}
    limits:
` + limits
}

// The credits section and a limit of kind credit, parsed: the credit limit
// keeps its place among the version's limits, with no value; the alerts'
// thresholds are parsed; without the section there are none.
func TestCreditsParse(t *testing.T) {
	c, err := Parse([]byte(creditPlans("      - {meter: exports, limit: 10, alerts: [\"80%\"]}\n      - {meter: api_requests, kind: credit}\n")+
		"credits:\n  alerts:\n    balance_low: [\"25%\", \"10.00\"]\n    depleted: true\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Catalog.Version("credit", "2026-02-01")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Limits) != 2 || v.Limits[0].Meter != "exports" || v.Limits[0].Kind != "hard" ||
		v.Limits[1].Meter != "api_requests" || v.Limits[1].Kind != entitle.LimitCredit || v.Limits[1].Period != "month" || v.Limits[1].Limit.Sign() != 0 {
		t.Errorf("limits %+v", v.Limits)
	}
	a := c.CreditAlerts()
	if len(a.BalanceLow) != 2 || a.BalanceLow[0].Spelling != "25%" || !a.BalanceLow[0].Percent || a.BalanceLow[1].Value.String() != "10.00" || !a.Depleted {
		t.Errorf("credit alerts %+v", a)
	}
	c, err = Parse([]byte(creditPlans("      - {meter: api_requests, kind: credit}\n")), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if a := c.CreditAlerts(); len(a.BalanceLow) != 0 || a.Depleted {
		t.Errorf("default credit alerts %+v, want none", a)
	}
	// depleted alone, and a section of alerts off, are fine with any meter.
	for _, src := range []string{"credits:\n  alerts:\n    depleted: true\n", "credits:\n  alerts:\n    depleted: false\n"} {
		if _, err := Parse([]byte(creditPlans("      - {meter: exports, limit: 10}\n")+src), t.TempDir()); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

// Every mistake in the credits section or a limit of kind credit names its
// line and key.
func TestCreditErrorsNameLineAndKey(t *testing.T) {
	alerts := func(body string) string {
		return creditPlans("      - {meter: exports, limit: 10}\n") + "credits:\n  alerts:\n" + body
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"not a threshold", alerts("    balance_low: [\"low\"]\n"),
			`22: credits.alerts.balance_low[0]: "low" is not a threshold: a percentage of a grant's amount ("25%") or an amount in its currency ("10.00")`},
		{"zero", alerts("    balance_low: [\"0%\"]\n"),
			`22: credits.alerts.balance_low[0]: "0%" is not a threshold`},
		{"over 100%", alerts("    balance_low: [\"10%\", \"150%\"]\n"),
			`22: credits.alerts.balance_low[1]: "150%" is more than a grant's whole amount: at most "100%"`},
		{"twice", alerts("    balance_low: [\"25%\", \"25%\"]\n"),
			`22: credits.alerts.balance_low[1]: "25%" is listed twice`},
		{"finer than the currencies", alerts("    balance_low: [\"10.001\"]\n"),
			`22: credits.alerts.balance_low[0]: 10.001 has 3 decimal places; the plans' currencies have at most 2`},
		{"too large", alerts("    balance_low: [\"1000000000000000\"]\n"),
			`22: credits.alerts.balance_low[0]: 1000000000000000 is not below 10^15`},
		{"unknown key", alerts("    depleted_at: 0\n"),
			`22: credits.alerts.depleted_at: unknown field`},
		{"depleted not a bool", alerts("    depleted: sometimes\n"),
			`[22:15] cannot unmarshal string into Go struct field Config.Credits of type bool`},
		{"alerts with a priced max meter", strings.Replace(alerts("    depleted: true\n"),
			"      - {meter: exports, model: unit, unit: \"1.00\"}\n", "      - {meter: seats, model: unit, unit: \"8\"}\n", 1),
			`17: plans[0].prices[1].meter: meter "seats" aggregates by max: with credits.alerts, a plan version prices only sum meters (its spend is priced from each meter's month total)`},
		{"credit limit with a value", creditPlans("      - {meter: api_requests, kind: credit, limit: 0}\n"),
			`19: plans[0].limits[0].limit: a limit of kind credit has no value`},
		{"credit limit with alerts", creditPlans("      - {meter: api_requests, kind: credit, alerts: [\"80%\"]}\n"),
			`19: plans[0].limits[0].alerts: a limit of kind credit takes no alerts: credits.alerts (balance_low, depleted) alert on credit`},
		{"credit limit without a meter", creditPlans("      - {kind: credit}\n"),
			`19: plans[0].limits[0].meter: required`},
		{"credit limit of another period", creditPlans("      - {meter: api_requests, kind: credit, period: week}\n"),
			`19: plans[0].limits[0].period: "week" is not a period (month)`},
		{"credit limit on an undeclared meter", creditPlans("      - {meter: tokens, kind: credit}\n"),
			`19: plans[0].limits[0].meter: meter "tokens" is not declared under meters`},
		{"credit limit on an unpriced meter", creditPlans("      - {meter: seats, kind: credit}\n"),
			`19: plans[0].limits[0].meter: plan "credit" from 2026-01-01 does not price meter "seats": a limit of kind credit allows usage while credit covers the month's spend`},
		{"credit limit twice", creditPlans("      - {meter: exports, limit: 10}\n      - {meter: exports, kind: credit}\n"),
			`20: plans[0].limits[1].meter: meter "exports" is limited twice in this version`},
		{"credit limit on a version pricing a max meter", strings.Replace(creditPlans("      - {meter: api_requests, kind: credit}\n"),
			"      - {meter: exports, model: unit, unit: \"1.00\"}\n", "      - {meter: seats, model: unit, unit: \"8\"}\n", 1),
			`17: plans[0].prices[1].meter: meter "seats" aggregates by max: with a limit of kind credit, a plan version prices only sum meters`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// A price by dimension cannot be drawn from the month's totals: credit
// alerts and a credit limit refuse such a version, as spend does.
func TestCreditsRefusePricesByDimension(t *testing.T) {
	plan := func(tail string) string {
		return tokensMeters + `plans:
  - name: ai
    currency: USD
    effective_from: 2026-01-01
    prices:
      - meter: tokens
        by: model
        default: {model: unit, unit: "0.00002"}
      - {meter: api_requests, model: unit, unit: "0.01"}
` + tail
	}
	for _, tc := range []struct{ name, src, want string }{
		{"alerts", plan("credits:\n  alerts:\n    balance_low: [\"25%\"]\n"),
			`plans[0].prices[0].by: with credits.alerts, a plan version cannot price meter "tokens" by model`},
		{"credit limit", plan("    limits:\n      - {meter: api_requests, kind: credit}\n"),
			`plans[0].prices[0].by: with a limit of kind credit, a plan version cannot price meter "tokens" by model`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
