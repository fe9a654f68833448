package invoice

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// What a closed period has billed already, as a close that bills late usage
// of it reads it back: the plan version that priced the period (a late line
// is priced by it, not by today's configuration, so neither an edited plan
// nor an assignment or default plan changed since can re-price the period)
// and, per line, the rounded amounts billed for it (a late line carries
// them: pricing.Carry).

// billedSource is what a close reads of the invoices closed before it.
type billedSource interface {
	Invoices(ctx context.Context, f schema.InvoiceFilter) ([]schema.Invoice, error)
	GetInvoice(ctx context.Context, id int64) (*schema.Invoice, error)
	PeriodInvoiceLines(ctx context.Context, customer string, start, end int64) ([]schema.InvoiceLine, error)
}

type customerPeriod struct {
	customer   string
	start, end int64
}

// billedPeriod is what one customer's closed period has billed.
type billedPeriod struct {
	// fixed is whether an invoice already says which version prices the
	// period: the period's own invoice (version nil when no plan priced
	// it), else the first late line that priced its usage. A period closed
	// for all customers while this one had nothing to bill is not fixed:
	// its first late line is priced by the version in force on its first
	// day, and fixes it.
	fixed   bool
	version *pricing.Plan
	parts   map[int64]*pricing.Plan    // a split period's version of each part, by its start
	invoice int64                      // the invoice that fixed it
	amounts map[string]pricing.Decimal // rounded amounts billed, by lineKeyOf
}

// lineKeyOf is the key of a period's line: its meter, dimension value and
// part (its start; 0 when the period is not split).
func lineKeyOf(meter, dims string, part int64) string {
	return meter + "\x00" + dims + "\x00" + strconv.FormatInt(part, 10)
}

// billedFor reads what customer's period [start, end) has billed, once per close.
func (p *pricer) billedFor(customer string, start, end int64) (*billedPeriod, error) {
	k := customerPeriod{customer, start, end}
	if b, ok := p.billed[k]; ok {
		return b, nil
	}
	b := &billedPeriod{amounts: map[string]pricing.Decimal{}}
	if p.src == nil { // no invoice closed before (benchmarks)
		p.billed[k] = b
		return b, nil
	}
	invs, err := p.src.Invoices(p.ctx, schema.InvoiceFilter{Customer: customer, PeriodStart: start, PeriodEnd: end})
	if err != nil {
		return nil, fmt.Errorf("read the closed period's invoice: %w", err)
	}
	lines, err := p.src.PeriodInvoiceLines(p.ctx, customer, start, end)
	if err != nil {
		return nil, fmt.Errorf("read the closed period's lines: %w", err)
	}
	for _, l := range lines {
		if l.Amount == "" {
			continue
		}
		a, err := pricing.ParseDecimal(l.Amount)
		if err != nil {
			return nil, fmt.Errorf("invoice %d line %d: amount: %w", l.InvoiceID, l.LineNo, err)
		}
		key := lineKeyOf(l.Meter, l.Dimensions, l.PartStart)
		if b.amounts[key], err = pricing.Add(b.amounts[key], a); err != nil {
			return nil, err
		}
	}
	// The period's own invoice, not one of late usage in another currency
	// (whose version priced an earlier period).
	own := slices.IndexFunc(invs, func(inv schema.Invoice) bool { return inv.Currency == "" || inv.Fee != "" })
	switch {
	case own >= 0:
		inv := invs[own]
		b.fixed, b.invoice = true, inv.ID
		if inv.PriceSnapshot != "" {
			if b.version, err = p.storedVersion(inv.ID, inv.PriceSnapshot, ""); err != nil {
				return nil, err
			}
			parts, err := decodeParts(inv.Parts)
			if err != nil {
				return nil, fmt.Errorf("invoice %d: %w", inv.ID, err)
			}
			for _, pt := range parts {
				v, err := p.storedVersion(inv.ID, inv.PriceSnapshot, pt.Version)
				if err != nil {
					return nil, err
				}
				if b.parts == nil {
					b.parts = map[int64]*pricing.Plan{}
				}
				b.parts[pt.Start] = v
			}
		}
	default:
		for _, l := range lines {
			if l.PlanVersion == "" {
				continue
			}
			inv, err := p.src.GetInvoice(p.ctx, l.InvoiceID)
			if err != nil {
				return nil, fmt.Errorf("read invoice %d: %w", l.InvoiceID, err)
			}
			if b.version, err = p.storedVersion(inv.ID, inv.PriceSnapshot, l.PlanVersion); err != nil {
				return nil, err
			}
			b.fixed, b.invoice = true, inv.ID
			break
		}
	}
	p.billed[k] = b
	return b, nil
}

