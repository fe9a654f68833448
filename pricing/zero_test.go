package pricing

import (
	"fmt"
	"strings"
	"testing"
)

// A tiny negative amount rounds to zero, written without a sign in every
// currency: the line's amount, its exact amount when that is zero, the
// invoice's totals and the month's spend (issue 40, item 9).
func TestRoundedZeroHasNoSign(t *testing.T) {
	for _, c := range []struct{ code, unit, zero string }{
		{"USD", "0.001", "0.00"},
		{"JPY", "0.1", "0"},
		{"KWD", "0.0001", "0.000"},
	} {
		t.Run(c.code, func(t *testing.T) {
			p := Plan{Name: "p", Currency: c.code, EffectiveFrom: "2026-01-01", Prices: []Price{
				{Meter: "api", Model: Unit, Unit: dec(c.unit)},
				{Meter: "free", Model: Unit, Unit: dec("0")},
			}}
			if err := p.Validate(); err != nil {
				t.Fatal(err)
			}
			cur := p.CurrencyOf()
			// A correction of one unit: -1 × unit, less than half a minor unit.
			m, err := p.Prices[0].Margin(NewDecimal(0, 0), MustDecimal("-1"))
			if err != nil {
				t.Fatal(err)
			}
			line, err := cur.Round(m.Amount)
			if err != nil {
				t.Fatal(err)
			}
			if m.Amount.String() != "-"+c.unit || line.String() != c.zero {
				t.Errorf("line: %s exactly, rounded %s; want -%s, rounded %s", m.Amount, line, c.unit, c.zero)
			}
			// A negative quantity at a price of 0: exactly 0, not -0.
			free, err := p.Prices[1].Margin(NewDecimal(0, 0), MustDecimal("-5"))
			if err != nil {
				t.Fatal(err)
			}
			if got := string(free.AppendJSON(nil)); free.Amount.String() != "0" || strings.Contains(got, `"-0"`) {
				t.Errorf("a free meter's correction: %s exactly, %s", free.Amount, got)
			}
			s, err := p.Settle([]Decimal{line}, []Decimal{line})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(s.Fee, " ", s.Usage, " ", s.Late, " ", s.TrueUp, " ", s.Total); got != fmt.Sprint(c.zero, " ", c.zero, " ", c.zero, " ", c.zero, " ", c.zero) {
				t.Errorf("settlement fee, usage, late, true-up, total: %s", got)
			}
			sp, err := p.Spent(map[string]Decimal{"api": MustDecimal("-1"), "free": MustDecimal("-5")})
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(sp.Lines[0].Amount, " ", sp.Lines[1].Amount, " ", sp.Total); got != fmt.Sprint(c.zero, " ", c.zero, " ", c.zero) {
				t.Errorf("spend lines and total: %s", got)
			}
			// The same amounts rounded directly, and through the quotient
			// Round takes for an increment other than one minor unit.
			for _, tiny := range []string{"-" + c.unit, "-0.000000000001", "-0"} {
				if got, err := cur.Round(MustDecimal(tiny)); err != nil || got.String() != c.zero {
					t.Errorf("Round(%s) = %s, %v; want %s", tiny, got, err, c.zero)
				}
				step := cur
				step.increment = 5
				if got, err := step.Round(MustDecimal(tiny)); err != nil || got.String() != c.zero {
					t.Errorf("Round(%s) by 5 minor units = %s, %v; want %s", tiny, got, err, c.zero)
				}
			}
		})
	}
}

// UnsignedZeros reads a negative zero stored before zeros lost their sign
// as the zero pricing writes now, and leaves every other amount alone.
func TestUnsignedZeros(t *testing.T) {
	for in, want := range map[string]string{
		"-0.00": "0.00", "-0": "0", "-0.000": "0.000", "0.00": "0.00", "-0.001": "-0.001", "-0.10": "-0.10", "-10.00": "-10.00", "": "",
		`{"before":{"quantity":"0","amount":"0"},"after":{"quantity":"-5","amount":"-0"},"amount":"-0"}`: `{"before":{"quantity":"0","amount":"0"},"after":{"quantity":"-5","amount":"0"},"amount":"0"}`,
		`{"amount":"-0.001","q":"-0.5","x":"-0.00"}`:                                                     `{"amount":"-0.001","q":"-0.5","x":"0.00"}`,
	} {
		if got := UnsignedZeros(in); got != want {
			t.Errorf("UnsignedZeros(%s) = %s, want %s", in, got, want)
		}
	}
}

// Startup names the bound on plan values and what it covers (issue 40,
// item 9); 999999999999999.99 is the largest fee in USD.
func TestValueBoundIsNamed(t *testing.T) {
	p := Plan{Name: "p", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("999999999999999.99"),
		Prices: []Price{{Meter: "api", Model: Graduated, Tiers: []Tier{{UpTo: dec("1000000000000000"), Unit: MustDecimal("1")}, {Unit: MustDecimal("1")}}}}}
	err := p.Validate()
	want := "prices[0].tiers[0].up_to: 1000000000000000 is not below 10^15: every value of a plan (a price, a fee, a minimum, " +
		"a tier's up_to, a package's size or free units, a spend limit or alert) must be below 1000000000000000"
	if err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v\nwant %s", err, want)
	}
}
