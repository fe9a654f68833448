package pricing

import "fmt"

// Carry is how a late line keeps its period's rounding exact. A period's
// usage may be billed by several lines: its own invoice's, then one late
// line per later invoice that found more. Rounding each line's margin on its
// own lets the sum billed for the period drift from its total priced once
// (0.005 a unit: one unit billed 0.00, a late unit 0.00 again, while two
// units priced once are 0.01). So a late line bills the period's charge
// after it, rounded once, less what the period's earlier lines billed,
// rounded as they were: then the amounts billed for a period always add up
// to its final charge rounded once, as they would on one invoice.
type Carry struct {
	Total  Decimal `json:"total"`  // the period's charge after the line (Margin.After), rounded once
	Billed Decimal `json:"billed"` // the rounded amounts the period's earlier lines billed for it
}

// CarryAmount is the rounded amount of a late line whose margin is m, when
// the period's earlier lines billed billed: Round(m.After.Amount) − billed.
// It sets m.Carry to the two figures, so the line's stored breakdown says
// how its amount was made.
func (c Currency) CarryAmount(m *Margin, billed Decimal) (Decimal, error) {
	total, err := c.Round(m.After.Amount)
	if err != nil {
		return Decimal{}, err
	}
	if billed, err = c.places(billed); err != nil {
		return Decimal{}, fmt.Errorf("billed before: %w", err)
	}
	amount, err := sub(total, billed)
	if err != nil {
		return Decimal{}, err
	}
	if amount, err = c.places(amount); err != nil {
		return Decimal{}, err
	}
	m.Carry = &Carry{Total: total, Billed: billed}
	return amount, nil
}
