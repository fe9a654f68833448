package ledger

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// total is an exact sum of micro-units. It is an int64 while the sum fits and
// a big.Int only once it leaves int64's range, so the common case never
// allocates and no sum ever wraps. A sum may leave the range and come back:
// two usage rows of 5,000,000,000,000 and an adjustment of -5,000,000,000,000
// total exactly 5,000,000,000,000, so an operator can correct an overflowing
// period with an ordinary adjustment. Only the billed result must fit a
// Quantity (see checked).
type total struct {
	n   int64
	big *big.Int // non-nil exactly when the value is outside int64's range (n is then unused); never shared
}

func totalOf(q Quantity) total { return total{n: int64(q)} }

// countTotal is n whole units (count, unique_count): n × Scale micro-units.
func countTotal(n int64) total {
	if n <= math.MaxInt64/Scale {
		return total{n: n * Scale}
	}
	return fromBig(new(big.Int).Mul(big.NewInt(n), big.NewInt(Scale)))
}

// fromBig keeps a value that fits as a plain int64, so totals compare and
// convert on the fast path again after a detour through big.Int.
func fromBig(b *big.Int) total {
	if b.IsInt64() {
		return total{n: b.Int64()}
	}
	return total{big: b}
}

func (t total) bigInt() *big.Int {
	if t.big != nil {
		return new(big.Int).Set(t.big)
	}
	return big.NewInt(t.n)
}

// add adds one row's quantity in place.
func (t *total) add(q Quantity) {
	if t.big == nil {
		// For q != 0, s moves in q's direction exactly when it did not wrap.
		if s := t.n + int64(q); (s > t.n) == (q > 0) {
			t.n = s
			return
		}
		t.big = big.NewInt(t.n)
	}
	t.big.Add(t.big, big.NewInt(int64(q)))
	if t.big.IsInt64() { // back in range: adjustments may bring it there
		t.n, t.big = t.big.Int64(), nil
	}
}

// plus returns t + u exactly.
func (t total) plus(u total) total {
	if t.big == nil && u.big == nil {
		if s := t.n + u.n; (s > t.n) == (u.n > 0) {
			return total{n: s}
		}
	}
	return fromBig(new(big.Int).Add(t.bigInt(), u.bigInt()))
}

// minus returns t - u exactly.
func (t total) minus(u total) total {
	if t.big == nil && u.big == nil {
		if s := t.n - u.n; (s < t.n) == (u.n > 0) {
			return total{n: s}
		}
	}
	return fromBig(new(big.Int).Sub(t.bigInt(), u.bigInt()))
}

// String formats t like Quantity.String, also beyond int64's range (where
// there are always more than six digits).
func (t total) String() string {
	if t.big == nil {
		return Quantity(t.n).String()
	}
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

// checked is the one place a total becomes a Quantity: exactly, or an
// *OverflowError naming what was being totalled. A total has a row's range,
// ±MaxQuantity, so int64's smallest value is beyond it too.
func (t total) checked(customer, meter, period string) (Quantity, error) {
	if t.big == nil && t.n >= -int64(MaxQuantity) {
		return Quantity(t.n), nil
	}
	return 0, &OverflowError{Customer: customer, Meter: meter, Period: period, Total: t.String()}
}

// ErrOverflow is the outcome of a total that a Quantity (int64 micro-units,
// at most ±9223372036854.775807 units) cannot hold. Such a total is refused,
// never wrapped, rounded or carried as a float; callers branch on it with
// errors.Is.
var ErrOverflow = errors.New("total out of range")

// OverflowError names the total that cannot be represented.
type OverflowError struct {
	Customer string // "" when the total spans every customer
	Meter    string // "" when it spans every meter
	Period   string // the event-time period or query window
	Total    string // the exact total, in units
}

func (e *OverflowError) Error() string {
	customer, meter := "all customers", "all meters"
	if e.Customer != "" {
		customer = fmt.Sprintf("customer %q", e.Customer)
	}
	if e.Meter != "" {
		meter = fmt.Sprintf("meter %q", e.Meter)
	}
	return fmt.Sprintf("%v for %s, %s, period %s: %s is beyond the largest quantity, ±%s",
		ErrOverflow, customer, meter, e.Period, e.Total, MaxQuantity)
}

func (e *OverflowError) Unwrap() error { return ErrOverflow }
