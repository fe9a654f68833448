package config

import (
	"encoding/json"
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
    unpriced: free
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

// tokensMeters declares a per-model token meter, its mapping extracting the
// model, for prices by dimension.
const tokensMeters = meterProvider + `meters:
  - name: tokens
    dimensions: [model, region]
  - name: api_requests
usage:
  - type: t
    customer: data.customer
    meter: {value: tokens}
    quantity: data.tokens
    properties: {model: data.model, region: data.region}
`

// A price by dimension: a card per model and a default, each card a price
// of its own; the snapshot of a plan without one is what it was before.
func TestPricesByDimensionParse(t *testing.T) {
	c, err := Parse([]byte(tokensMeters+`plans:
  - name: ai
    currency: USD
    effective_from: 2026-01-01
    prices:
      - meter: tokens
        by: model
        rates:
          gpt-4o: {model: unit, unit: "0.00001"}
          gpt-4o-mini: {model: graduated, tiers: [{up_to: 100000, unit: "0.000001"}, {unit: "0.0000005"}]}
        default: {model: unit, unit: "0.00002"}
      - {meter: api_requests, model: unit, unit: "0.01"}
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Catalog.Version("ai", "2026-03-01")
	if err != nil {
		t.Fatal(err)
	}
	p := v.Price("tokens")
	for value, want := range map[string]string{"gpt-4o": "15.00000", "gpt-4o-mini": "0.1500000", "llama-3": "30.00000"} {
		charge, err := p.Card(value).Charge(pricing.MustDecimal("1500000"))
		if value == "gpt-4o-mini" {
			// 100,000 × 0.000001 + 1,400,000 × 0.0000005 = 0.1 + 0.7
			want = "0.8000000"
		}
		if err != nil || charge.Amount.String() != want {
			t.Errorf("%s: 1,500,000 tokens charge %s (%v), want %s", value, charge.Amount, err, want)
		}
	}
	snap, _, err := v.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(snap), `"by":"model","rates":{"gpt-4o":{"meter":"tokens","model":"unit","unit":"0.00001"}`) {
		t.Errorf("snapshot: %s", snap)
	}
	if api, _ := json.Marshal(v.Price("api_requests")); string(api) != `{"meter":"api_requests","model":"unit","unit":"0.01"}` {
		t.Errorf("a price without a dimension marshals as %s", api)
	}
}

func TestPricesByDimensionRefused(t *testing.T) {
	plan := func(price string) string {
		return tokensMeters + "plans:\n  - name: ai\n    currency: USD\n    effective_from: 2026-01-01\n    prices:\n" + price
	}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"undeclared dimension", plan("      - meter: tokens\n        by: modle\n        default: {model: unit, unit: \"1\"}\n"),
			`21: plans[0].prices[0].by: "modle" is not a dimension of meter "tokens" (it declares model, region`},
		{"a meter without dimensions", plan("      - meter: api_requests\n        by: model\n        default: {model: unit, unit: \"1\"}\n"),
			`21: plans[0].prices[0].by: "model" is not a dimension of meter "api_requests" (it declares none`},
		{"a card with a bad model", plan("      - meter: tokens\n        by: model\n        rates:\n          gpt-4o: {model: flat, unit: \"1\"}\n"),
			`plans[0].prices[0].rates.gpt-4o.model: "flat" is not one of unit, graduated, volume, package`},
		{"a card missing its unit", plan("      - meter: tokens\n        by: model\n        rates:\n          gpt-4o: {model: unit}\n"),
			`plans[0].prices[0].rates.gpt-4o.unit: a unit price needs unit`},
		{"a bad default", plan("      - meter: tokens\n        by: model\n        default: {model: graduated, tiers: [{up_to: 10, unit: \"1\"}]}\n"),
			`plans[0].prices[0].default.tiers[0].up_to: the last tier takes every quantity`},
		{"a model beside by", plan("      - meter: tokens\n        by: model\n        model: unit\n        unit: \"1\"\n        default: {model: unit, unit: \"1\"}\n"),
			`plans[0].prices[0].model: a price by model takes its model in each rate card`},
		{"no card at all", plan("      - meter: tokens\n        by: model\n"),
			`plans[0].prices[0].rates: a price by model needs a rate card per value`},
		{"cards without by", plan("      - meter: tokens\n        model: unit\n        unit: \"1\"\n        rates:\n          gpt-4o: {model: unit, unit: \"1\"}\n"),
			`plans[0].prices[0].rates: rate cards need by`},
		{"a card by a dimension", plan("      - meter: tokens\n        by: model\n        rates:\n          gpt-4o: {by: region, default: {model: unit, unit: \"1\"}}\n"),
			`plans[0].prices[0].rates.gpt-4o: a rate card is priced by one model`},
		{"spend on a version priced by dimension", plan("      - meter: tokens\n        by: model\n        default: {model: unit, unit: \"1\"}\n    spend: {limit: \"100.00\"}\n"),
			`21: plans[0].prices[0].by: a plan version with spend cannot price meter "tokens" by model yet`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), t.TempDir())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v\nwant it to contain %q", err, tc.want)
			}
		})
	}
}

// A version that prices some meters must price every declared one or say
// its other usage is free: a meter left out by mistake is refused at
// startup, naming the plan and the meter, instead of billing 0.00.
func TestPlanLeavingAMeterUnpricedIsRefused(t *testing.T) {
	version := func(extra string) string {
		return plansMeters + "plans:\n  - name: pro\n    currency: USD\n    effective_from: 2026-01-01\n" + extra +
			"    prices:\n      - {meter: api_requests, model: unit, unit: \"0.01\"}\n"
	}
	_, err := Parse([]byte(version("")), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), `plans[0].prices: plan "pro" from 2026-01-01 has no price for meter "seats"`) ||
		!strings.Contains(err.Error(), "unpriced: free") {
		t.Errorf("a version leaving seats unpriced: %v", err)
	}
	c, err := Parse([]byte(version("    unpriced: free\n")), t.TempDir())
	if err != nil {
		t.Fatalf("unpriced: free: %v", err)
	}
	if v, err := c.Catalog.Version("pro", "2026-02-01"); err != nil || !v.BillsUnpricedFree() {
		t.Errorf("unpriced: free read as %+v, %v", v, err)
	}
	if _, err := Parse([]byte(version("    unpriced: refuse\n")), t.TempDir()); err == nil || !strings.Contains(err.Error(), `no price for meter "seats"`) {
		t.Errorf("unpriced: refuse: %v", err)
	}
	if _, err := Parse([]byte(version("    unpriced: zero\n")), t.TempDir()); err == nil || !strings.Contains(err.Error(), `16: plans[0].unpriced: "zero" is not free or refuse`) {
		t.Errorf("unpriced: zero: %v", err)
	}
	// A version without prices (limits only) prices nothing: not refused.
	if _, err := Parse([]byte(plansMeters+"plans:\n  - {name: free, currency: USD, effective_from: 2026-01-01, limits: [{meter: api_requests, limit: 100}]}\n"), t.TempDir()); err != nil {
		t.Errorf("a version with limits only: %v", err)
	}
}

// Decimals are read from their YAML nodes: anchors and aliases to a value
// or to a list of tiers resolve as the library resolves them.
func TestPlanDecimalsThroughAliases(t *testing.T) {
	c, err := Parse([]byte(meterProvider+`meters:
  - name: api
plans:
  - {name: a, currency: USD, effective_from: 2026-01-01, fee: &fee "10.00",
     prices: [{meter: api, model: graduated, tiers: &std [{up_to: 1000, unit: "0"}, {unit: &u 0.0005}]}]}
  - {name: b, currency: USD, effective_from: 2026-01-01, fee: *fee, prices: [{meter: api, model: graduated, tiers: *std}]}
  - {name: c, currency: USD, effective_from: 2026-01-01, prices: [{meter: api, model: unit, unit: *u}]}
`), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Catalog.Version("b", "2026-02-01")
	if err != nil || b.Fee.String() != "10.00" || b.Price("api").Tiers[1].Unit.String() != "0.0005" {
		t.Errorf("plan b through aliases: %+v %v", b, err)
	}
	if v, err := c.Catalog.Version("c", "2026-02-01"); err != nil || v.Price("api").Unit.String() != "0.0005" {
		t.Errorf("plan c's unit through an alias: %v", err)
	}
}
