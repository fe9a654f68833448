package invoice

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// StrandedLine is usage on no path to an invoice: rows of one customer,
// meter and month earlier than any period closed for that customer (by a
// close for all customers, or by the customer's own close or invoice).
// Closes run forward from the first one, so no scheduled close will ever
// reach these rows, and they are not late usage either (late usage is of a
// closed period, and the next invoice bills it). They are what a clock at
// zero or a year typed wrong leaves in the ledger; an operator either closes
// that month explicitly (invoice close --period) or corrects the rows with
// adjustments dated in the same month: a line whose adjustments bring its
// sum to zero is no longer listed.
type StrandedLine struct {
	Customer string `json:"customer"`
	Meter    string `json:"meter"`
	Month    string `json:"month"` // in the time zone of the first close
	TZ       string `json:"tz"`
	// Sum is the signed sum of the rows' quantities, whatever the meter's
	// aggregation: what the rows amount to as written, not a billed total.
	Sum         ledger.Total `json:"sum"`
	Rows        int64        `json:"rows"`
	Adjustments int64        `json:"adjustments"`
	FirstClosed string       `json:"first_closed"` // the customer's earliest closed period
	MinID       int64        `json:"min_id"`
	MaxID       int64        `json:"max_id"`
}

// StrandedSource is what StrandedUsage reads: the closes and the rows
// (*schema.DB, or *schema.ReadTx for one snapshot).
type StrandedSource interface{ closedSource }

// StrandedUsage lists the usage of customer ("" for every customer) on no
// path to an invoice (StrandedLine), ordered by customer, month and meter.
// It reads the closes and the rows before the latest first close, through
// the event-time index.
func StrandedUsage(ctx context.Context, q StrandedSource, customer string) ([]StrandedLine, error) {
	periods, err := closedPeriods(ctx, q, customer)
	if err != nil {
		return nil, err
	}
	// The first period closed for all customers, and for each customer the
	// first closed or invoiced for them alone, whichever is earlier.
	var all *closedPeriod
	own := map[string]*closedPeriod{}
	for _, cp := range periods { // by start
		if all == nil && cp.allHead >= 0 {
			all = cp
		}
		for c := range cp.invoiced {
			if own[c] == nil {
				own[c] = cp
			}
		}
	}
	first := func(c string) *closedPeriod {
		if p := own[c]; p != nil && (all == nil || p.start < all.start) {
			return p
		}
		return all
	}
	var to int64
	if all != nil {
		to = all.start
	}
	for c := range own {
		to = max(to, first(c).start)
	}
	if to == 0 {
		return nil, nil // nothing closed yet (or only from the epoch on)
	}
	type key struct{ customer, meter, month string }
	acc := map[key]*StrandedLine{}
	zones := map[string]*time.Location{}
	var zoneErr error
	f := schema.LedgerFilter{Customer: customer, To: to}
	err = ledgerScan(ctx, q, f, false, func(id int64, kind, c, m string, qty ledger.Total, occ int64, _ string, _ []byte) {
		cp := first(c)
		if cp == nil || occ >= cp.start {
			return
		}
		loc, ok := zones[cp.tz]
		if !ok {
			var err error
			if loc, err = ledger.LoadZone(cp.tz); err != nil {
				zoneErr = cmp.Or(zoneErr, fmt.Errorf("period %s: time zone %q: %w", cp.label, cp.tz, err))
				loc = time.UTC
			}
			zones[cp.tz] = loc
		}
		k := key{c, m, time.UnixMilli(occ).In(loc).Format("2006-01")}
		l := acc[k]
		if l == nil {
			l = &StrandedLine{Customer: c, Meter: m, Month: k.month, TZ: cp.tz, FirstClosed: cp.label, MinID: id}
			acc[k] = l
		}
		if kind == ledger.KindAdjustment {
			l.Adjustments++
		} else {
			l.Rows++
		}
		l.Sum = l.Sum.Plus(qty)
		l.MinID, l.MaxID = min(l.MinID, id), max(l.MaxID, id)
	})
	if err = cmp.Or(err, zoneErr); err != nil {
		return nil, fmt.Errorf("stranded usage: %w", err)
	}
	out := make([]StrandedLine, 0, len(acc))
	for _, l := range acc {
		if l.Adjustments > 0 && l.Sum.Sign() == 0 {
			continue // corrected to nothing
		}
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b StrandedLine) int {
		return cmp.Or(cmp.Compare(a.Customer, b.Customer), cmp.Compare(a.Month, b.Month), cmp.Compare(a.Meter, b.Meter))
	})
	return out, nil
}

// StrandedRows counts the rows (usage and adjustments) StrandedUsage lists,
// for the hookledger_usage_stranded_rows gauge.
func StrandedRows(ctx context.Context, q StrandedSource) (int64, error) {
	lines, err := StrandedUsage(ctx, q, "")
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range lines {
		n += l.Rows + l.Adjustments
	}
	return n, nil
}
