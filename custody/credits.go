package custody

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Credits: a grant, its void and its expiry are Ops, so they run in the
// writer's transaction, where the credit chain's end is read and advanced
// under the write lock. A grant's id decides a repeat inside that
// transaction: 32 concurrent grants with one id make one grant.

// ErrGrantConflict is a grant id already taken by another grant.
var ErrGrantConflict = errors.New("grant id already used")

// GrantCredit appends a credit grant, once per id.
type GrantCredit struct {
	Request invoice.GrantRequest

	// Set by Apply: the grant's row, and whether it was there before (a
	// repeat of the same grant: nothing written).
	Entry     schema.CreditEntry
	Duplicate bool
}

// Apply implements Op.
func (g *GrantCredit) Apply(ctx context.Context, tx *Tx) error {
	if g.Request.ID != "" {
		prior, err := tx.b.CreditEntries(ctx, schema.CreditFilter{GrantID: g.Request.ID})
		if err != nil {
			return err
		}
		for _, e := range prior {
			if e.Kind != invoice.CreditGranted {
				continue
			}
			if !g.Request.SameGrant(e) {
				return fmt.Errorf("%w: %q is a grant of %s %s to %s recorded %s; a repeat must ask for the same grant",
					ErrGrantConflict, e.GrantID, e.Amount, e.Currency, e.Customer, time.UnixMilli(e.RecordedAt).UTC().Format(time.RFC3339))
			}
			g.Entry, g.Duplicate = e, true
			return nil
		}
	}
	e, err := g.Request.Entry(tx.now)
	if err != nil {
		return err
	}
	if e.GrantID == "" {
		e.GrantID = invoice.NewGrantID()
	}
	if err := appendCredit(ctx, tx, &e); err != nil {
		return err
	}
	g.Entry = e
	return nil
}

// VoidCredit ends a grant now: what it has left is forfeited by a void row.
type VoidCredit struct {
	GrantID, Reason, Actor string

	// Set by Apply: the void's row.
	Entry schema.CreditEntry
}

// Apply implements Op.
func (v *VoidCredit) Apply(ctx context.Context, tx *Tx) error {
	g, err := grantNow(ctx, tx, v.GrantID)
	if err != nil {
		return err
	}
	if g.Status != "active" {
		return fmt.Errorf("%w: grant %s is already %s", invoice.ErrBadGrant, v.GrantID, g.Status)
	}
	if strings.TrimSpace(v.Reason) == "" || strings.TrimSpace(v.Actor) == "" {
		return fmt.Errorf("%w: a void needs a reason and an actor", invoice.ErrBadGrant)
	}
	if err := ledger.CheckTexts(ledger.Text{Field: "reason", Value: v.Reason}, ledger.Text{Field: "actor", Value: v.Actor}); err != nil {
		return fmt.Errorf("%w: %v", invoice.ErrBadGrant, err)
	}
	v.Entry = endEntry(g, invoice.CreditVoided, v.Reason, v.Actor, tx.now)
	return appendCredit(ctx, tx, &v.Entry)
}

// ExpireCredits writes the expiry row of every grant whose expiry has
// passed, once: what it had left is forfeited.
type ExpireCredits struct {
	// Set by Apply: the rows written.
	Entries []schema.CreditEntry
}

// Apply implements Op.
func (x *ExpireCredits) Apply(ctx context.Context, tx *Tx) error {
	x.Entries = nil // an op may run twice (the writer's isolated pass)
	ids, err := tx.b.CreditsDue(ctx, tx.now)
	if err != nil || len(ids) == 0 {
		return err
	}
	for _, id := range ids {
		g, err := grantNow(ctx, tx, id)
		if err != nil {
			return err
		}
		e := endEntry(g, invoice.CreditExpired, "expired", "hookledger", tx.now)
		if err := appendCredit(ctx, tx, &e); err != nil {
			return err
		}
		x.Entries = append(x.Entries, e)
	}
	return nil
}

// grantNow replays one grant's entries in the transaction.
func grantNow(ctx context.Context, tx *Tx, id string) (*invoice.Grant, error) {
	es, err := tx.b.CreditEntries(ctx, schema.CreditFilter{GrantID: id})
	if err != nil {
		return nil, err
	}
	gs, err := invoice.GrantsOf(es)
	if err != nil {
		return nil, err
	}
	if len(gs) == 0 {
		return nil, fmt.Errorf("%w: no grant %q", invoice.ErrBadGrant, id)
	}
	return gs[0], nil
}

// endEntry is the row that ends g (a void or an expiry), forfeiting its balance.
func endEntry(g *invoice.Grant, kind, reason, actor string, now int64) schema.CreditEntry {
	zero := invoice.ZeroIn(g.Currency)
	return schema.CreditEntry{Kind: kind, GrantID: g.ID, Customer: g.Customer, Currency: g.Currency,
		Amount: g.Balance, Balance: zero, Reason: reason, Actor: actor, RecordedAt: now}
}

// appendCredit links e to the credit chain's end and appends it. It is
// recorded no earlier than the latest close's cutoff, so a close never
// counts an entry written after it (ledger's closeCredits).
func appendCredit(ctx context.Context, tx *Tx, e *schema.CreditEntry) error {
	last, err := tx.b.LastCredit(ctx)
	if err != nil {
		return err
	}
	cutoff, err := tx.b.LatestCloseCutoff(ctx)
	if err != nil {
		return err
	}
	e.RecordedAt = max(e.RecordedAt, cutoff)
	invoice.LinkCredit(e, last)
	return tx.b.InsertCreditEntry(ctx, *e)
}
