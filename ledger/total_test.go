package ledger

import (
	"errors"
	"math"
	"math/big"
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

// Every total operation agrees with math/big, and checked converts exactly
// the values in a Quantity's range, ±MaxQuantity (int64's range without its
// smallest value).
func TestTotalMatchesBig(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var sum total
		want := new(big.Int)
		for _, v := range rapid.SliceOfN(extreme(), 0, 12).Draw(rt, "adds") {
			sum.add(Quantity(v))
			want.Add(want, big.NewInt(v))
		}
		other := totalOf(Quantity(extreme().Draw(rt, "other")))
		if rapid.Bool().Draw(rt, "count") {
			other = countTotal(rapid.Int64Range(0, math.MaxInt64).Draw(rt, "n"))
		}
		for _, c := range []struct {
			name string
			got  total
			want *big.Int
		}{
			{"sum", sum, want},
			{"plus", sum.plus(other), new(big.Int).Add(want, other.bigInt())},
			{"minus", sum.minus(other), new(big.Int).Sub(want, other.bigInt())},
			{"other", other, other.bigInt()},
		} {
			if c.got.bigInt().Cmp(c.want) != 0 {
				rt.Fatalf("%s = %s, want %s micro-units", c.name, c.got.bigInt(), c.want)
			}
			q, err := c.got.checked("c", "m", "p")
			inRange := c.want.IsInt64() && c.want.Int64() >= -int64(MaxQuantity)
			switch {
			case inRange && (err != nil || int64(q) != c.want.Int64()):
				rt.Fatalf("%s: checked = %d, %v; want %s", c.name, q, err, c.want)
			case !inRange && !errors.Is(err, ErrOverflow):
				rt.Fatalf("%s: checked %s = %d, %v; want an overflow", c.name, c.want, q, err)
			case err == nil && c.got.String() != q.String():
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

func TestOverflowErrorNamesItsTotal(t *testing.T) {
	var sum total
	sum.add(5_000_000_000_000 * Scale)
	sum.add(5_000_000_000_000 * Scale)
	_, err := sum.checked("cus_1", "api_requests", "2026-10")
	want := `total out of range for customer "cus_1", meter "api_requests", period 2026-10: 10000000000000 is beyond the largest quantity, ±9223372036854.775807`
	if err == nil || err.Error() != want {
		t.Fatalf("error %q\nwant  %q", err, want)
	}
	_, err = totalOf(math.MinInt64).minus(totalOf(1)).checked("", "", "any event time")
	want = `total out of range for all customers, all meters, period any event time: -9223372036854.775809 is beyond the largest quantity, ±9223372036854.775807`
	if err == nil || err.Error() != want {
		t.Fatalf("error %q\nwant  %q", err, want)
	}
}
