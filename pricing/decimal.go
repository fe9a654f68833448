// Package pricing turns quantities into money: price models (unit,
// graduated, volume, package), plan versions and currencies. It is pure: no
// I/O, no SQL, no clock. The ledger calls it when it closes and verifies an
// invoice; the CLI and the console only render what it returns.
//
// Every amount is an exact decimal (github.com/cockroachdb/apd/v3). All
// arithmetic runs in one context, exact, that refuses to round; the one
// place an amount is rounded is Currency.Round, once per invoice line.
package pricing

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"

	"github.com/cockroachdb/apd/v3"
	"github.com/goccy/go-yaml/ast"
)

// exact is the context of every computation before rounding. Its precision
// covers the widest product pricing forms (a total of up to 10^24 units with
// six decimal places times a unit price of up to 10^15 with twelve: under 60
// digits) with room to spare, and it traps Inexact: an operation that would
// have to round is an error, never a silently different amount.
var exact = apd.Context{
	Precision:   100,
	MaxExponent: apd.MaxExponent,
	MinExponent: apd.MinExponent,
	Traps:       apd.DefaultTraps | apd.Inexact,
}

// MaxDecimals is the most decimal places a price may have, as in Stripe's
// unit_amount_decimal.
const MaxDecimals = 12

// maxMagnitude bounds every configured value: 10^15, far beyond any real
// price, so that products stay well inside exact's precision. Documented in
// docs/invoicing.md (Prices and money).
var maxMagnitude = apd.New(1, 15)

// Decimal is an exact decimal number. It reads and writes as a string
// ("0.001"), in YAML as in JSON, so no value passes through a float.
//
// Decoding never fails: a value that does not parse is kept and reported by
// Check, so configuration errors can name their key and line (the YAML
// library does not position errors raised inside custom decoders).
type Decimal struct {
	d   apd.Decimal
	bad string
}

// ParseDecimal reads a plain decimal such as "12", "-0.5" or "0.000000000023".
// Exponents, NaN and infinities are refused: configuration and amounts are
// written out in full.
func ParseDecimal(s string) (Decimal, error) {
	if !plainDecimal(s) {
		return Decimal{}, fmt.Errorf("%q is not a decimal number (write it out, e.g. \"0.001\")", clip(s))
	}
	var d Decimal
	if _, _, err := d.d.SetString(s); err != nil {
		return Decimal{}, fmt.Errorf("%q is not a decimal number: %v", clip(s), err)
	}
	return d, nil
}

// MustDecimal is ParseDecimal for constants in code and tests.
func MustDecimal(s string) Decimal {
	d, err := ParseDecimal(s)
	if err != nil {
		panic(err)
	}
	return d
}

// NewDecimal returns coeff × 10^exp, e.g. a quantity of micro-units as
// NewDecimal(n, -6).
func NewDecimal(coeff int64, exp int32) Decimal {
	var d Decimal
	d.d.SetFinite(coeff, exp)
	return d
}

// NewDecimalBig returns coeff × 10^exp for a coefficient beyond int64.
func NewDecimalBig(coeff *big.Int, exp int32) Decimal {
	var d Decimal
	d.d.Coeff.SetMathBigInt(new(big.Int).Abs(coeff))
	d.d.Negative = coeff.Sign() < 0
	d.d.Exponent = exp
	return d
}

func plainDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if digits == 0 {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		frac := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			frac++
		}
		if frac == 0 {
			return false
		}
	}
	return i == len(s)
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// String writes d in plain notation, never with an exponent: "0.000000000023", "1000".
func (d Decimal) String() string { return d.d.Text('f') }

// MarshalText writes d as String does.
func (d Decimal) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText reads what ParseDecimal reads, keeping an error for Check.
func (d *Decimal) UnmarshalText(b []byte) error {
	v, err := ParseDecimal(string(b))
	if err != nil {
		*d = Decimal{bad: err.Error()}
		return nil
	}
	*d = v
	return nil
}

// UnmarshalYAML reads a YAML scalar from its node's source text. The YAML
// library would turn an unquoted 0.0000000001 into a float64 (and back as
// "1e-10") before any TextUnmarshaler saw it; the node keeps every digit as
// written, and a quoted scalar's value is already unquoted. It takes the node
// (goccy/go-yaml's NodeUnmarshaler), not the value's bytes: to give those,
// the library walks every token of the file once per value, so a
// configuration with hundreds of prices took seconds to read, growing with
// the square of its size (220 plan versions: 6 s of CPU).
func (d *Decimal) UnmarshalYAML(n ast.Node) error {
	var s string
	switch v := n.(type) {
	case *ast.StringNode:
		s = v.Value
	case ast.ScalarNode: // a number as written; true or null, refused below
		s = v.GetToken().Value
	default: // a mapping or a sequence: UnmarshalText says it is no number, quoting it
		s = strings.TrimSpace(n.String())
	}
	return d.UnmarshalText([]byte(s))
}

