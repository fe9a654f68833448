package stripe

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Metadata keys hookledger sets on the invoices and items it sends, and
// reads back: an invoice event links to its hookledger invoice by
// MetaInvoice, and a relay finds what an earlier attempt created by
// MetaPush (the invoice) and MetaItem (its items).
const (
	MetaInvoice = "hookledger_invoice"
	MetaPush    = "hookledger_push"
	MetaDigest  = "hookledger_digest"
	MetaItem    = "hookledger_item"
	MetaLine    = "hookledger_line"
)

// MaxInvoiceItems is how many items Stripe takes on one invoice.
const MaxInvoiceItems = 250

// InvoiceItemPush is one item of an invoice sent to Stripe, frozen at the
// close: a priced line, the plan's fee, or the minimum's true-up.
type InvoiceItemPush struct {
	Key         string `json:"key"`    // line:N, fee or minimum: unique on the invoice
	Amount      string `json:"amount"` // in the currency's minor units
	Description string `json:"description"`
	PeriodStart int64  `json:"period_start"` // unix seconds
	PeriodEnd   int64  `json:"period_end"`
	Line        int64  `json:"line,omitempty"`
	Digest      string `json:"digest,omitempty"` // the line's digest, hex
}

// InvoicePush is what sending inv to Stripe takes, as the close freezes it:
// one item per priced line (its rounded amount), the fee and the true-up
// as items of their own, and the prepaid credits it applied as one
// negative item, all in the currency's minor units, which add up to the
// invoice's amount due (its total when no credit paid it). ok false:
// nothing to send (no plan priced it, or its amount due is zero or below:
// Stripe would have nothing to charge).
// identity says the customer id is Stripe's own (customers: identity).
func InvoicePush(inv invoice.Invoice, identity bool, opts *config.StripeInvoices) (schema.StripeInvoicePush, bool, error) {
	m := inv.Money
	if m.Total == "" {
		return schema.StripeInvoicePush{}, false, nil
	}
	cur, err := pricing.ParseCurrency(m.Currency)
	if err != nil {
		return schema.StripeInvoicePush{}, false, fmt.Errorf("invoice %d: %w", inv.ID, err)
	}
	due := m.Total
	if m.AmountDue != "" {
		due = m.AmountDue
	}
	total, err := pricing.ParseDecimal(due)
	if err != nil {
		return schema.StripeInvoicePush{}, false, fmt.Errorf("invoice %d: amount due: %w", inv.ID, err)
	}
	if total.Sign() <= 0 {
		return schema.StripeInvoicePush{}, false, nil
	}
	start, end := inv.PeriodStart/1000, inv.PeriodEnd/1000
	var items []InvoiceItemPush
	sum := pricing.NewDecimal(0, 0)
	add := func(key, amount, description string, from, to, line int64) error {
		a, err := pricing.ParseDecimal(amount)
		if err != nil {
			return fmt.Errorf("invoice %d: %s: amount %q: %w", inv.ID, key, amount, err)
		}
		if sum, err = pricing.Add(sum, a); err != nil {
			return err
		}
		minor, err := cur.MinorUnits(a)
		if err != nil {
			return fmt.Errorf("invoice %d: %s: %w", inv.ID, key, err)
		}
		items = append(items, InvoiceItemPush{Key: key, Amount: minor, Description: description, PeriodStart: from, PeriodEnd: to, Line: line})
		return nil
	}
	for _, l := range inv.Lines {
		if l.Money.Amount == "" {
			continue // a meter the plan does not price charges nothing
		}
		if err := add("line:"+strconv.FormatInt(l.LineNo, 10), l.Money.Amount, lineText(l), l.PeriodStart/1000, l.PeriodEnd/1000, l.LineNo); err != nil {
			return schema.StripeInvoicePush{}, false, err
		}
		items[len(items)-1].Digest = hex.EncodeToString(l.Digest)
	}
	if len(inv.Parts) > 0 {
		// A period split at a plan change: each part's prorated fee and
		// true-up as items of their own, for the part's dates.
		for i, pt := range inv.Parts {
			plan, _, _ := strings.Cut(pt.Version, "@")
			days := fmt.Sprintf("%s, %s", inv.Period, invoice.PartDays(pt, inv.TZ))
			if nonZero(pt.Fee) {
				if err := add(fmt.Sprintf("fee:%d", i+1), pt.Fee, fmt.Sprintf("Plan %s, %s", plan, days), pt.Start/1000, pt.End/1000, 0); err != nil {
					return schema.StripeInvoicePush{}, false, err
				}
			}
			if nonZero(pt.TrueUp) {
				if err := add(fmt.Sprintf("minimum:%d", i+1), pt.TrueUp, fmt.Sprintf("Plan %s minimum, %s", plan, days), pt.Start/1000, pt.End/1000, 0); err != nil {
					return schema.StripeInvoicePush{}, false, err
				}
			}
		}
	} else {
		if nonZero(m.Fee) {
			if err := add("fee", m.Fee, fmt.Sprintf("Plan %s, %s", m.Plan, inv.Period), start, end, 0); err != nil {
				return schema.StripeInvoicePush{}, false, err
			}
		}
		if nonZero(m.TrueUp) {
			if err := add("minimum", m.TrueUp, fmt.Sprintf("Plan %s minimum, %s", m.Plan, inv.Period), start, end, 0); err != nil {
				return schema.StripeInvoicePush{}, false, err
			}
		}
	}
	if m.Credits != "" {
		var grants []string
		for _, c := range inv.Credits {
			grants = append(grants, c.Grant+" "+c.Amount)
		}
		if err := add("credits", "-"+m.Credits, fmt.Sprintf("Prepaid credits applied, %s: %s", inv.Period, strings.Join(grants, ", ")), start, end, 0); err != nil {
			return schema.StripeInvoicePush{}, false, err
		}
	}
	if sum.Cmp(total) != 0 {
		return schema.StripeInvoicePush{}, false, fmt.Errorf("invoice %d: its items add up to %s, its amount due is %s", inv.ID, sum, total)
	}
	totalMinor, err := cur.MinorUnits(total)
	if err != nil {
		return schema.StripeInvoicePush{}, false, fmt.Errorf("invoice %d: %w", inv.ID, err)
	}
	b, err := json.Marshal(items)
	if err != nil {
		return schema.StripeInvoicePush{}, false, err
	}
	digest := hex.EncodeToString(inv.Digest)
	p := schema.StripeInvoicePush{InvoiceID: inv.ID, Identifier: Identifier("invoice", strconv.FormatInt(inv.ID, 10), digest),
		CustomerID: inv.Customer, Currency: cur.String(), Total: due, TotalMinor: totalMinor, Items: string(b),
		CollectionMethod: opts.CollectionMethod}
	if identity {
		p.StripeCustomer = inv.Customer
	}
	if p.CollectionMethod == config.SendInvoice {
		p.DaysUntilDue = opts.DaysUntilDue
	}
	if opts.Finalize == nil || *opts.Finalize {
		p.Finalize = 1
	}
	return p, true, nil
}

