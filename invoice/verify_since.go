package invoice

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// An incremental verify (hookledger verify --since): a full verify that
// found nothing wrong printed the anchors it had verified up to
// (VerifyReport.Verified); a later verify from them proves that each still
// holds, then runs every check over what was appended after them only, in
// time proportional to the new rows. What it does not prove is that nothing
// at or before the anchors was edited since: that is the full verify's.

// sinceOf is where a verify from anchors starts: one anchor per chain.
func sinceOf(anchors []ledger.Anchor) (ledger.Since, error) {
	s := ledger.Since{Incremental: true, Named: map[string]bool{}}
	for _, a := range anchors {
		if s.Named[a.Chain] {
			return ledger.Since{}, fmt.Errorf("%w: two %s anchors (%d and %d): give one anchor per chain, as verify --save writes them",
				ErrBadSince, a.Chain, s.ChainID(a.Chain), a.ID)
		}
		s.Named[a.Chain] = true
		switch a.Chain {
		case ledger.ChainLedger:
			s.Ledger = a.ID
		case ledger.ChainReceipts:
			s.Receipts = a.ID
		case ledger.ChainCloses:
			s.Closes = a.ID
		case ledger.ChainCredits:
			s.Credits = a.ID
		}
	}
	return s, nil
}

// ErrBadSince is anchors an incremental verify cannot start from.
var ErrBadSince = errors.New("bad --since anchors")

// VerifySince is the incremental verify: it proves that each of from (the
// anchors a verify printed, one per chain) still holds, then runs Verify's
// checks over what was appended after them (VerifySource's rows with ids
// above the anchors, the closes after the closes anchor with every invoice
// they wrote, the credit entries after the credits anchor with the grants
// they touch, the months the new ledger rows fall in); a chain with no
// anchor in from is checked in full. SQLite's integrity_check, which reads
// every page, is skipped. anchors are checked as Verify checks them.
// ErrBadSince: from names a chain twice.
func VerifySince(ctx context.Context, db VerifySource, from []ledger.Anchor, anchors ...ledger.Anchor) (*VerifyReport, error) {
	s, err := sinceOf(from)
	if err != nil {
		return nil, err
	}
	r := &VerifyReport{}
	for _, a := range from {
		r.Since = append(r.Since, a.String())
	}
	c, err := ledger.VerifyAnchors(ctx, db, "since anchors", from)
	if err != nil {
		return r, fmt.Errorf("verify since anchors: %w", err)
	}
	c.From = "each anchor --since starts from still names its row with that hash"
	r.Checks = append(r.Checks, c)
	return r, verify(ctx, db, r, s, anchors)
}

// invoiceNeighbours is invs (the invoices of the closes after the closes
// anchor) and the invoices holding any other line of the same customers'
// periods: what billedTwice and checkPeriodMoney compare a new invoice's
// lines with.
func invoiceNeighbours(ctx context.Context, db VerifySource, invs []Invoice) ([]Invoice, error) {
	type customerPeriod struct {
		customer   string
		start, end int64
	}
	have := map[int64]bool{}
	periods := map[customerPeriod]bool{}
	for _, inv := range invs {
		have[inv.ID] = true
		for _, l := range inv.Lines {
			periods[customerPeriod{l.Customer, l.PeriodStart, l.PeriodEnd}] = true
		}
	}
	more := map[int64]bool{}
	for p := range periods {
		lines, err := db.PeriodInvoiceLines(ctx, p.customer, p.start, p.end)
		if err != nil {
			return nil, fmt.Errorf("read the lines of %s's period: %w", p.customer, err)
		}
		for _, l := range lines {
			if !have[l.InvoiceID] {
				more[l.InvoiceID] = true
			}
		}
	}
	out := slices.Clone(invs)
	for _, id := range slices.Sorted(maps.Keys(more)) {
		inv, err := GetInvoice(ctx, db, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *inv)
	}
	return out, nil
}

// grantHistories is every entry of each grant an entry of es belongs to,
// grant by grant, each in id order: what replaying those grants' balances
// needs when es starts at the credits anchor.
func grantHistories(ctx context.Context, db VerifySource, es []schema.CreditEntry) ([]schema.CreditEntry, error) {
	var out []schema.CreditEntry
	seen := map[string]bool{}
	for _, e := range es {
		if seen[e.GrantID] {
			continue
		}
		seen[e.GrantID] = true
		hist, err := db.CreditEntries(ctx, schema.CreditFilter{GrantID: e.GrantID})
		if err != nil {
			return nil, err
		}
		out = append(out, hist...)
	}
	return out, nil
}
