package pricing

import (
	"fmt"
	"strings"
)

// Describe writes the margin as people check it by hand: each tier's
// quantity × unit (+ flat) = amount, the packages billed, or quantity × unit,
// and for a late line (priced from a total already billed) both charges and
// their difference. p is the price that made it, from the invoice's price
// snapshot; with p nil (a snapshot that cannot be read) what the breakdown
// alone holds is shown. Numbers are the exact values with trailing
// fractional zeros left out ("11.000000" is 11); the rounded amount is the
// invoice line's own.
func (m Margin) Describe(p *Price) string {
	if m.Before.Quantity.Sign() == 0 && m.Before.Amount.Sign() == 0 {
		return m.After.describe(p)
	}
	return fmt.Sprintf("price(%s) − price(%s) = %s − %s = %s; price(%s): %s; price(%s): %s",
		short(m.After.Quantity), short(m.Before.Quantity), short(m.After.Amount), short(m.Before.Amount), short(m.Amount),
		short(m.After.Quantity), m.After.describe(p), short(m.Before.Quantity), m.Before.describe(p))
}

// describe writes one charge's breakdown, ending with its amount.
func (c Charge) describe(p *Price) string {
	switch {
	case len(c.Tiers) > 0:
		parts := make([]string, len(c.Tiers))
		for i, t := range c.Tiers {
			flat := ""
			if t.Flat.Sign() != 0 {
				flat = " + " + short(t.Flat)
			}
			parts[i] = fmt.Sprintf("%s × %s%s = %s", short(t.Quantity), short(t.Unit), flat, short(t.Amount))
		}
		if len(parts) > 1 {
			parts = append(parts, "total "+short(c.Amount))
		}
		return strings.Join(parts, "; ")
	case c.Packages != nil && p != nil && p.Amount != nil && p.Size != nil:
		free := ""
		if p.Free != nil && p.Free.Sign() != 0 {
			free = ", " + short(*p.Free) + " free"
		}
		return fmt.Sprintf("%s package(s) of %s × %s = %s (%s units%s)", short(*c.Packages), short(*p.Size), short(*p.Amount),
			short(c.Amount), short(c.Quantity), free)
	case c.Packages != nil:
		return fmt.Sprintf("%s package(s) = %s (%s units)", short(*c.Packages), short(c.Amount), short(c.Quantity))
	case p != nil && p.Model == Unit && p.Unit != nil:
		return fmt.Sprintf("%s × %s = %s", short(c.Quantity), short(*p.Unit), short(c.Amount))
	}
	return fmt.Sprintf("%s units = %s", short(c.Quantity), short(c.Amount))
}

// short writes d without trailing fractional zeros: 11.000000 is "11",
// 99.000 is "99", 0.0005 stays.
func short(d Decimal) string {
	s := d.String()
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}
