package invoice

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Coverage: each usage row of a closed period is billed by exactly one
// invoice line or is pending late usage (DESIGN.md, invariant 9). The lines
// of an invoice that exists are proven row by row (checkInvoiceLines,
// checkLine, billedTwice); this proves the invoices exist where rows say
// they must, and that no row lies where no close can ever reach it.

// verifyCoverage checks, for every close, that each customer with usage in
// the closed period up to the close's ledger head has an invoice of that
// close (unless the customer's own earlier close of the period billed them),
// and that no usage row lies in a gap between closed periods that no close
// can fill (closes in two time zones whose months do not meet). An
// incremental verify checks the closes after the closes anchor, and the
// rows after the ledger anchor for gaps (a gap beside a new close, every
// row in it).
func verifyCoverage(ctx context.Context, db VerifySource, s ledger.Since) (ledger.CheckResult, error) {
	c := ledger.CheckResult{Name: "billing coverage", From: s.From(s.Rows(ledger.ChainCloses, "after"), s.Rows(ledger.ChainLedger, "after"))}
	invs, err := db.Invoices(ctx, InvoiceFilter{AfterClose: s.Closes})
	if errors.Is(err, schema.ErrNoInvoices) {
		return c, nil // a database from before invoices existed
	}
	if err != nil {
		return c, err
	}
	closes, err := db.PeriodCloses(ctx, "")
	if err != nil {
		return c, err
	}
	slices.SortFunc(closes, func(a, b schema.PeriodClose) int { return cmp.Compare(a.ID, b.ID) })
	type closeCustomer struct {
		close    int64
		customer string
	}
	invoiced := map[closeCustomer]bool{}
	for _, inv := range invs {
		invoiced[closeCustomer{inv.CloseID, inv.Customer}] = true
	}
	type periodCustomer struct {
		start, end int64
		customer   string
	}
	own := map[periodCustomer]int64{} // the customer's first own close of the period
	for _, cl := range closes {
		k := periodCustomer{cl.PeriodStart, cl.PeriodEnd, cl.Customer}
		if _, seen := own[k]; cl.Customer != "" && !seen {
			own[k] = cl.ID
		}
	}
	xs, err := db.CloseExclusions(ctx)
	if err != nil {
		return c, err
	}
	excluded := map[closeCustomer]bool{}
	for _, x := range xs {
		excluded[closeCustomer{x.CloseID, x.Customer}] = true
	}
	for _, cl := range closes {
		if cl.LedgerHead == 0 || cl.ID <= s.Closes {
			continue // the ledger was empty: nothing to bill; or checked by the verify that took the anchor
		}
		customers, err := db.PeriodCustomers(ctx, schema.LedgerFilter{Customer: cl.Customer, From: cl.PeriodStart, To: cl.PeriodEnd, ThroughID: cl.LedgerHead})
		if err != nil {
			return c, fmt.Errorf("read the customers of close %d: %w", cl.ID, err)
		}
		for _, x := range customers {
			if id, ok := own[periodCustomer{cl.PeriodStart, cl.PeriodEnd, x}]; cl.Customer == "" && ok && id < cl.ID {
				continue // closed for x before: the close for all skipped x
			}
			if excluded[closeCustomer{cl.ID, x}] {
				continue // the close could not invoice x and left the period open for them (close_exclusions)
			}
			c.Checked++
			if !invoiced[closeCustomer{cl.ID, x}] {
				c.Add(ledger.Problem{Table: "period_closes", ID: cl.ID, Msg: fmt.Sprintf("customer %q has usage in %s up to ledger id %d, but close %d holds no invoice of theirs: the invoice was deleted and that usage is billed nowhere",
					x, closeLabel(cl), cl.LedgerHead, cl.ID)})
			}
		}
	}
	if err := unbillableRows(ctx, db, closes, s, &c); err != nil {
		return c, err
	}
	return c, nil
}