// foreignLate splits lines (customer's, for the period starting at start)
// into those of the customer's invoice and, by currency, the late lines
// priced in another currency than that invoice's: the customer moved to a
// plan in another currency after the late usage's period was closed. Each
// such currency gets an invoice of its own (priceLateOnly), since one
// invoice has one currency.
func (p *pricer) foreignLate(customer string, start int64, tz string, lines []InvoiceLine) ([]InvoiceLine, map[string][]InvoiceLine, error) {
	own, err := p.versionFor(customer, start, tz)
	if err != nil || own == nil {
		return lines, nil, err
	}
	kept := make([]InvoiceLine, 0, len(lines))
	var foreign map[string][]InvoiceLine
	for _, l := range lines {
		if l.Late {
			v, err := p.lateVersion(customer, l.PeriodStart, l.PeriodEnd, l.TZ, l.PartStart)
			if err != nil {
				return nil, nil, err
			}
			if v != nil && v.Currency != own.Currency {
				if foreign == nil {
					foreign = map[string][]InvoiceLine{}
				}
				foreign[v.Currency] = append(foreign[v.Currency], l)
				continue
			}
		}
		kept = append(kept, l)
	}
	return kept, foreign, nil
}

// charges reports whether customer's plan for the period starting at
// start charges a fee or a minimum (a nil pricer: no).
func (p *pricer) charges(customer string, start int64, tz string) bool {
	if p == nil {
		return false
	}
	v, err := p.versionFor(customer, start, tz)
	return err == nil && charges(v)
}

// lateVersion is the version that prices late usage of customer's closed
// period [start, end): the one that priced the period, else the one in
// force on its first day (nil, nil: no plan).
func (p *pricer) lateVersion(customer string, start, end int64, tz string, part int64) (*pricing.Plan, error) {
	b, err := p.billedFor(customer, start, end)
	if err != nil {
		return nil, err
	}
	if v, ok := b.parts[part]; ok {
		return v, nil // the part of a split period: its own version
	}
	if b.fixed {
		return b.version, nil
	}
	return p.versionFor(customer, start, tz)
}

// storedVersion is version key ("" for the invoice's own) of invoice id's
// price snapshot. When the configuration holds the same version unchanged,
// it is the configuration's, so that an invoice's snapshot holds one version
// per label; when it holds it changed (which LoadPricing refuses, and which
// only a database closed before that refusal can still show), the stored
// one prices the period, and price refuses an invoice that would need both.
func (p *pricer) storedVersion(invoice int64, snapshot, key string) (*pricing.Plan, error) {
	vs, ok := p.frozen[snapshot]
	if !ok {
		versions, own, err := readSnapshot(snapshot)
		if err != nil {
			return nil, fmt.Errorf("invoice %d: %w", invoice, err)
		}
		versions[""] = own
		for k, v := range versions {
			if k == "" || k == versionKey(v) {
				if versions[k], err = p.configured(v); err != nil {
					return nil, err
				}
			}
		}
		for k, v := range versions { // date-only aliases follow their version
			versions[k] = versions[versionKey(v)]
		}
		vs = versions
		p.frozen[snapshot] = vs
		for _, v := range vs {
			if _, ok := p.origin[v]; !ok {
				p.origin[v] = invoice
			}
		}
	}
	v := vs[key]
	if v == nil {
		return nil, fmt.Errorf("invoice %d: its price snapshot holds no version %s", invoice, key)
	}
	return v, nil
}

// configured is the configuration's version with v's name and date when it
// prices as v does, else v.
func (p *pricer) configured(v *pricing.Plan) (*pricing.Plan, error) {
	for _, c := range p.pr.Catalog.Versions(v.Name) {
		if c.EffectiveFrom != v.EffectiveFrom {
			continue
		}
		same, err := samePrices(c, v)
		if err != nil || !same {
			return v, err
		}
		return c, nil
	}
	return v, nil
}

// samePrices reports whether two versions price alike: the same snapshot
// JSON, which holds everything a version prices with (not its limits or
// spend, which price nothing).
func samePrices(a, b *pricing.Plan) (bool, error) {
	ja, err := json.Marshal(a)
	if err != nil {
		return false, err
	}
	jb, err := json.Marshal(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(ja, jb), nil
}

// ErrFrozenVersion is the outcome of a configuration that changed a plan
// version after it priced a closed invoice.
var ErrFrozenVersion = errors.New("a plan version that priced a closed invoice is frozen")

func frozenError(v *pricing.Plan, invoice int64) error {
	return fmt.Errorf("%w: plan %q version %s (effective_from %s) in the configuration differs from the version that priced invoice %d, stored with it "+
		"(hookledger invoice show %d --format json shows it): put that version back as it was, and add the change as a new version, "+
		"another entry under plans with name %q and a later effective_from, the first day of a period not yet closed",
		ErrFrozenVersion, v.Name, v.EffectiveFrom, v.EffectiveFrom, invoice, invoice, v.Name)
}

// storedCarry reads the carry of a stored line's breakdown (nil: none,
// a period's own line or a late line closed before carrying).
func storedCarry(charge string) (*pricing.Decimal, error) {
	if charge == "" {
		return nil, nil
	}
	var m pricing.Margin
	if err := json.Unmarshal([]byte(charge), &m); err != nil {
		return nil, fmt.Errorf("the stored breakdown cannot be read: %v", err)
	}
	if m.Carry == nil {
		return nil, nil
	}
	return &m.Carry.Billed, nil
}
