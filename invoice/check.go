package invoice

import (
	"bytes"
	"context"
	"fmt"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// The recomputation `hookledger verify` and the dispute trace share, so
// they can never disagree about a line: checkLine (an invoice line against
// the ledger as it is now; a ledger row's place in the hash chain is
// chaincheck.go's). Verify runs it over every line; the trace over the
// lines it shows. lateFits is the rule close and verify share for where
// late usage is billed.

// lateFits reports whether late usage of the period ending at periodEnd may
// be billed on an invoice for the period starting at invoiceStart: only on
// an invoice whose period starts at or after the late period's end. Closing
// an earlier period (a backfill) is allowed but never bills a later
// period's late usage; that stays pending for the next invoice it fits.
// Close picks late usage by it and verify checks every late line by it, so
// the two cannot disagree.
func lateFits(periodEnd, invoiceStart int64) bool { return periodEnd <= invoiceStart }

// LineCheck is an invoice line recomputed from the ledger as it is now.
type LineCheck struct {
	Rows     []ledger.Row // the rows the line covers, in id order, as stored (CheckLine only)
	Digest   []byte       // over the rows' ids and hashes recomputed from their contents
	Quantity ledger.Total // the aggregate (for a late line, the change to the period's total)
	// BilledBefore is the period's total up to the line's AfterID: what the
	// line's amount is priced at the margin from.
	BilledBefore string
	UsageRows    int64
	Adjustments  int64
	MaxID        int64
	// Problem is "" when the line still matches what was frozen, else what
	// differs, in the words `hookledger verify` uses.
	Problem string
}

// checkLine recomputes invoice line l from the ledger in two scans: the rows
// it covers (their counts, and the digest over their hashes recomputed from
// their contents) and the period's rows up to its head (its quantity, as the
// close computed it). keepRows keeps the covered rows for the caller (the
// trace shows them; verify needs only their digest, and a line can cover
// many rows).
func checkLine(ctx context.Context, src lineSource, l InvoiceLine, keepRows bool) (*LineCheck, error) {
	m := ledger.Meter{Name: l.Meter, Aggregation: l.Aggregation, Property: l.Property, Unit: l.Unit}
	got := ledger.NewAggregate(m.Spec())
	c := &LineCheck{}
	la := lineAcc{agg: got}
	// A line of one dimension value covers that value's rows only.
	only, err := filterOf(l.Dimensions)
	if err != nil {
		c.Problem = err.Error()
		return c, nil
	}
	from, to := l.window() // its part of a split period, else its period
	f := schema.LedgerFilter{Customer: l.Customer, Meter: l.Meter, From: from, To: to, AfterID: l.AfterID, ThroughID: l.ThroughID}
	err = src.ScanLedger(ctx, f, func(rec *schema.LedgerRow) error {
		if !only.keeps(rec.Properties) {
			return nil
		}
		r := ledger.StoredRow(rec)
		// The hash recomputed from the row as it is now, not the stored
		// one: an edit that left row_hash alone still changes the digest.
		la.add(r.Kind, r.ID, r.Quantity, r.OccurredAt, r.Properties, r.Hash(r.PrevHash))
		if keepRows {
			c.Rows = append(c.Rows, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read rows of invoice %d line %d: %w", l.InvoiceID, l.LineNo, err)
	}
	c.UsageRows, c.Adjustments, c.MaxID = got.Rows, got.Adjustments, la.maxID()
	c.Digest = rowsDigest(la.rows)
	exact, before, err := aggregateDelta(ctx, src, l.Customer, m, only, from, to, l.AfterID, l.ThroughID)
	if err != nil {
		return nil, fmt.Errorf("recompute invoice %d line %d: %w", l.InvoiceID, l.LineNo, err)
	}
	c.Quantity, c.BilledBefore = exact, before.String()
	switch {
	case c.UsageRows != l.Rows || c.Adjustments != l.Adjustments || c.MaxID != l.MaxID:
		c.Problem = fmt.Sprintf("covers %d usage and %d adjustment rows up to id %d now, %d and %d up to id %d when closed: ledger rows were added or removed",
			c.UsageRows, c.Adjustments, c.MaxID, l.Rows, l.Adjustments, l.MaxID)
	case !bytes.Equal(c.Digest, l.Digest):
		c.Problem = "digest of the covered rows differs: a covered ledger row was changed (see the hash chain check)"
	case !exact.Equal(l.Quantity):
		c.Problem = fmt.Sprintf("quantity recomputes to %s, invoice says %s", exact, l.Quantity)
	}
	return c, nil
}
