package ledger

import (
	"math"
	"math/big"
	"strings"

	"github.com/hookledger/hookledger/pricing"
)

// Total is an exact quantity of any size, in micro-units like Quantity: one
// ledger row's quantity (a storage gauge of 10 TB is 10^13 bytes) or an
// aggregate of many (a month of bytes passes 10^16; sums of 10^24 stay
// exact). It is an int64 while the value fits and a big.Int only once it
// leaves int64's range, so ordinary rows and totals never allocate and no
// sum ever wraps. A sum may leave the range and come back: two usage rows of
// 5,000,000,000,000 and an adjustment of -5,000,000,000,000 total exactly
// 5,000,000,000,000, on the int64 path again.
//
// Compare totals with Cmp or Equal: two equal values beyond int64 hold
// different big.Ints, so the zero-size func field makes == a compile error
// rather than a wrong answer.
type Total struct {
	n   int64
	big *big.Int // non-nil exactly when the value is outside int64's range (n is then unused)
	_   [0]func()
}

// Micro64 is t in micro-units while they fit an int64 (ok false: they do
// not, and only the exact decimal, String, holds t).
func (t Total) Micro64() (micro int64, ok bool) { return t.n, t.big == nil }

// TotalOf is the total of one ordinary quantity.
func TotalOf(q Quantity) Total { return Total{n: int64(q)} }

// countTotal is n whole units (count, unique_count): n × Scale micro-units.
func countTotal(n int64) Total {
	if n <= math.MaxInt64/Scale {
		return Total{n: n * Scale}
	}
	return fromBig(new(big.Int).Mul(big.NewInt(n), big.NewInt(Scale)))
}

// fromBig keeps a value that fits as a plain int64, so totals compare and
// convert on the fast path again after a detour through big.Int. b becomes
// the total's own.
func fromBig(b *big.Int) Total {
	if b.IsInt64() {
		return Total{n: b.Int64()}
	}
	return Total{big: b}
}

// TotalOfMicro is the total of b micro-units (b is copied).
func TotalOfMicro(b *big.Int) Total { return fromBig(new(big.Int).Set(b)) }

// Micro returns t's micro-units as a fresh big.Int.
func (t Total) Micro() *big.Int { return t.bigInt() }

// bigInt returns a fresh big.Int holding t's micro-units.
func (t Total) bigInt() *big.Int {
	if t.big != nil {
		return new(big.Int).Set(t.big)
	}
	return big.NewInt(t.n)
}

// add adds one row's quantity in place. It is for accumulators: it may
// change t's own big.Int, so a total already handed out is never added to
// (the aggregates hand out Plus's fresh results).
func (t *Total) add(q Total) {
	if t.big == nil && q.big == nil {
		// For q != 0, s moves in q's direction exactly when it did not wrap.
		if s := t.n + q.n; (s > t.n) == (q.n > 0) {
			t.n = s
			return
		}
	}
	if t.big == nil {
		t.big = big.NewInt(t.n)
	}
	if q.big != nil {
		t.big.Add(t.big, q.big)
	} else {
		t.big.Add(t.big, big.NewInt(q.n))
	}
	if t.big.IsInt64() { // back in range: adjustments may bring it there
		t.n, t.big = t.big.Int64(), nil
	}
}

// Plus returns t + u exactly.
func (t Total) Plus(u Total) Total {
	if t.big == nil && u.big == nil {
		if s := t.n + u.n; (s > t.n) == (u.n > 0) {
			return Total{n: s}
		}
	}
	return fromBig(new(big.Int).Add(t.bigInt(), u.bigInt()))
}

// Minus returns t - u exactly.
func (t Total) Minus(u Total) Total {
	if t.big == nil && u.big == nil {
		if s := t.n - u.n; (s < t.n) == (u.n > 0) {
			return Total{n: s}
		}
	}
	return fromBig(new(big.Int).Sub(t.bigInt(), u.bigInt()))
}

// Neg returns -t.
func (t Total) Neg() Total { return Total{}.Minus(t) }

// Cmp compares t and u: -1, 0 or +1.
func (t Total) Cmp(u Total) int {
	if t.big == nil && u.big == nil {
		switch {
		case t.n < u.n:
			return -1
		case t.n > u.n:
			return 1
		}
		return 0
	}
	return t.bigInt().Cmp(u.bigInt())
}

// Equal reports whether t and u are the same quantity.
func (t Total) Equal(u Total) bool { return t.Cmp(u) == 0 }

// Sign is -1, 0 or +1.
func (t Total) Sign() int {
	if t.big != nil {
		return t.big.Sign()
	}
	switch {
	case t.n < 0:
		return -1
	case t.n > 0:
		return 1
	}
	return 0
}

// Quantity returns t as an ordinary Quantity; ok is false when t is beyond
// ±MaxQuantity.
func (t Total) Quantity() (q Quantity, ok bool) {
	if t.big == nil && t.n >= -int64(MaxQuantity) {
		return Quantity(t.n), true
	}
	return 0, false
}

// Decimal is t in units, for pricing: exact at any size.
func (t Total) Decimal() pricing.Decimal {
	if t.big != nil {
		return pricing.NewDecimalBig(t.bigInt(), -6)
	}
	return pricing.NewDecimal(t.n, -6)
}

// String formats t like Quantity.String: a plain decimal without trailing
// zeros ("3", "1.5", "10000000000000000").
func (t Total) String() string {
	if t.big == nil {
		return Quantity(t.n).String()
	}
	// Beyond int64 there are always more than six digits.
	sign, digits := "", t.big.String()
	if rest, ok := strings.CutPrefix(digits, "-"); ok {
		sign, digits = "-", rest
	}
	whole, frac := digits[:len(digits)-6], strings.TrimRight(digits[len(digits)-6:], "0")
	if frac == "" {
		return sign + whole
	}
	return sign + whole + "." + frac
}

// MarshalJSON writes t as a JSON string, so no consumer parses it into a float.
func (t Total) MarshalJSON() ([]byte, error) {
	return []byte(`"` + t.String() + `"`), nil
}

// UnmarshalJSON accepts a JSON number or a decimal string.
func (t *Total) UnmarshalJSON(b []byte) error {
	v, err := ParseTotal(strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*t = v
	return nil
}
