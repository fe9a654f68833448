package ledger

import (
	"cmp"
	"slices"
)

// covered is one ledger row an invoice line covers, as the digest sees it.
type covered struct {
	id   int64
	hash []byte
}

// rowsDigest is SHA-256 over the covered rows' ids and row hashes in id
// order. A row hash commits to the row's contents and, through the chain, to
// every row before it, so the digest pins exactly which rows were billed.
func rowsDigest(rows []covered) []byte {
	slices.SortFunc(rows, func(a, b covered) int { return cmp.Compare(a.id, b.id) })
	c := newCanon()
	for _, r := range rows {
		c.int(r.id)
		c.raw(r.hash)
	}
	return c.sum()
}

// invoiceDigest is SHA-256 over every stored field of the invoice and its
// lines, so an edit to a closed invoice's numbers is detectable.
func invoiceDigest(inv *Invoice) []byte {
	// v2 adds the money of a priced invoice; an invoice without a plan keeps
	// v1, so every invoice closed before prices existed verifies unchanged.
	// v3 is an invoice with a line beyond 64-bit micro-units (wide
	// quantities): its quantities are decimal text, its money fields always
	// present. No invoice before wide quantities had such a line.
	// v4 is an invoice with a line of one dimension value (prices by
	// dimension, dimprice.go): v3's encoding plus each line's dimensions, so
	// the value a line bills is covered. No invoice before 0022 has one,
	// and an invoice without one keeps the version it would have had.
	// v5 is an invoice prepaid credits paid (credits.go): v4's encoding
	// (every line's dimensions, decimal quantities) plus what each grant
	// gave and the amount due. No invoice before credits has any, and an
	// invoice without them keeps the version it would have had.
	// v6 is an invoice whose period is split at a plan change (parts.go):
	// v5's encoding plus each line's part bounds and the parts. No invoice
	// before 0034 is split, and an invoice that is not keeps the version it
	// would have had.
	credited, split := len(inv.Credits) > 0, len(inv.Parts) > 0
	wide, dimensional := false, credited || split
	for _, l := range inv.Lines {
		_, fits := l.Quantity.Micro64()
		wide = wide || !fits
		dimensional = dimensional || l.Dimensions != ""
	}
	wide = wide || dimensional
	priced := inv.Money.Currency != "" || wide
	c := newCanon()
	switch {
	case split:
		c.str("hookledger-invoice-v6")
	case credited:
		c.str("hookledger-invoice-v5")
	case dimensional:
		c.str("hookledger-invoice-v4")
	case wide:
		c.str("hookledger-invoice-v3")
	case priced:
		c.str("hookledger-invoice-v2")
	default:
		c.str("hookledger-invoice-v1")
	}
	c.int(inv.ID)
	c.int(inv.CloseID)
	c.str(inv.Customer)
	c.str(inv.Period)
	c.str(inv.TZ)
	c.int(inv.PeriodStart)
	c.int(inv.PeriodEnd)
	c.int(inv.Cutoff)
	c.int(inv.LedgerHead)
	c.int(inv.ClosedAt)
	c.int(int64(len(inv.Lines)))
	for _, l := range inv.Lines {
		c.int(l.LineNo)
		c.str(l.Customer)
		c.str(l.Meter)
		if dimensional {
			c.str(l.Dimensions)
		}
		if split {
			c.int(l.PartStart)
			c.int(l.PartEnd)
		}
		c.str(string(l.Aggregation))
		c.str(l.Property)
		c.str(l.Unit)
		late := int64(0)
		if l.Late {
			late = 1
		}
		c.int(late)
		c.str(l.Period)
		c.str(l.TZ)
		c.int(l.PeriodStart)
		c.int(l.PeriodEnd)
		c.int(l.AfterID)
		c.int(l.ThroughID)
		if wide {
			c.str(l.Quantity.String())
		} else {
			n, _ := l.Quantity.Micro64()
			c.int(n)
		}
		c.int(l.Rows)
		c.int(l.Adjustments)
		c.int(l.MaxID)
		c.bytes(l.Digest)
		if priced {
			c.str(l.Money.BilledBefore)
			c.str(l.Money.PlanVersion)
			c.str(l.Money.AmountPrecise)
			c.str(l.Money.Amount)
			c.str(l.Money.Charge)
		}
	}
	if priced {
		m := inv.Money
		c.str(m.Plan)
		c.str(m.Currency)
		c.bytes(m.PriceDigest)
		c.str(m.Fee)
		c.str(m.TrueUp)
		c.str(m.Total)
	}
	if split {
		c.str(inv.partsJSON())
	}
	if credited || split {
		c.int(int64(len(inv.Credits)))
		for _, cr := range inv.Credits {
			c.str(cr.Grant)
			c.str(cr.Amount)
			c.str(cr.Balance)
		}
		c.str(inv.Money.Credits)
		c.str(inv.Money.AmountDue)
	}
	return c.sum()
}
