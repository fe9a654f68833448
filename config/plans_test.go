package config

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/pricing"
)

const plansMeters = meterProvider + `meters:
  - name: api_requests
  - name: seats
    aggregation: max
  - name: storage_bytes
    aggregation: max
  - name: exports
`

// The shape of the prices issue, as written there: numbers plain or
// quoted, flow mappings, a later version of the same plan.
func TestPlansParse(t *testing.T) {
	c, err := Parse([]byte(plansMeters+`plans:
  - name: pro
    currency: USD
    effective_from: 2026-01-01
    fee: "29.00"
    minimum: "50.00"
    prices:
      - {meter: api_requests, model: graduated, tiers: [{up_to: 1000, unit: "0"}, {up_to: 100000, unit: "0.001"}, {unit: "0.0005"}]}
      - {meter: seats, model: volume, tiers: [{up_to: 10, unit: "8"}, {unit: "6", flat: "10"}]}
      - {meter: storage_bytes, model: unit, unit: "0.000000000023"}
      - {meter: exports, model: package, size: 100, amount: "5.00", free: 100}
  - name: pro
    currency: USD
    effective_from: 2026-07-01
    fee: 39.00
    prices:
      - {meter: api_requests, model: unit, unit: 0.0000000001}
customers:
  default_plan: pro
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v1, err := c.Catalog.Version("pro", "2026-03-01")
	if err != nil {
		t.Fatal(err)
	}
	charge, err := v1.Price("api_requests").Charge(pricing.MustDecimal("1234567"))
	if err != nil {
		t.Fatal(err)
	}
	if charge.Amount.String() != "666.2835" {
		t.Errorf("graduated charge %s, want 666.2835", charge.Amount)
	}
	charge, err = v1.Price("exports").Charge(pricing.MustDecimal("201"))
	if err != nil {
		t.Fatal(err)
	}
	if charge.Amount.String() != "10.00" {
		t.Errorf("package charge %s, want 10.00", charge.Amount)
	}
	v2, err := c.Catalog.Version("pro", "2026-07-01")
	if err != nil {
		t.Fatal(err)
	}
	// An unquoted YAML number keeps every digit it was written with: no
	// float on the way.
	if v2.Fee.String() != "39.00" || v2.Price("api_requests").Unit.String() != "0.0000000001" {
		t.Errorf("v2 fee %s unit %s", v2.Fee, v2.Price("api_requests").Unit)
	}
	if c.Customers.DefaultPlan != "pro" {
		t.Errorf("default plan %q", c.Customers.DefaultPlan)
	}
}

func TestPlansRefused(t *testing.T) {
	plan := func(body string) string {
		return plansMeters + "plans:\n  - name: pro\n    currency: USD\n    effective_from: 2026-01-01\n" + body
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"undeclared meter", plan("    prices:\n      - {meter: api_request, model: unit, unit: \"1\"}\n"),
			`17: plans[0].prices[0].meter: meter "api_request" is not declared under meters`},
		{"tiers out of order", plan("    prices:\n      - meter: seats\n        model: volume\n        tiers:\n          - {up_to: 10, unit: \"8\"}\n          - {up_to: 5, unit: \"8\"}\n          - {unit: \"6\"}\n"),
			"21: plans[0].prices[0].tiers[1].up_to: 5 is not above the previous tier's 10"},
		{"unknown currency", strings.Replace(plan(""), "USD", "XYZ", 1), `14: plans[0].currency: "XYZ" is not a known ISO 4217 currency`},
		{"13 decimal places", plan("    prices:\n      - {meter: storage_bytes, model: unit, unit: \"0.0000000000231\"}\n"),
			"17: plans[0].prices[0].unit: 0.0000000000231 has 13 decimal places, more than 12"},
		{"a float-looking exponent", plan("    prices:\n      - {meter: storage_bytes, model: unit, unit: 2.3e-11}\n"),
			`plans[0].prices[0].unit: "2.3e-11" is not a decimal number`},
		{"unknown key", plan("    prices:\n      - {meter: seats, model: unit, unit: \"1\", tier: []}\n"), "tier"},
		{"default plan not declared", plan("customers:\n  default_plan: enterprise\n"),
			`customers.default_plan: no plan named "enterprise" under plans`},
		{"two versions on one date", plan("  - name: pro\n    currency: USD\n    effective_from: 2026-01-01\n"),
			"plans: plan \"pro\" has two versions effective from 2026-01-01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}
