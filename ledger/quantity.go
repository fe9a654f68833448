package ledger

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Quantity is an exact decimal with six fractional digits, held as integer
// micro-units. Usage is money-adjacent: summing floats would drift, summing
// integers cannot.
type Quantity int64

// Scale is the number of micro-units in one unit.
const Scale = 1_000_000

// MaxQuantity is the largest quantity, 9,223,372,036,854.775807 units; the
// range is symmetric (-MaxQuantity to MaxQuantity) so every quantity can be
// negated, as a correction does. int64's one extra negative value is
// refused like any other value out of range.
const MaxQuantity Quantity = math.MaxInt64

var (
	errNotNumber = errors.New("not a decimal number")
	errPrecision = errors.New("more than 6 decimal places")
	errRange     = errors.New("out of range")
)

var bigScale = big.NewRat(Scale, 1)

// ParseQuantity parses a JSON number or plain decimal string ("3", "-1.25",
// "2.5e3") exactly. It refuses values that would need rounding.
func ParseQuantity(s string) (Quantity, error) {
	if !isDecimal(s) {
		return 0, fmt.Errorf("%q: %w", clip(s), errNotNumber)
	}
	// Fast path: integers that fit comfortably, the overwhelmingly common case.
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > -math.MaxInt64/Scale && n < math.MaxInt64/Scale {
		return Quantity(n * Scale), nil
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return 0, fmt.Errorf("%q: %w", clip(s), errNotNumber)
	}
	r.Mul(r, bigScale)
	if !r.IsInt() {
		return 0, fmt.Errorf("%q: %w", clip(s), errPrecision)
	}
	n := r.Num()
	if !n.IsInt64() || n.Int64() < -int64(MaxQuantity) {
		return 0, fmt.Errorf("%q: %w: beyond the largest quantity, ±%s", clip(s), errRange, MaxQuantity)
	}
	return Quantity(n.Int64()), nil
}

// ParseTotal parses a JSON number or plain decimal string ("3", "-1.25",
// "1e13") exactly, at any size. It refuses values that would need rounding.
func ParseTotal(s string) (Total, error) {
	if q, err := ParseQuantity(s); err == nil { // the common case, without allocating
		return TotalOf(q), nil
	} else if !errors.Is(err, errRange) {
		return Total{}, err
	}
	r, _ := new(big.Rat).SetString(s) // ParseQuantity parsed it
	return fromBig(new(big.Int).Set(r.Mul(r, bigScale).Num())), nil
}

// ParseRowQuantity parses what one ledger row may hold (ParseTotal and
// RowParts): an event's quantity or an adjustment.
func ParseRowQuantity(s string) (Total, error) {
	t, err := ParseTotal(s)
	if err != nil {
		return Total{}, err
	}
	if _, _, ok := t.RowParts(); !ok {
		return Total{}, fmt.Errorf("%q: %w", clip(s), errRowRange)
	}
	return t, nil
}

// How one ledger row stores its quantity: an integer and its number of
// decimal places (metered_usage.quantity and .decimals), the value being
// quantity × 10^-decimals. A row whose micro-units fit an int64 (every
// quantity up to ±9,223,372,036,854.775807, so every row written before wide
// quantities) keeps 6 decimals; a larger one keeps the fewest decimals that
// hold it exactly, so one row carries up to 9,223,372,036,854,775,807 whole
// units (a 10 TB gauge is 10^13 bytes), or fewer when it has a fraction: a
// quantity fits when its digits, without the decimal point and the zeros
// that end its fraction, are at most 9223372036854775807 (92233720368547758.07
// fits, 92233720368547758.08 does not; 9999999999999999999 has 19 digits and
// does not fit either).

// RowDecimals is the number of decimal places an ordinary row stores.
const RowDecimals = 6

// errRowRange refuses a quantity no row holds (RowParts): its digits, as one
// integer without the point (and the zeros ending its fraction, which a row
// does not keep), are more than an int64 keeps. The message is short: a
// mapping error quotes it after the value, and stays under 200 bytes.
var errRowRange = errors.New("out of range: its digits, decimal point aside, exceed 9223372036854775807 (one row's limit)")

var pow10 = [...]int64{1, 10, 100, 1_000, 10_000, 100_000, 1_000_000}

// RowParts is how a row stores t: an integer with decimals decimal places;
// ok is false when no int64 holds it exactly. The range is symmetric (int64's
// smallest value is refused at any decimals), so a correction can always
// negate a row.
func (t Total) RowParts() (quantity int64, decimals int, ok bool) {
	if t.big == nil && t.n != math.MinInt64 {
		return t.n, RowDecimals, true
	}
	if t.big == nil {
		return 0, 0, false // -9223372036854.775808: no fewer decimals hold it
	}
	var rem big.Int
	q := new(big.Int).Set(t.big)
	d := RowDecimals
	for d > 0 {
		var next big.Int
		if next.QuoRem(q, big.NewInt(10), &rem); rem.Sign() != 0 {
			break
		}
		q, d = &next, d-1
	}
	if !q.IsInt64() || q.Int64() == math.MinInt64 {
		return 0, 0, false
	}
	return q.Int64(), d, true
}

// RowQuantity is the total a stored row holds: quantity × 10^-decimals. A
// decimals outside 0..6 (which the schema refuses) is read as 6.
func RowQuantity(quantity int64, decimals int) Total {
	if decimals == RowDecimals || decimals < 0 || decimals > RowDecimals {
		return Total{n: quantity}
	}
	f := pow10[RowDecimals-decimals]
	if quantity <= math.MaxInt64/f && quantity >= -math.MaxInt64/f {
		return Total{n: quantity * f}
	}
	return fromBig(new(big.Int).Mul(big.NewInt(quantity), big.NewInt(f)))
}

// isDecimal reports whether s follows the JSON number grammar. big.Rat alone
// would also accept fractions ("1/3") and hex, which are not quantities.
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == start {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		frac := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == frac {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		exp := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == exp || i-exp > 3 {
			return false
		}
	}
	return i == len(s)
}

// String formats q as a plain decimal without trailing zeros: "3", "1.5", "-0.000001".
func (q Quantity) String() string {
	sign := ""
	u := uint64(q)
	if q < 0 {
		sign = "-"
		u = uint64(-q)
	}
	whole, frac := u/Scale, u%Scale
	if frac == 0 {
		return sign + strconv.FormatUint(whole, 10)
	}
	f := strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	return sign + strconv.FormatUint(whole, 10) + "." + f
}

// MarshalJSON writes q as a JSON string, so no consumer parses it into a float.
func (q Quantity) MarshalJSON() ([]byte, error) {
	return []byte(`"` + q.String() + `"`), nil
}

// UnmarshalJSON accepts a JSON number or a decimal string.
func (q *Quantity) UnmarshalJSON(b []byte) error {
	v, err := ParseQuantity(strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*q = v
	return nil
}
