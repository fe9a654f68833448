package invoice

import (
	"fmt"

	"github.com/hookledger/hookledger/pricing"
)

// Credits in checks and alerts (docs/entitlements.md): what a month's spend
// draws from a customer's credit before any invoice is closed. The writer
// decides the credit alerts with it and the entitlement checks of a limit
// of kind credit answer with it; it is Standing's rule on the spend rather
// than on a draft invoice, so it needs no close's computation: the grants
// that may pay at an instant (active, in the currency, in effect and not
// expired), drawn in the burn order (pricing.Burn), each giving what it
// has up to what is still drawn.

// CreditDraw is a customer's credit in one currency at one instant, and
// what one month's spend draws from it.
type CreditDraw struct {
	Currency  string
	Spent     pricing.Decimal // what draws: the month's spend
	Balance   pricing.Decimal // what the grants have left (the credit ledger's balances)
	Drawn     pricing.Decimal // what Spent takes from them: at most Balance
	Available pricing.Decimal // Balance − Drawn
	// Grants are the grants that may pay, in the burn order.
	Grants []GrantDraw
}

// GrantDraw is one grant in a CreditDraw.
type GrantDraw struct {
	Grant     *Grant
	Balance   pricing.Decimal
	Drawn     pricing.Decimal
	Available pricing.Decimal
}

// mayPayAt reports whether g may pay in currency at now: active (no void
// or expiry row), in effect, not past its expiry. A grant with nothing
// left may still: it draws nothing, and has nothing available.
func (g *Grant) mayPayAt(currency string, now int64) bool {
	return g.Status == "active" && g.Currency == currency && g.EffectiveAt <= now && (g.ExpiresAt == 0 || g.ExpiresAt > now)
}

// HasCredit reports whether any of grants may pay in some currency at now
// (and so whether a draw is worth pricing).
func HasCredit(grants []*Grant, now int64) bool {
	for _, g := range grants {
		if g.mayPayAt(g.Currency, now) {
			return true
		}
	}
	return false
}

// DrawCredit draws spent (whole minor units of currency) from those of
// grants (a customer's, replayed by GrantsOf) that may pay in currency at
// now, in the burn order. A spend of zero or below draws nothing.
func DrawCredit(grants []*Grant, currency string, spent pricing.Decimal, now int64) (*CreditDraw, error) {
	cur, err := pricing.ParseCurrency(currency)
	if err != nil {
		return nil, err
	}
	zero, _ := cur.Amount(pricing.NewDecimal(0, 0))
	d := &CreditDraw{Currency: cur.String(), Spent: spent, Balance: zero, Drawn: zero}
	var usable []pricing.CreditGrant
	byID := map[string]*Grant{}
	for _, g := range grants {
		if !g.mayPayAt(d.Currency, now) {
			continue
		}
		usable = append(usable, pricing.CreditGrant{ID: g.ID, Available: g.balance, Priority: g.Priority, ExpiresAt: g.ExpiresAt, Seq: g.Seq})
		byID[g.ID] = g
		if d.Balance, err = pricing.Add(d.Balance, g.balance); err != nil {
			return nil, err
		}
	}
	burns, _, err := pricing.Burn(cur, spent, usable)
	if err != nil {
		return nil, err
	}
	drawn := make(map[string]pricing.Decimal, len(burns))
	for _, b := range burns {
		drawn[b.ID] = b.Amount
	}
	pricing.BurnOrder(usable)
	for _, u := range usable {
		gd := GrantDraw{Grant: byID[u.ID], Balance: u.Available, Drawn: zero}
		if a, ok := drawn[u.ID]; ok {
			gd.Drawn = a
		}
		if gd.Available, err = subIn(cur, gd.Balance, gd.Drawn); err != nil {
			return nil, fmt.Errorf("credits: grant %s: %w", u.ID, err)
		}
		if d.Drawn, err = pricing.Add(d.Drawn, gd.Drawn); err != nil {
			return nil, err
		}
		d.Grants = append(d.Grants, gd)
	}
	if d.Balance, err = cur.Amount(d.Balance); err != nil {
		return nil, err
	}
	if d.Drawn, err = cur.Amount(d.Drawn); err != nil {
		return nil, err
	}
	if d.Available, err = subIn(cur, d.Balance, d.Drawn); err != nil {
		return nil, err
	}
	return d, nil
}

// subIn is x − y, exactly, written with cur's places.
func subIn(cur pricing.Currency, x, y pricing.Decimal) (pricing.Decimal, error) {
	d, err := pricing.Sub(x, y)
	if err != nil {
		return pricing.Decimal{}, err
	}
	return cur.Amount(d)
}
