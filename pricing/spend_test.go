package pricing

import (
	"strings"
	"testing"
)

func teamVersion(t *testing.T) *Plan {
	t.Helper()
	p := &Plan{Name: "team", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("29.00"), Minimum: dec("100.00"),
		Prices: []Price{
			{Meter: "api_requests", Model: Graduated, Tiers: []Tier{{UpTo: dec("1000"), Unit: MustDecimal("0")}, {UpTo: dec("100000"), Unit: MustDecimal("0.01")}, {Unit: MustDecimal("0.005")}}},
			{Meter: "exports", Model: Package, Size: dec("100"), Amount: dec("5.00")},
		},
		Spend: &Spend{Limit: dec("1000.00"), Alerts: []string{"500.00", "80%", "33.333%"}}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// Spend is the fee plus each line rounded once, half-even, as the invoice
// rounds its lines, and never the minimum's true-up. Worked by hand.
func TestSpentByHand(t *testing.T) {
	p := teamVersion(t)
	for _, c := range []struct {
		requests, exports string
		want              string
	}{
		{"0", "0", "29.00"},                     // the fee alone: below the 100.00 minimum, which is not spend
		{"1000.5", "0", "29.00"},                // 0.005 rounds half-even to 0.00
		{"1001.5", "0", "29.02"},                // 0.015 rounds half-even to 0.02
		{"48100", "0", "500.00"},                // 471.00 + 29.00
		{"48100", "101", "510.00"},              // two started packages: 10.00
		{"150000", "1", "1274.00"},              // 990.00 + 250.00 + 5.00 + 29.00
		{"98099.9", "0", "1000.00"},             // 970.999 rounds to 971.00
		{"1000000000000", "0", "5000000519.00"}, // 990.00 + 0.005 × 999,999,900,000 + 29.00
	} {
		totals := map[string]Decimal{"api_requests": MustDecimal(c.requests), "exports": MustDecimal(c.exports)}
		s, err := p.Spent(totals)
		if err != nil {
			t.Fatal(err)
		}
		if s.Total.String() != c.want || s.Currency != "USD" || s.Fee.String() != "29.00" || len(s.Lines) != 2 {
			t.Errorf("%s requests, %s exports: %+v, want %s", c.requests, c.exports, s, c.want)
		}
	}
	// A meter without a total has used nothing.
	if s, err := p.Spent(nil); err != nil || s.Total.String() != "29.00" {
		t.Errorf("no totals: %+v %v", s, err)
	}
}

func TestSpendThresholdAmounts(t *testing.T) {
	usd, _ := ParseCurrency("USD")
	for _, c := range []struct {
		threshold, limit, want string
	}{
		{"80%", "1000.00", "800.00"},
		{"80%", "999.99", "799.992"}, // exact: spend (whole cents) reaches it at 800.00
		{"33.333%", "1000.00", "333.33"},
		{"100%", "1000", "1000.00"},
		{"500.00", "1000.00", "500.00"},
		{"500", "", "500.00"},
	} {
		th, err := ParseThreshold(c.threshold)
		if err != nil {
			t.Fatal(err)
		}
		var limit *Decimal
		if c.limit != "" {
			limit = dec(c.limit)
		}
		got, err := SpendThreshold(th, limit, usd)
		if err != nil || got.String() != c.want {
			t.Errorf("%s of %s: %s %v, want %s", c.threshold, c.limit, got, err, c.want)
		}
	}
}

func TestSpendRefused(t *testing.T) {
	for _, c := range []struct {
		spend Spend
		want  string
	}{
		{Spend{}, "spend.limit: a spend section needs a limit, alerts, or both"},
		{Spend{Limit: dec("1000.005")}, "spend.limit: 1000.005 has 3 decimal places, more than 2"},
		{Spend{Limit: dec("-1")}, "spend.limit: -1 is negative"},
		{Spend{Alerts: []string{"80%"}}, `spend.alerts[0]: "80%" is a percentage of the limit, and this spend section has none`},
		{Spend{Alerts: []string{"500.001"}}, "spend.alerts[0]: 500.001 has 3 decimal places, more than 2"},
		{Spend{Alerts: []string{"lots"}}, `spend.alerts[0]: "lots" is not a threshold: use a percentage of the limit ("80%") or a positive amount ("500.00")`},
		{Spend{Limit: dec("10"), Alerts: []string{"5", "5"}}, `spend.alerts[1]: "5" is listed twice`},
		{Spend{Kind: "soft", Alerts: []string{"5"}}, "spend.kind: a kind needs a limit"},
		{Spend{Limit: dec("10"), Kind: "firm"}, `spend.kind: "firm" is not hard or soft`},
		{Spend{Limit: dec("10"), Period: "week"}, `spend.period: "week" is not a period (month)`},
	} {
		sp := c.spend
		p := Plan{Name: "team", Currency: "USD", EffectiveFrom: "2026-01-01", Spend: &sp}
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.spend, err, c.want)
		}
	}
	// The spend section is no part of the snapshot: an invoice's digest
	// does not move when a plan gains one.
	p := teamVersion(t)
	with, _, _ := p.Snapshot()
	p.Spend = nil
	without, _, _ := p.Snapshot()
	if string(with) != string(without) {
		t.Errorf("snapshot with spend %s, without %s", with, without)
	}
	if d := teamVersion(t).Spend; d.Kind != LimitHard || d.Period != PeriodMonth {
		t.Errorf("defaults: %+v", d)
	}
}