// unbillableRows reports the usage rows lying in a gap between closed
// periods that no close can fill: between the periods closed for every
// customer, and between each customer's own closes and those. From s, the
// rows after the ledger anchor, unless a close after the closes anchor
// borders the gap.
func unbillableRows(ctx context.Context, db VerifySource, closes []schema.PeriodClose, s ledger.Since, c *ledger.CheckResult) error {
	scopes := closeScopes(closes)
	reported := map[int64]bool{}
	for _, scope := range slices.Sorted(maps.Keys(scopes)) {
		for _, g := range Gaps(scopes[scope]) {
			after := s.Ledger
			if g.Before.ID > s.Closes || g.After.ID > s.Closes {
				after = 0
			}
			err := db.ScanLedger(ctx, schema.LedgerFilter{Customer: scope, From: g.Start, To: g.End, AfterID: after}, func(r *schema.LedgerRow) error {
				if reported[r.ID] || scope == "" && closedFor(scopes[r.Customer], r.OccurredAt) {
					return nil // the customer's own close billed it
				}
				reported[r.ID] = true
				c.Add(ledger.Problem{Table: "metered_usage", ID: r.ID, Msg: fmt.Sprintf("usage row of customer %q, meter %q at %s lies between %s: no close can bill it",
					r.Customer, r.Meter, time.UnixMilli(r.OccurredAt).UTC().Format(time.RFC3339), g)})
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// closeScopes groups closes by whom they bind: "" the closes for every
// customer, each customer its own closes with those.
func closeScopes(closes []schema.PeriodClose) map[string][]schema.PeriodClose {
	scopes := map[string][]schema.PeriodClose{"": nil}
	for _, cl := range closes {
		if cl.Customer == "" {
			scopes[""] = append(scopes[""], cl)
		}
	}
	for _, cl := range closes {
		if cl.Customer != "" {
			if _, ok := scopes[cl.Customer]; !ok {
				scopes[cl.Customer] = slices.Clone(scopes[""])
			}
			scopes[cl.Customer] = append(scopes[cl.Customer], cl)
		}
	}
	return scopes
}

// ErrPeriodGap means a close would leave event time between its period and
// a closed one that no close can fill.
var ErrPeriodGap = errors.New("the close would leave a gap no close can fill")

// refuseGaps refuses the close req if its period and a closed period of a
// customer it binds would leave a gap (Gaps) between them: usage there would
// be on no invoice and in no later close's reach.
func refuseGaps(ctx context.Context, tx closeStore, req CloseRequest) error {
	closes, err := tx.PeriodCloses(ctx, req.Customer)
	if err != nil {
		return fmt.Errorf("close: read closed periods: %w", err)
	}
	p := req.Period
	self := schema.PeriodClose{Customer: req.Customer, Period: p.Label, TZ: p.Zone, PeriodStart: p.Start.UnixMilli(), PeriodEnd: p.End.UnixMilli()}
	// PeriodCloses read the closes that bind req's scope: for one customer
	// theirs and those for all, for all every close.
	scopes := closeScopes(closes)
	for _, scope := range slices.Sorted(maps.Keys(scopes)) {
		for _, g := range Gaps(append(scopes[scope], self)) {
			var other schema.PeriodClose // the closed period across the gap (self has no id yet)
			switch {
			case g.After.ID == 0:
				other = g.Before
			case g.Before.ID == 0:
				other = g.After
			default:
				continue // between two earlier closes: not this close's doing
			}
			return fmt.Errorf("close %s: %w: %s to %s would lie between %s and %s (close %d), and no monthly close in %s or %s can bill it; close %s in %s instead (--tz %s, or invoicing.tz in the configuration)",
				p, ErrPeriodGap, time.UnixMilli(g.Start).UTC().Format(time.RFC3339), time.UnixMilli(g.End).UTC().Format(time.RFC3339),
				p.Label+" in "+p.Zone, closeLabel(other), other.ID, p.Zone, other.TZ, p.Label, other.TZ, other.TZ)
		}
	}
	return nil
}

// closedFor reports whether one of closes covers event time ms.
func closedFor(closes []schema.PeriodClose, ms int64) bool {
	for _, cl := range closes {
		if ms >= cl.PeriodStart && ms < cl.PeriodEnd {
			return true
		}
	}
	return false
}

// Gap is event time between two closed periods that no close can fill:
// [Start, End) between Before (ending at Start) and After (starting at End).
type Gap struct {
	Start, End    int64
	Before, After schema.PeriodClose
}

func (g Gap) String() string {
	return fmt.Sprintf("%s (close %d, ending %s) and %s (close %d, starting %s)",
		closeLabel(g.Before), g.Before.ID, time.UnixMilli(g.Start).UTC().Format(time.RFC3339),
		closeLabel(g.After), g.After.ID, time.UnixMilli(g.End).UTC().Format(time.RFC3339))
}

// Gaps lists the unfillable gaps between closes: a close is one calendar
// month in one zone, so event time between two closed periods can be closed
// later only if both its ends are month boundaries in a zone of theirs.
// October closed in Europe/Berlin and November in UTC leave the hour
// 2026-10-31T23:00Z to 2026-11-01T00:00Z, which no month of either zone is.
func Gaps(closes []schema.PeriodClose) []Gap {
	closes = slices.Clone(closes)
	slices.SortFunc(closes, func(a, b schema.PeriodClose) int {
		return cmp.Or(cmp.Compare(a.PeriodStart, b.PeriodStart), cmp.Compare(a.PeriodEnd, b.PeriodEnd))
	})
	var gaps []Gap
	for i, after := range closes {
		if i == 0 {
			continue
		}
		before := closes[i-1]
		if after.PeriodStart > before.PeriodEnd && !fillable(before.PeriodEnd, after.PeriodStart, before.TZ, after.TZ) {
			gaps = append(gaps, Gap{Start: before.PeriodEnd, End: after.PeriodStart, Before: before, After: after})
		}
		if after.PeriodEnd < before.PeriodEnd {
			closes[i] = before // the period reaching furthest so far stands before the next
		}
	}
	return gaps
}

// fillable reports whether event time [from, to) can be closed, month by
// month, in one of zones: both ends are a month's first instant there.
func fillable(from, to int64, zones ...string) bool {
	for _, z := range zones {
		if monthStart(from, z) && monthStart(to, z) {
			return true
		}
	}
	return false
}

// monthStart reports whether unix-ms instant ms is the first instant of a
// calendar month in zone.
func monthStart(ms int64, zone string) bool {
	loc, err := ledger.LoadZone(zone)
	if err != nil {
		return false
	}
	t := time.UnixMilli(ms).In(loc)
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc).UnixMilli() == ms
}
