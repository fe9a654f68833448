package invoice

import (
	"cmp"
	"slices"

	"github.com/hookledger/hookledger/ledger"
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
	c := ledger.NewCanon()
	for _, r := range rows {
		c.Int(r.id)
		c.Raw(r.hash)
	}
	return c.Sum()
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
	c := ledger.NewCanon()
	switch {
	case split:
		c.Str("hookledger-invoice-v6")
	case credited:
		c.Str("hookledger-invoice-v5")
	case dimensional:
		c.Str("hookledger-invoice-v4")
	case wide:
		c.Str("hookledger-invoice-v3")
	case priced:
		c.Str("hookledger-invoice-v2")
	default:
		c.Str("hookledger-invoice-v1")
	}
	c.Int(inv.ID)
	c.Int(inv.CloseID)
	c.Str(inv.Customer)
	c.Str(inv.Period)
	c.Str(inv.TZ)
	c.Int(inv.PeriodStart)
	c.Int(inv.PeriodEnd)
	c.Int(inv.Cutoff)
	c.Int(inv.LedgerHead)
	c.Int(inv.ClosedAt)
	c.Int(int64(len(inv.Lines)))
	for _, l := range inv.Lines {
		c.Int(l.LineNo)
		c.Str(l.Customer)
		c.Str(l.Meter)
		if dimensional {
			c.Str(l.Dimensions)
		}
		if split {
			c.Int(l.PartStart)
			c.Int(l.PartEnd)
		}
		c.Str(string(l.Aggregation))
		c.Str(l.Property)
		c.Str(l.Unit)
		late := int64(0)
		if l.Late {
			late = 1
		}
		c.Int(late)
		c.Str(l.Period)
		c.Str(l.TZ)
		c.Int(l.PeriodStart)
		c.Int(l.PeriodEnd)
		c.Int(l.AfterID)
		c.Int(l.ThroughID)
		if wide {
			c.Str(l.Quantity.String())
		} else {
			n, _ := l.Quantity.Micro64()
			c.Int(n)
		}
		c.Int(l.Rows)
		c.Int(l.Adjustments)
		c.Int(l.MaxID)
		c.Bytes(l.Digest)
		if priced {
			c.Str(l.Money.BilledBefore)
			c.Str(l.Money.PlanVersion)
			c.Str(l.Money.AmountPrecise)
			c.Str(l.Money.Amount)
			c.Str(l.Money.Charge)
		}
	}
	if priced {
		m := inv.Money
		c.Str(m.Plan)
		c.Str(m.Currency)
		c.Bytes(m.PriceDigest)
		c.Str(m.Fee)
		c.Str(m.TrueUp)
		c.Str(m.Total)
	}
	if split {
		c.Str(inv.partsJSON())
	}
	if credited || split {
		c.Int(int64(len(inv.Credits)))
		for _, cr := range inv.Credits {
			c.Str(cr.Grant)
			c.Str(cr.Amount)
			c.Str(cr.Balance)
		}
		c.Str(inv.Money.Credits)
		c.Str(inv.Money.AmountDue)
	}
	return c.Sum()
}
