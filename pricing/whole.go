package pricing

import (
	"fmt"

	"github.com/cockroachdb/apd/v3"
)

// Whole is how a quantity becomes a whole number of another system's units
// (Stripe's meter events take whole numbers): q × factor, exactly, rounded
// half to even to an integer. It is the one place such a value is rounded;
// a caller that pushes running totals rounds each total once and sends the
// differences, so the whole numbers it sent add up to its total, rounded
// once, to the unit.
func Whole(q, factor Decimal) (Decimal, error) {
	p, err := mul(q, factor)
	if err != nil {
		return Decimal{}, fmt.Errorf("whole: %w", err)
	}
	var z Decimal
	rc := exact
	rc.Rounding = apd.RoundHalfEven
	rc.Traps = apd.DefaultTraps // rounding is the point here
	if _, err := rc.Quantize(&z.d, &p.d, 0); err != nil {
		return Decimal{}, fmt.Errorf("whole: %w", err)
	}
	return z, nil
}

// Add returns x + y, exactly.
func Add(x, y Decimal) (Decimal, error) { return add(x, y) }

// Sub returns x − y, exactly.
func Sub(x, y Decimal) (Decimal, error) { return sub(x, y) }
