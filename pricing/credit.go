package pricing

import (
	"cmp"
	"fmt"
	"slices"
)

// Prepaid credits: the amount a grant may hold, and the order in which
// grants pay an invoice. Which grants may pay it at all (its customer and
// currency, their effective and expiry dates, voids) is the ledger's to
// decide; this is the arithmetic, pure and exact.

// CreditAmount reads a grant's amount in c: above zero, in whole minor
// units of c (100.00 USD, 500 JPY; 100.005 USD is refused, never rounded)
// and below 10^15 like every configured value.
func (c Currency) CreditAmount(s string) (Decimal, error) {
	d, err := ParseDecimal(s)
	if err != nil {
		return Decimal{}, err
	}
	if d.Sign() <= 0 {
		return Decimal{}, fmt.Errorf("amount %s is not above zero", d)
	}
	if d.d.Cmp(maxMagnitude) >= 0 {
		return Decimal{}, fmt.Errorf("amount %s is not below 10^15", d)
	}
	out, err := c.places(d)
	if err != nil {
		return Decimal{}, fmt.Errorf("amount %s has more decimal places than %s's minor unit (%d)", d, c, c.scale)
	}
	return out, nil
}

// Amount writes x, whole minor units of c, with exactly the minor unit's
// places ("480.00" USD); an amount finer than the minor unit is an error.
func (c Currency) Amount(x Decimal) (Decimal, error) { return c.places(x) }

// CreditGrant is what the burn order knows of a grant that may pay an
// invoice: what it has left, and what orders it.
type CreditGrant struct {
	ID        string
	Available Decimal
	Priority  int64 // lower pays first
	ExpiresAt int64 // unix ms; 0: never (pays after every grant that expires)
	Seq       int64 // the grant's place in the credit ledger: older first
}

// CreditBurn is what one grant gives an invoice.
type CreditBurn struct {
	ID     string
	Amount Decimal
}

// BurnOrder sorts grants in the order they pay: priority (lower first),
// then the earliest expiry (a grant that never expires last), then the
// oldest.
func BurnOrder(grants []CreditGrant) {
	expiry := func(g CreditGrant) int64 {
		if g.ExpiresAt == 0 {
			return 1<<63 - 1
		}
		return g.ExpiresAt
	}
	slices.SortStableFunc(grants, func(a, b CreditGrant) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(expiry(a), expiry(b)), cmp.Compare(a.Seq, b.Seq))
	})
}

// Burn pays due (an invoice's total, whole minor units of c) from grants
// in the burn order, each giving what it has up to what is still due. It
// returns what each grant gave (only grants that gave something, in the
// order they gave) and the amount left due. A total of zero or below takes
// nothing.
func Burn(c Currency, due Decimal, grants []CreditGrant) ([]CreditBurn, Decimal, error) {
	left, err := c.places(due)
	if err != nil {
		return nil, Decimal{}, fmt.Errorf("credits: invoice total %w", err)
	}
	ordered := slices.Clone(grants)
	BurnOrder(ordered)
	var burns []CreditBurn
	for _, g := range ordered {
		if left.Sign() <= 0 {
			break
		}
		if g.Available.Sign() <= 0 {
			continue
		}
		give := minDecimal(g.Available, left)
		if left, err = sub(left, give); err != nil {
			return nil, Decimal{}, fmt.Errorf("credits: %w", err)
		}
		amt, err := c.places(give)
		if err != nil {
			return nil, Decimal{}, fmt.Errorf("credits: grant %s: %w", g.ID, err)
		}
		burns = append(burns, CreditBurn{ID: g.ID, Amount: amt})
	}
	if left, err = c.places(left); err != nil {
		return nil, Decimal{}, err
	}
	return burns, left, nil
}