// lineText is an item's description: the meter, the period, the dimension
// value, the quantity and the price version that priced it.
func lineText(l invoice.InvoiceLine) string {
	var b strings.Builder
	b.WriteString(l.Meter)
	if l.Dimensions != "" {
		var dims map[string]string
		if json.Unmarshal([]byte(l.Dimensions), &dims) == nil {
			for _, k := range slices.Sorted(maps.Keys(dims)) {
				fmt.Fprintf(&b, " %s=%s", k, dims[k])
			}
		}
	}
	fmt.Fprintf(&b, ", %s", l.Period)
	if l.Late {
		b.WriteString(" (late usage)")
	}
	fmt.Fprintf(&b, ": %s", l.Quantity)
	if l.Unit != "" {
		fmt.Fprintf(&b, " %s", l.Unit)
	}
	if l.Money.PlanVersion != "" {
		fmt.Fprintf(&b, " at %s", l.Money.PlanVersion)
	}
	return b.String()
}

func nonZero(amount string) bool {
	d, err := pricing.ParseDecimal(amount)
	return err == nil && d.Sign() != 0
}

// CloseInvoices writes the push of each of invoices that has money to
// charge, in the close's transaction (stripe.invoices).
func (s *Sync) CloseInvoices(ctx context.Context, tx *schema.CloseTx, invoices []invoice.Invoice, now int64) error {
	if s == nil || s.Invoices == nil || !s.Invoices.Enabled {
		return nil
	}
	for _, inv := range invoices {
		p, ok, err := InvoicePush(inv, s.Customers == config.StripeIdentity, s.Invoices)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := tx.InsertStripeInvoicePush(ctx, p, config.StripeInvoicesDestination, now); err != nil {
			return err
		}
	}
	return nil
}
