package invoice

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/hookledger/hookledger/chainhash"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Every bill is accounted for (DESIGN.md, invariant 9). An invoice's digest
// proves its numbers, and its lines' digests the rows they bill; what they
// cannot prove is that an invoice is still there. So each close is sealed in
// its transaction with the count and digest of the invoices it wrote,
// chained close after close (chainhash.CloseSeal): an invoice deleted,
// added or swapped after the close no longer matches its seal, a deleted
// close or seal breaks the next link, and the last seal is an anchor
// (`ledger head`) that catches a truncated tail.

// sealClose seals close c, which wrote invs (in id order), linking it to
// the last seal.
func sealClose(ctx context.Context, tx closeStore, c schema.PeriodClose, invs []Invoice) error {
	_, prev, err := tx.LastCloseSeal(ctx)
	if err != nil {
		return err
	}
	sc := schema.SealedClose{PeriodClose: c}
	s := sc.Link()
	s.Invoices, s.InvoicesDigest = int64(len(invs)), chainhash.InvoicesDigest(sealedOf(invs))
	s.PrevHash = prev
	s.RowHash = s.Hash(prev)
	if err := tx.InsertCloseSeal(ctx, s); err != nil {
		return fmt.Errorf("seal close %d: %w", c.ID, err)
	}
	return nil
}

func sealedOf(invs []Invoice) []chainhash.SealedInvoice {
	out := make([]chainhash.SealedInvoice, len(invs))
	for i, inv := range invs {
		out[i] = chainhash.SealedInvoice{ID: inv.ID, Digest: inv.Digest}
	}
	return out
}

// verifySeals checks every close against its seal: the invoices present
// now are the ones it wrote (count and digest), its fields are the sealed
// ones, and each seal links to the one before it. An incremental verify
// checks the closes from the anchored one on (closes are few: it reads them
// all, and the invoices of those it checks).
func verifySeals(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "close seals", From: s.From(s.Rows(ledger.ChainCloses, "from"))}
	closes, orphans, err := db.SealedCloses(ctx)
	if errors.Is(err, schema.ErrNotSealed) || errors.Is(err, schema.ErrNoInvoices) {
		c.Skipped = err.Error()
		return c, nil
	}
	if err != nil {
		return c, err
	}
	invs, err := db.SealedInvoices(ctx, s.Closes)
	if err != nil {
		return c, err
	}
	sealed := map[int64]bool{}
	prev := chainhash.Genesis
	for i := range closes {
		cl := &closes[i]
		if cl.ID < s.Closes {
			if cl.Sealed {
				prev = cl.Seal.RowHash // the chain from the anchored close links to it
			}
			continue
		}
		c.Checked++
		sealed[cl.ID] = true
		if !cl.Sealed {
			c.Add(ledger.Problem{Table: "period_closes", ID: cl.ID, Msg: fmt.Sprintf("close %d (%s) has no seal: the seal was deleted, so its invoices cannot be counted", cl.ID, closeLabel(cl.PeriodClose))})
			continue
		}
		s := cl.Link()
		if !bytes.Equal(s.PrevHash, prev) {
			c.Add(ledger.Problem{Table: "close_seals", ID: cl.ID, Msg: "prev_hash does not match the seal before it: a close or its seal before this one was deleted or changed"})
		}
		if !bytes.Equal(s.Hash(s.PrevHash), s.RowHash) {
			c.Add(ledger.Problem{Table: "close_seals", ID: cl.ID, Msg: fmt.Sprintf("row_hash does not match close %d's fields and seal: the close or its seal was changed", cl.ID)})
		}
		have := invs[cl.ID]
		if n := int64(len(have)); n != s.Invoices {
			c.Add(ledger.Problem{Table: "period_closes", ID: cl.ID, Msg: fmt.Sprintf("close %d (%s) wrote %d invoices, %d are present%s: invoices were deleted or added after the close",
				cl.ID, closeLabel(cl.PeriodClose), s.Invoices, n, idList(have))})
		} else if !bytes.Equal(chainhash.InvoicesDigest(have), s.InvoicesDigest) {
			c.Add(ledger.Problem{Table: "period_closes", ID: cl.ID, Msg: fmt.Sprintf("close %d (%s): its invoices%s are not the ones it wrote (their ids or digests changed)",
				cl.ID, closeLabel(cl.PeriodClose), idList(have))})
		}
		prev = s.RowHash
	}
	for _, o := range orphans {
		if o.CloseID < s.Closes {
			continue
		}
		c.Add(ledger.Problem{Table: "close_seals", ID: o.CloseID, Msg: fmt.Sprintf("seal of close %d, which does not exist: the close was deleted", o.CloseID)})
	}
	for _, id := range slices.Sorted(maps.Keys(invs)) {
		if !sealed[id] {
			c.Add(ledger.Problem{Table: "invoices", ID: invs[id][0].ID, Msg: fmt.Sprintf("invoice of close %d, which does not exist", id)})
		}
	}
	return c, nil
}

// closeLabel names a close in messages: "2026-10 for all customers".
func closeLabel(c schema.PeriodClose) string {
	who := "for all customers"
	if c.Customer != "" {
		who = fmt.Sprintf("for %q", c.Customer)
	}
	return fmt.Sprintf("%s in %s %s", c.Period, c.TZ, who)
}

func idList(invs []chainhash.SealedInvoice) string {
	if len(invs) == 0 {
		return ""
	}
	ids := make([]string, len(invs))
	for i, inv := range invs {
		ids[i] = strconv.FormatInt(inv.ID, 10)
	}
	return " (" + strings.Join(ids, ", ") + ")"
}

// LoadAnchors is every chain's end as an anchor: the ledger, the receipts,
// the closes and the credits. The closes' end is the last seal
// (closes:0:<genesis> when nothing was closed yet), the credits' the last
// entry (credits:0:<genesis> when none); a database older than seals, or
// than credits, has no such anchor.
func LoadAnchors(ctx context.Context, src AnchorSource) ([]ledger.Anchor, error) {
	h, err := ledger.LoadHead(ctx, src)
	if err != nil {
		return nil, err
	}
	as := h.Anchors()
	id, hash, err := src.LastCloseSeal(ctx)
	switch {
	case errors.Is(err, schema.ErrNotSealed):
	case err != nil:
		return nil, err
	default:
		as = append(as, ledger.Anchor{Chain: ledger.ChainCloses, ID: id, Hash: hash})
	}
	last, err := src.LastCredit(ctx)
	switch {
	case errors.Is(err, schema.ErrNoCredits):
	case err != nil:
		return nil, err
	default:
		as = append(as, ledger.Anchor{Chain: ledger.ChainCredits, ID: last.ID, Hash: last.RowHash})
	}
	return as, nil
}
