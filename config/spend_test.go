package config

import (
	"strings"
	"testing"
)

// A plan's spend section: parsed exactly, and every error names its line
// and key.
func TestSpendErrorsNameLineAndKey(t *testing.T) {
	plan := func(body string) string {
		return plansMeters + "plans:\n  - name: pro\n    currency: USD\n    effective_from: 2026-01-01\n    unpriced: free\n" +
			"    prices:\n      - {meter: api_requests, model: unit, unit: \"0.01\"}\n" + body
	}
	c, err := Parse([]byte(plan("    spend: {limit: \"1000.00\", alerts: [\"80%\", \"500.00\"]}\n")), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Catalog.Version("pro", "2026-02-01")
	if err != nil || v.Spend == nil || v.Spend.Limit.String() != "1000.00" || v.Spend.Kind != "hard" || len(v.Spend.Thresholds()) != 2 {
		t.Fatalf("spend %+v %v", v.Spend, err)
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"too many decimals", plan("    spend:\n      limit: \"1000.001\"\n"),
			"20: plans[0].spend.limit: 1000.001 has 3 decimal places, more than 2"},
		{"percentage without a limit", plan("    spend:\n      alerts: [\"500.00\", \"80%\"]\n"),
			`20: plans[0].spend.alerts[1]: "80%" is a percentage of the limit, and this spend section has none`},
		{"kind", plan("    spend:\n      limit: \"10.00\"\n      kind: firm\n"),
			`21: plans[0].spend.kind: "firm" is not hard or soft`},
		{"unknown key", plan("    spend:\n      limit: \"10.00\"\n      alert: [\"5.00\"]\n"),
			`21: plans[0].spend.alert: unknown field (did you mean "alerts"?)`},
		{"a priced max meter", plan("      - {meter: seats, model: unit, unit: \"8\"}\n    spend:\n      limit: \"10.00\"\n"),
			`19: plans[0].prices[1].meter: meter "seats" aggregates by max: a plan version with spend prices only sum meters`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
