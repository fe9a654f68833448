package pricing

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// roundByQuotient is Round as it was written first, for every increment:
// divide by the step, round to an integer half-even, multiply back. Round
// now quantizes directly when the step is one minor unit; this is the
// reference it must agree with.
func roundByQuotient(c Currency, x Decimal) (Decimal, error) {
	step := NewDecimal(int64(c.increment), int32(-c.scale))
	var steps, out Decimal
	if _, err := exact.Quo(&steps.d, &x.d, &step.d); err != nil {
		return Decimal{}, err
	}
	if _, err := rounding.Quantize(&steps.d, &steps.d, 0); err != nil {
		return Decimal{}, err
	}
	if _, err := exact.Mul(&out.d, &steps.d, &step.d); err != nil {
		return Decimal{}, err
	}
	if _, err := exact.Quantize(&out.d, &out.d, int32(-c.scale)); err != nil {
		return Decimal{}, err
	}
	return out.unsignedZero(), nil // a zero has no sign (TestRoundedZeroHasNoSign)
}

// Round gives exactly what the quotient gave (the same text, so the same
// stored amount and digest; a zero without its sign since issue 40), for currencies of 0, 2, 3 and 4 places and
// amounts of every shape: zeros, negatives, exact halves, values below
// half a minor unit, long fractions, large totals.
func TestRoundQuantizesAsTheQuotientDid(t *testing.T) {
	var curs []Currency
	for _, code := range []string{"JPY", "USD", "KWD", "CLF"} {
		c, err := ParseCurrency(code)
		if err != nil {
			t.Fatal(err)
		}
		if c.increment != 1 {
			t.Fatalf("%s: increment %d", code, c.increment)
		}
		curs = append(curs, c)
	}
	inputs := []string{"0", "-0", "0.000", "1", "-1", "0.5", "-0.5", "1.5", "2.5", "0.005", "0.015", "0.025", "-0.005", "-0.015",
		"0.0005", "0.0015", "-0.0025", "0.00005", "0.004999999999999", "-0.004999999999999", "0.000000000023", "-0.000000000023",
		"999999999999999999999999.995", "123456789012345678901234567890.123456789012345678", "10", "100.00", "100.000000"}
	rng := rand.New(rand.NewPCG(25, 10))
	for range 20000 {
		places := rng.IntN(19)
		coeff := rng.Int64N(1_000_000_000_000) * int64(1-2*rng.IntN(2))
		if rng.IntN(4) == 0 { // land on or next to a half
			coeff = coeff/1000*1000 + 500 + int64(rng.IntN(3)) - 1
		}
		inputs = append(inputs, NewDecimal(coeff, int32(-places)).String())
	}
	for _, c := range curs {
		for _, in := range inputs {
			x := MustDecimal(in)
			want, werr := roundByQuotient(c, x)
			got, gerr := c.Round(x)
			if fmt.Sprint(werr) != fmt.Sprint(gerr) || got.String() != want.String() || got.d.Negative != want.d.Negative || got.d.Exponent != want.d.Exponent {
				t.Fatalf("%s %s: Round %s (%v), the quotient %s (%v)", c, in, got, gerr, want, werr)
			}
		}
	}
}
