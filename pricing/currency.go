package pricing

import (
	"fmt"

	"github.com/cockroachdb/apd/v3"
	"golang.org/x/text/currency"
)

// Currency is an ISO 4217 currency with its minor unit, taken from the CLDR
// table golang.org/x/text/currency keeps (JPY 0 decimals, USD 2, KWD 3).
type Currency struct {
	code      string
	scale     int // decimal places of the minor unit
	increment int // smallest step in minor units (1 for every standard rounding)
}

// ParseCurrency accepts an upper-case ISO 4217 code that the table knows.
func ParseCurrency(code string) (Currency, error) {
	if len(code) != 3 || code[0] < 'A' || code[0] > 'Z' || code[1] < 'A' || code[1] > 'Z' || code[2] < 'A' || code[2] > 'Z' {
		return Currency{}, fmt.Errorf("%q is not an ISO 4217 code (three upper-case letters, e.g. USD)", clip(code))
	}
	u, err := currency.ParseISO(code)
	if err != nil {
		return Currency{}, fmt.Errorf("%q is not a known ISO 4217 currency", code)
	}
	scale, increment := currency.Standard.Rounding(u)
	return Currency{code: u.String(), scale: scale, increment: increment}, nil
}

func (c Currency) String() string { return c.code }

// Decimals is the number of decimal places of the minor unit.
func (c Currency) Decimals() int { return c.scale }

// rounding is the one context that rounds: half-even (banker's rounding), so
// that amounts exactly half a minor unit apart round up and down equally
// often instead of always up.
var rounding = apd.Context{
	Precision:   exact.Precision,
	MaxExponent: apd.MaxExponent,
	MinExponent: apd.MinExponent,
	Rounding:    apd.RoundHalfEven,
	Traps:       apd.DefaultTraps,
}

// Round is the one place an amount is rounded: to the currency's minor unit
// (a multiple of its increment), half-even. An invoice line's precise amount
// is rounded once, here; the invoice total is the sum of rounded lines. An
// amount that rounds to zero is zero without a sign: -0.001 USD is 0.00.
func (c Currency) Round(x Decimal) (Decimal, error) {
	if c.code == "" {
		return Decimal{}, fmt.Errorf("round: no currency")
	}
	if c.increment == 1 {
		// Every currency's standard rounding steps by one minor unit: then
		// rounding is quantizing to the minor unit's place, half-even, which
		// is what the division below comes to, without a division at 100
		// digits of precision (TestRoundQuantizesAsTheQuotientDid).
		var out Decimal
		if _, err := rounding.Quantize(&out.d, &x.d, int32(-c.scale)); err != nil {
			return Decimal{}, fmt.Errorf("round %s to %s: %w", x, c, err)
		}
		return out.unsignedZero(), nil
	}
	step := NewDecimal(int64(c.increment), int32(-c.scale))
	var steps, out Decimal
	if _, err := exact.Quo(&steps.d, &x.d, &step.d); err != nil {
		return Decimal{}, fmt.Errorf("round %s to %s: %w", x, c, err)
	}
	if _, err := rounding.Quantize(&steps.d, &steps.d, 0); err != nil {
		return Decimal{}, fmt.Errorf("round %s to %s: %w", x, c, err)
	}
	if _, err := exact.Mul(&out.d, &steps.d, &step.d); err != nil {
		return Decimal{}, fmt.Errorf("round %s to %s: %w", x, c, err)
	}
	return c.places(out)
}

// places writes an amount that is already whole minor units with exactly
// the minor unit's places (10 USD is "10.00", zero "0.00" without a sign). It never rounds: it runs in
// the exact context, so an amount finer than the minor unit is an error.
// Settle uses it for sums of rounded amounts, which need no rounding.
func (c Currency) places(x Decimal) (Decimal, error) {
	var out Decimal
	if _, err := exact.Quantize(&out.d, &x.d, int32(-c.scale)); err != nil {
		return Decimal{}, fmt.Errorf("%s in %s: not whole minor units: %w", x, c, err)
	}
	return out.unsignedZero(), nil
}

// MinorUnits is amount x in c's minor units, a whole number ("12.34" USD is
// "1234", "1234" JPY is "1234", "1.234" KWD is "1234"): what Stripe's
// amounts are. An amount finer than the minor unit is an error, never
// rounded: amounts are rounded once, by Round.
func (c Currency) MinorUnits(x Decimal) (string, error) {
	if c.code == "" {
		return "", fmt.Errorf("minor units: no currency")
	}
	out, err := c.places(x) // exact: whole minor units or an error, never rounded
	if err != nil {
		return "", err
	}
	// Its coefficient at exponent -scale is the amount in minor units.
	minor := apd.NewWithBigInt(&out.d.Coeff, 0)
	minor.Negative = out.d.Negative
	return minor.Text('f'), nil
}
