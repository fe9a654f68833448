package invoice

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// ChangeSource is what pricing a correction's changes reads: the rows, and
// what the closed periods they change billed.
type ChangeSource interface {
	ledger.UsageSource
	billedSource
}

// PriceChanges sets the money of each change a correction's dry run shows:
// what it adds to (or takes off) the customer's bill for the period, priced
// at the margin as a late line is, from the period's total in the ledger now
// (price(total + change) − price(total)) with the plan version that priced
// the period when it is closed (as the late line that bills the change will
// be: periodbill.go), else the one in force on its first day. A price by dimension prices each value's part of
// the change by that value's card from that value's own total, so the money
// is what the close's lines per value would add. The amount is exact, not
// rounded: a close rounds once per invoice line, and the lines a correction
// lands on may carry other usage too.
//
// Only sum and count meters are priced (a change to them adds to the
// total); a change without a plan, or of a meter the plan does not price,
// has no money. A value the price has no card for and no default is an
// error, as the close would refuse it.
func PriceChanges(ctx context.Context, src ChangeSource, pr *Pricing, meters ledger.Meters, changes []ledger.Change) error {
	if pr == nil {
		return nil
	}
	closed := newPricer(ctx, pr, src)
	for i := range changes {
		c := &changes[i]
		b, err := closed.billedFor(c.Customer, c.Start, c.End)
		if err != nil {
			return err
		}
		v := b.version
		if !b.fixed {
			if v, err = pr.versionOn(c.Customer, pricing.Date(c.Period+"-01")); err != nil {
				return err
			}
		}
		if v == nil {
			continue
		}
		p := v.Price(c.Meter)
		m := meters.Get(c.Meter)
		if p == nil || (m.Aggregation != ledger.AggSum && m.Aggregation != ledger.AggCount) {
			continue
		}
		// The change per value of the price's dimension; one part without.
		byValue := map[string]ledger.Total{"": c.Change}
		if p.By != "" {
			byValue = map[string]ledger.Total{}
			for props, q := range c.Parts {
				val := ledger.DimensionValue(props, p.By)
				byValue[val] = byValue[val].Plus(q)
			}
		}
		var amount pricing.Decimal
		for _, value := range slices.Sorted(maps.Keys(byValue)) {
			card, only := p, rowFilter{}
			if p.By != "" {
				if card = p.Card(value); card == nil {
					return fmt.Errorf("customer %q: meter %q would change usage with %s %q in %s, and plan %q from %s has no rate card for it and no default",
						c.Customer, c.Meter, p.By, value, c.Period, v.Name, v.EffectiveFrom)
				}
				only = rowFilter{p.By, value}
			}
			total, err := periodTotal(ctx, src, c.Customer, m, only, c.Start, c.End)
			if err != nil {
				return err
			}
			after, err := pricing.Add(total.Decimal(), byValue[value].Decimal())
			if err != nil {
				return err
			}
			margin, err := card.Margin(total.Decimal(), after)
			if err != nil {
				return fmt.Errorf("customer %q: %w", c.Customer, err)
			}
			if amount, err = pricing.Add(amount, margin.Amount); err != nil {
				return err
			}
		}
		c.Money, c.Currency = amount.String(), v.Currency
	}
	return nil
}

// periodTotal is the aggregate of customer's rows of meter m with event time
// in [start, end) in the ledger now, of one dimension value with only set.
func periodTotal(ctx context.Context, src ledger.UsageSource, customer string, m ledger.Meter, only rowFilter, start, end int64) (ledger.Total, error) {
	agg := ledger.NewAggregate(m.Spec()).Window(start, end)
	f := schema.LedgerFilter{Customer: customer, Meter: m.Name, From: start, To: end}
	err := ledgerScan(ctx, src, f, only.name != "" || m.Spec().ReadsProperties(), func(id int64, kind, _, _ string, qty ledger.Total, occ int64, props string, _ []byte) {
		if only.keeps(props) {
			agg.Add(kind, id, qty, occ, props)
		}
	})
	return agg.Value(), err
}
