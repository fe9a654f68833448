package ledger

import (
	"math"
	"math/big"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// extreme draws int64s that are mostly near the ends of the range, where
// unchecked arithmetic wraps.
func extreme() *rapid.Generator[int64] {
	return rapid.OneOf(
		rapid.SampledFrom([]int64{math.MaxInt64, math.MinInt64, math.MaxInt64 - 1, math.MinInt64 + 1, 0, 1, -1, math.MaxInt64 / 2, math.MinInt64 / 2}),
		rapid.Int64Range(math.MaxInt64/2, math.MaxInt64),
		rapid.Int64Range(math.MinInt64, math.MinInt64/2),
		rapid.Int64(),
	)
}

// Every total operation agrees with math/big, and Quantity converts exactly
// the values in a Quantity's range, ±MaxQuantity (int64's range without its
// smallest value).
func TestTotalMatchesBig(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var sum Total
		want := new(big.Int)
		for _, v := range rapid.SliceOfN(extreme(), 0, 12).Draw(rt, "adds") {
			sum.add(TotalOf(Quantity(v)))
			want.Add(want, big.NewInt(v))
		}
		other := TotalOf(Quantity(extreme().Draw(rt, "other")))
		if rapid.Bool().Draw(rt, "count") {
			other = countTotal(rapid.Int64Range(0, math.MaxInt64).Draw(rt, "n"))
		}
		if rapid.Bool().Draw(rt, "wide") {
			other = other.Plus(sum) // a wide operand too
		}
		for _, c := range []struct {
			name string
			got  Total
			want *big.Int
		}{
			{"sum", sum, want},
			{"plus", sum.Plus(other), new(big.Int).Add(want, other.bigInt())},
			{"minus", sum.Minus(other), new(big.Int).Sub(want, other.bigInt())},
			{"neg", sum.Neg(), new(big.Int).Neg(want)},
			{"other", other, other.bigInt()},
		} {
			if c.got.bigInt().Cmp(c.want) != 0 {
				rt.Fatalf("%s = %s, want %s micro-units", c.name, c.got.bigInt(), c.want)
			}
			if (c.got.big == nil) != c.want.IsInt64() {
				rt.Fatalf("%s: not canonical: %+v", c.name, c.got)
			}
			if c.got.Sign() != c.want.Sign() || c.got.Cmp(other) != c.want.Cmp(other.bigInt()) {
				rt.Fatalf("%s: Sign %d, Cmp %d", c.name, c.got.Sign(), c.got.Cmp(other))
			}
			if back, err := ParseTotal(c.got.String()); err != nil || !back.Equal(c.got) {
				rt.Fatalf("%s: %s parses back as %s, %v", c.name, c.got, back, err)
			}
			q, ok := c.got.Quantity()
			inRange := c.want.IsInt64() && c.want.Int64() >= -int64(MaxQuantity)
			switch {
			case inRange && (!ok || int64(q) != c.want.Int64()):
				rt.Fatalf("%s: Quantity = %d, %v; want %s", c.name, q, ok, c.want)
			case !inRange && ok:
				rt.Fatalf("%s: Quantity of %s = %d; want none", c.name, c.want, q)
			case ok && c.got.String() != q.String():
				rt.Fatalf("%s: String %q, Quantity %q", c.name, c.got.String(), q.String())
			}
		}
	})
}

func TestCountTotalBeyondInt64(t *testing.T) {
	n := int64(math.MaxInt64/Scale + 1)
	want := new(big.Int).Mul(big.NewInt(n), big.NewInt(Scale))
	if got := countTotal(n); got.bigInt().Cmp(want) != 0 || got.String() != "9223372036855" {
		t.Fatalf("countTotal(%d) = %s (%s)", n, got.bigInt(), got)
	}
	if got := countTotal(n - 1); got.big != nil || Quantity(got.n).String() != "9223372036854" {
		t.Fatalf("countTotal(%d) = %+v", n-1, got)
	}
}

// A row stores its quantity as an integer and its decimals: 6 for every
// value whose micro-units fit an int64 (so every row written before wide
// quantities keeps its columns), else the fewest that hold it exactly; and
// reads back as the same value.
func TestRowParts(t *testing.T) {
	for _, c := range []struct {
		in       string
		quantity int64
		decimals int
	}{
		{"0", 0, 6},
		{"1.5", 1_500_000, 6},
		{"-9223372036854.775807", -math.MaxInt64, 6},
		{"9223372036854.775807", math.MaxInt64, 6},
		{"9223372036854.77581", 922337203685477581, 5}, // not 6: its micro-units do not fit
		{"10000000000000", 10_000_000_000_000, 0},      // a 10 TB gauge, in bytes
		{"1e15", 1_000_000_000_000_000, 0},
		{"-1e15", -1_000_000_000_000_000, 0},
		{"9223372036854775807", math.MaxInt64, 0},
		{"10000000000000.5", 100_000_000_000_005, 1},
	} {
		v, err := ParseRowQuantity(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		q, d, ok := v.RowParts()
		if !ok || q != c.quantity || d != c.decimals {
			t.Errorf("%s: stored as %d with %d decimals (%v), want %d with %d", c.in, q, d, ok, c.quantity, c.decimals)
		}
		if back := RowQuantity(q, d); !back.Equal(v) || back.String() != v.String() {
			t.Errorf("%s: reads back as %s", c.in, back)
		}
	}
	for _, in := range []string{"9223372036854775808", "9223372036854.775808", "-9223372036854.775808", "-9223372036854775808", "10000000000000.000001", "1e19", "-1e19"} {
		if _, err := ParseRowQuantity(in); err == nil || !strings.Contains(err.Error(), "exceed 9223372036854775807 (one row's limit)") {
			t.Errorf("%s: %v, want a refusal beyond what one row holds", in, err)
		}
	}
	if v, err := ParseTotal("1e24"); err != nil || v.String() != "1000000000000000000000000" {
		t.Errorf("ParseTotal(1e24) = %s, %v", v, err)
	}
}

// Any value a row can store survives the round trip through its columns.
func TestRowPartsRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		q := extreme().Filter(func(v int64) bool { return v != math.MinInt64 }).Draw(rt, "quantity")
		d := rapid.IntRange(0, RowDecimals).Draw(rt, "decimals")
		v := RowQuantity(q, d)
		sq, sd, ok := v.RowParts()
		if !ok || !RowQuantity(sq, sd).Equal(v) {
			rt.Fatalf("%d with %d decimals = %s, stored as %d with %d (%v)", q, d, v, sq, sd, ok)
		}
		if v.big == nil && sd != RowDecimals {
			rt.Fatalf("%s fits micro-units but is stored with %d decimals", v, sd)
		}
	})
}
