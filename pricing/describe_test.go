package pricing

import (
	"encoding/json"
	"testing"
)

// Each breakdown is what a reader checks by hand; the comment gives the
// sums. The margins go through JSON first, as invoices store them.
func TestMarginDescribe(t *testing.T) {
	graduated := Price{Meter: "api", Model: Graduated, Tiers: []Tier{
		{UpTo: dec("1000"), Unit: MustDecimal("0")}, {UpTo: dec("100000"), Unit: MustDecimal("0.001")}, {Unit: MustDecimal("0.0005")}}}
	volume := Price{Meter: "seats", Model: Volume, Tiers: []Tier{{UpTo: dec("10"), Unit: MustDecimal("8")}, {Unit: MustDecimal("6"), Flat: dec("10")}}}
	pkg := Price{Meter: "exports", Model: Package, Size: dec("100"), Amount: dec("5.00"), Free: dec("100")}
	unit := Price{Meter: "storage", Model: Unit, Unit: dec("0.000000000023")}
	for _, tc := range []struct {
		name          string
		price         Price
		before, after string
		noPrice       bool // described without the price, as when the snapshot cannot be read
		want          string
	}{
		{"graduated, three tiers", graduated, "0", "1234567.000000", false,
			"1000 × 0 = 0; 99000 × 0.001 = 99; 1134567 × 0.0005 = 567.2835; total 666.2835"},
		{"volume past the boundary: 11 × 6 + 10", volume, "0", "11.000000", false, "11 × 6 + 10 = 76"},
		{"package, 100 free: 101 billable units are 2 packages", pkg, "0", "201", false, "2 package(s) of 100 × 5 = 10 (201 units, 100 free)"},
		{"package without its price", pkg, "0", "201", true, "2 package(s) = 10 (201 units)"},
		{"unit", unit, "0", "10000000000000", false, "10000000000000 × 0.000000000023 = 230"},
		{"unit without its price", unit, "0", "10000000000000", true, "10000000000000 units = 230"},
		// A late 100,000 on top of 1,234,567: 716.2835 − 666.2835.
		{"late, at the margin", graduated, "1234567", "1334567", false,
			"price(1334567) − price(1234567) = 716.2835 − 666.2835 = 50; " +
				"price(1334567): 1000 × 0 = 0; 99000 × 0.001 = 99; 1234567 × 0.0005 = 617.2835; total 716.2835; " +
				"price(1234567): 1000 × 0 = 0; 99000 × 0.001 = 99; 1134567 × 0.0005 = 567.2835; total 666.2835"},
		{"graduated, nothing used", graduated, "0", "0", false, "0 units = 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.price.Validate(); err != nil {
				t.Fatal(err)
			}
			m, err := tc.price.Margin(MustDecimal(tc.before), MustDecimal(tc.after))
			if err != nil {
				t.Fatal(err)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			var stored Margin
			if err := json.Unmarshal(b, &stored); err != nil {
				t.Fatal(err)
			}
			p := &tc.price
			if tc.noPrice {
				p = nil
			}
			if got := stored.Describe(p); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
