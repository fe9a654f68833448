package pricing

import "fmt"

// Proration for a period split at a plan change: each version's fee and
// minimum are charged for its part's share of the period's time.

// Prorate is x × num ⁄ den (num of den milliseconds of a period), rounded
// once to c's minor unit, half-even. The quotient is computed to 100
// significant digits before that one rounding: a share that does not end
// (15 of 31 days) never lies exactly half a minor unit from a step, and one
// that does end is computed exactly, so the rounding is the exact
// quotient's.
func (c Currency) Prorate(x Decimal, num, den int64) (Decimal, error) {
	if den <= 0 || num < 0 || num > den {
		return Decimal{}, fmt.Errorf("prorate: %d of %d is not a share of a period", num, den)
	}
	var product, share Decimal
	n, d := NewDecimal(num, 0), NewDecimal(den, 0)
	if _, err := exact.Mul(&product.d, &x.d, &n.d); err != nil {
		return Decimal{}, fmt.Errorf("prorate %s: %w", x, err)
	}
	if _, err := rounding.Quo(&share.d, &product.d, &d.d); err != nil {
		return Decimal{}, fmt.Errorf("prorate %s: %w", x, err)
	}
	return c.Round(share)
}

// PartSettlement is one part of a split period: the version's fee and
// minimum prorated by the part's share of the period, what its own lines
// billed, and the true-up to the prorated minimum.
type PartSettlement struct {
	Fee    Decimal
	Usage  Decimal
	TrueUp Decimal
}

// SettlePart settles the part of a period that is num of its den
// milliseconds, priced by this version: its fee prorated, usage the
// rounded amounts of the part's own lines, and the true-up to the prorated
// minimum (minimum × share, rounded once, less fee and usage, when that is
// positive). Every amount is whole minor units.
func (p *Plan) SettlePart(num, den int64, usage []Decimal) (PartSettlement, error) {
	var s PartSettlement
	var err error
	if p.Fee != nil {
		if s.Fee, err = p.cur.Prorate(*p.Fee, num, den); err != nil {
			return PartSettlement{}, err
		}
	} else if s.Fee, err = p.cur.places(NewDecimal(0, 0)); err != nil {
		return PartSettlement{}, err
	}
	if s.Usage, err = Sum(usage...); err != nil {
		return PartSettlement{}, err
	}
	if s.Usage, err = p.cur.places(s.Usage); err != nil {
		return PartSettlement{}, err
	}
	s.TrueUp, err = p.cur.places(NewDecimal(0, 0))
	if err != nil || p.Minimum == nil {
		return s, err
	}
	minimum, err := p.cur.Prorate(*p.Minimum, num, den)
	if err != nil {
		return PartSettlement{}, err
	}
	spent, err := add(s.Fee, s.Usage)
	if err != nil {
		return PartSettlement{}, err
	}
	short, err := sub(minimum, spent)
	if err != nil {
		return PartSettlement{}, err
	}
	if short.Sign() > 0 {
		if s.TrueUp, err = p.cur.places(short); err != nil {
			return PartSettlement{}, err
		}
	}
	return s, nil
}