// Check reports a value that did not parse.
func (d Decimal) Check() error {
	if d.bad != "" {
		return fmt.Errorf("%s", d.bad)
	}
	return nil
}

// Cmp compares d and e: -1, 0 or +1.
func (d Decimal) Cmp(e Decimal) int { return d.d.Cmp(&e.d) }

// Sign is -1, 0 or +1.
func (d Decimal) Sign() int { return d.d.Sign() }

// Decimals is the number of decimal places d is written with.
func (d Decimal) Decimals() int {
	if d.d.Exponent >= 0 {
		return 0
	}
	return int(-d.d.Exponent)
}

// Apd returns a copy of d as an apd.Decimal, for callers that store it.
func (d Decimal) Apd() *apd.Decimal { return new(apd.Decimal).Set(&d.d) }

// checkConfigured is what every configured price value must satisfy: it
// parsed, it is not negative, it has at most places decimals and it is
// below maxMagnitude.
func (d Decimal) checkConfigured(places int) error {
	if err := d.Check(); err != nil {
		return err
	}
	if d.Sign() < 0 {
		return fmt.Errorf("%s is negative (a discount is an adjustment, not a price)", d)
	}
	if d.Decimals() > places {
		return fmt.Errorf("%s has %d decimal places, more than %d", d, d.Decimals(), places)
	}
	if d.d.Cmp(maxMagnitude) >= 0 {
		return fmt.Errorf("%s is not below 10^15: every value of a plan (a price, a fee, a minimum, a tier's up_to, a package's size or free units, a spend limit or alert) must be below 1000000000000000", d)
	}
	return nil
}

// The arithmetic below is exact (see exact); an error means a value beyond
// every bound pricing allows, which Validate rules out for configured values.
// A zero result is unsigned (unsignedZero).

func add(x, y Decimal) (Decimal, error) {
	var z Decimal
	_, err := exact.Add(&z.d, &x.d, &y.d)
	return z.unsignedZero(), err
}

func sub(x, y Decimal) (Decimal, error) {
	var z Decimal
	_, err := exact.Sub(&z.d, &x.d, &y.d)
	return z.unsignedZero(), err
}

func mul(x, y Decimal) (Decimal, error) {
	var z Decimal
	_, err := exact.Mul(&z.d, &x.d, &y.d)
	return z.unsignedZero(), err
}

// negativeZero is a negative zero as hookledger wrote amounts before zeros
// lost their sign: "-0", "-0.00", in plain text or as a JSON string.
var negativeZero = regexp.MustCompile(`(^|")-(0(?:\.0+)?)("|$)`)

// UnsignedZeros rewrites every negative zero in s, a stored amount
// ("-0.00") or a stored breakdown's JSON ({"amount":"-0"}), as the zero
// without a sign that pricing writes now. Invoices closed before then may
// hold "-0.00" where a recomputation gives "0.00": the same amount, which a
// comparison of stored text with recomputed text must not call a change.
func UnsignedZeros(s string) string {
	if !strings.Contains(s, "-0") {
		return s
	}
	return negativeZero.ReplaceAllString(s, "${1}${2}${3}")
}

// unsignedZero returns d, without its sign when it is zero. apd keeps the
// sign of a zero as IEEE 754 does: -5 × 0 is -0, and -0.001 USD rounded to
// cents is -0.00. An amount of nothing has no sign, so every amount pricing
// computes or rounds is written "0", "0.00" (USD), "0" (JPY), "0.000" (KWD),
// never "-0.00".
func (d Decimal) unsignedZero() Decimal {
	if d.d.IsZero() {
		d.d.Negative = false
	}
	return d
}

// ceilQuo is ⌈x / y⌉ for x ≥ 0 and y > 0, exactly.
func ceilQuo(x, y Decimal) (Decimal, error) {
	var q, r Decimal
	if _, err := exact.QuoInteger(&q.d, &x.d, &y.d); err != nil {
		return Decimal{}, err
	}
	if _, err := exact.Rem(&r.d, &x.d, &y.d); err != nil {
		return Decimal{}, err
	}
	if r.Sign() != 0 {
		return add(q, NewDecimal(1, 0))
	}
	return q, nil
}

func minDecimal(x, y Decimal) Decimal {
	if x.Cmp(y) <= 0 {
		return x
	}
	return y
}

// Sum adds exact amounts.
func Sum(xs ...Decimal) (Decimal, error) {
	var total Decimal
	for _, x := range xs {
		var err error
		if total, err = add(total, x); err != nil {
			return Decimal{}, fmt.Errorf("sum: %w", err)
		}
	}
	return total, nil
}

// appendJSON appends d as a JSON string, as encoding/json writes its
// MarshalText: plain notation is digits, a point and a sign, none of which
// JSON escapes.
func (d *Decimal) appendJSON(b []byte) []byte {
	b = append(b, '"')
	b = d.d.Append(b, 'f')
	return append(b, '"')
}
