package ledger

import (
	"bytes"
	"context"
	"fmt"

	"github.com/hookledger/hookledger/schema"
)

// The two recomputations `hookledger verify` and the dispute trace share, so
// they can never disagree about a line or a chain link: checkLine (an
// invoice line against the ledger as it is now) and checkLink with its
// messages (a ledger row's place in the hash chain). Verify runs them over
// everything; the trace over the lines and rows it shows. lateFits is the
// rule close and verify share for where late usage is billed.

// lateFits reports whether late usage of the period ending at periodEnd may
// be billed on an invoice for the period starting at invoiceStart: only on
// an invoice whose period starts at or after the late period's end. Closing
// an earlier period (a backfill) is allowed but never bills a later
// period's late usage; that stays pending for the next invoice it fits.
// Close picks late usage by it and verify checks every late line by it, so
// the two cannot disagree.
func lateFits(periodEnd, invoiceStart int64) bool { return periodEnd <= invoiceStart }

// chainBreak is how the link between two consecutive ledger rows fails.
type chainBreak int

const (
	linkHolds    chainBreak = iota
	idsJump                 // the ids are not consecutive: rows between them were deleted
	prevMismatch            // the later row's prev_hash is not the earlier row's row_hash
)

// genesisLink stands before the first row of the ledger chain.
var genesisLink = schema.Link{ID: 0, RowHash: GenesisHash}

// checkLink checks the link from a to b, the row after a in id order (a is
// genesisLink before the first row). It compares stored hashes only, so one
// edited row is reported once (by its own hash, see rowChanged) and damage
// further on separately.
func checkLink(a, b schema.Link) chainBreak {
	switch {
	case b.ID != a.ID+1:
		return idsJump
	case !bytes.Equal(b.PrevHash, a.RowHash):
		return prevMismatch
	}
	return linkHolds
}

// linkMessage words a broken link between rows a and b as seen from row
// self, which is one of them: verify's walk and the trace's link to the row
// before speak from b, the trace's link to the row after from a.
func linkMessage(k chainBreak, a, b, self int64) string {
	switch {
	case k == idsJump:
		return fmt.Sprintf("ids jump from %d to %d: rows were deleted", a, b)
	case k == prevMismatch && self == b:
		return fmt.Sprintf("prev_hash does not match row %d's row_hash: the chain was rewritten", a)
	case k == prevMismatch:
		return fmt.Sprintf("row %d's prev_hash does not match this row's row_hash: this row was rewritten", b)
	}
	return ""
}

// rowChanged reports whether r's row_hash no longer recomputes from its
// contents and prev_hash, or its quantity columns are not the ones its
// quantity is stored as (an edit that kept the value, e.g. 2 with 0 decimals
// for 2000000 with 6, still edited the row).
func rowChanged(r *Row) bool { return r.altered || !bytes.Equal(r.Hash(r.PrevHash), r.RowHash) }

// rowChangedMessage words a changed row. Verify names the row's contents;
// the trace shows them beside the message.
func rowChangedMessage(r *Row, named bool) string {
	what := ""
	if named {
		what = fmt.Sprintf(" (customer %q, meter %q, quantity %s)", r.Customer, r.Meter, r.Quantity)
	}
	return "row_hash does not match the row's contents" + what + ": the row was changed after it was written"
}

func (r *Row) link() schema.Link {
	return schema.Link{ID: r.ID, PrevHash: r.PrevHash, RowHash: r.RowHash}
}

// checkRowLinks checks each row's place in the chain: its row_hash
// recomputes from its contents, its prev_hash is the row_hash of the row
// before, and the next row's prev_hash is its row_hash (a rewritten row
// whose own hash was recomputed shows up there). It reads the neighbours of
// all the rows at once (two queries for any number of rows), and the nearest
// row on either side of a gap one by one. Problems are keyed by row id; rows
// whose links hold are absent. Only the whole chain (Verify) proves nothing
// before a row was rewritten.
func checkRowLinks(ctx context.Context, src linkSource, rows []Row) (map[int64]string, error) {
	problems := map[int64]string{}
	ids := make([]int64, 0, 2*len(rows))
	for _, r := range rows {
		if r.ID > 1 {
			ids = append(ids, r.ID-1)
		}
		ids = append(ids, r.ID+1)
	}
	near, err := src.LedgerLinks(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read ledger rows: %w", err)
	}
	head, err := src.LastLedgerID(ctx)
	if err != nil {
		return nil, fmt.Errorf("read ledger head: %w", err)
	}
	for i := range rows {
		r := &rows[i]
		if rowChanged(r) {
			problems[r.ID] = rowChangedMessage(r, false)
			continue
		}
		self := r.link()
		prev, ok := near[r.ID-1]
		if !ok {
			prev = genesisLink
			if r.ID > 1 {
				// A gap below: the nearest row that is left.
				if p, found, err := src.LedgerLinkBefore(ctx, r.ID); err != nil {
					return nil, fmt.Errorf("read ledger row before %d: %w", r.ID, err)
				} else if found {
					prev = p
				}
			}
		}
		if k := checkLink(prev, self); k != linkHolds {
			problems[r.ID] = linkMessage(k, prev.ID, r.ID, r.ID)
			continue
		}
		next, ok := near[r.ID+1]
		if !ok && r.ID < head {
			// A gap above.
			if next, ok, err = src.LedgerLinkAfter(ctx, r.ID); err != nil {
				return nil, fmt.Errorf("read ledger row after %d: %w", r.ID, err)
			}
		}
		if !ok {
			continue // the head of the chain
		}
		if k := checkLink(self, next); k != linkHolds {
			problems[r.ID] = linkMessage(k, r.ID, next.ID, r.ID)
		}
	}
	return problems, nil
}

// LineCheck is an invoice line recomputed from the ledger as it is now.
type LineCheck struct {
	Rows     []Row  // the rows the line covers, in id order, as stored (CheckLine only)
	Digest   []byte // over the rows' ids and hashes recomputed from their contents
	Quantity Total  // the aggregate (for a late line, the change to the period's total)
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
	m := Meter{Name: l.Meter, Aggregation: l.Aggregation, Property: l.Property, Unit: l.Unit}
	got := newAggregate(m.spec())
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
		r := rowOf(rec)
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
	c.UsageRows, c.Adjustments, c.MaxID = got.rows, got.adjustments, la.maxID()
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
