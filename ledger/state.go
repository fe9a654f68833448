package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// The usage state (entitlements): per customer, meter and calendar month,
// the exact sum of the ledger's quantities, which the writer keeps in
// usage_state in the transaction of every row it appends, so that "how much
// has this customer used this month" is one row's read. The rule for which
// month a row counts in, and the recomputation serve builds the state with
// and verify checks it against, are here, once.

// StateKey names one usage_state row.
type StateKey struct {
	Customer    string
	Meter       string
	PeriodStart int64 // unix ms
}

// StateSum is what the ledger says one usage_state row must hold.
type StateSum struct {
	PeriodEnd int64
	Used      Total
	LastRowID int64
}

// MonthOf is the calendar month holding instant ms, in loc: [start, end) in
// unix ms. A row counts in the month of its event time, like every period.
func MonthOf(ms int64, loc *time.Location) (start, end int64) {
	t := time.UnixMilli(ms).In(loc)
	first := time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc)
	return first.UnixMilli(), first.AddDate(0, 1, 0).UnixMilli()
}

// UsageRowScanner reads ledger rows (a batch, a snapshot or the read pool).
type UsageRowScanner interface {
	ScanUsage(ctx context.Context, s schema.UsageScan, fn func(*schema.UsageRow) error) error
}

// SumUsageState recomputes the usage state from every ledger row, with
// months in loc.
func SumUsageState(ctx context.Context, src UsageRowScanner, loc *time.Location) (map[StateKey]*StateSum, error) {
	sums := map[StateKey]*StateSum{}
	err := src.ScanUsage(ctx, schema.UsageScan{}, func(r *schema.UsageRow) error {
		start, end := MonthOf(r.OccurredAt, loc)
		k := StateKey{Customer: r.Customer, Meter: r.Meter, PeriodStart: start}
		s := sums[k]
		if s == nil {
			s = &StateSum{PeriodEnd: end}
			sums[k] = s
		}
		s.Used = s.Used.Plus(RowQuantity(r.Quantity, int(r.Decimals)))
		s.LastRowID = max(s.LastRowID, r.ID)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sum the ledger by month: %w", err)
	}
	return sums, nil
}

// VerifyUsageState checks that every usage_state row holds exactly what the
// ledger sums to for its customer, meter and month, and that no month with
// ledger rows lacks its state row. A database whose state was never built
// (serve builds it as it starts) has nothing to check.
//
// It reads in one snapshot, so a row committed meanwhile is either in both
// the state and the ledger or in neither. An incremental verify checks the
// months the ledger rows after the anchor fall in (touchedStates).
func VerifyUsageState(ctx context.Context, db SnapshotReads, s Since) (CheckResult, error) {
	c := CheckResult{Name: "usage state", From: s.From("the months of " + s.Rows(ChainLedger, "after"))}
	err := db.View(ctx, func(tx *schema.ReadTx) error {
		z, built, err := tx.StateZone(ctx)
		if err != nil {
			return err
		}
		if !built {
			return nil // nothing to check until serve builds it
		}
		loc, err := LoadZone(z.Zone)
		if err != nil {
			return err
		}
		var want map[StateKey]*StateSum
		var states []schema.UsageState
		if s.Ledger > 0 {
			want, states, err = touchedStates(ctx, tx, loc, s.Ledger)
		} else {
			want, err = SumUsageState(ctx, tx, loc)
			if err == nil {
				states, err = tx.AllUsageStates(ctx)
			}
		}
		if err != nil {
			return fmt.Errorf("read usage state: %w", err)
		}
		for _, s := range states {
			c.Checked++
			k := StateKey{Customer: s.Customer, Meter: s.Meter, PeriodStart: s.PeriodStart}
			w := want[k]
			delete(want, k)
			used, perr := ParseTotal(s.Used)
			at := fmt.Sprintf("customer %q meter %q month from %s", s.Customer, s.Meter, time.UnixMilli(s.PeriodStart).In(loc).Format(time.RFC3339))
			switch {
			case perr != nil:
				c.Add(Problem{Table: "usage_state", Msg: fmt.Sprintf("%s: used %q is not a quantity", at, s.Used)})
			case w == nil && used.Sign() != 0:
				c.Add(Problem{Table: "usage_state", Msg: fmt.Sprintf("%s: used is %s but the ledger has no rows there", at, used)})
			case w != nil && !w.Used.Equal(used):
				c.Add(Problem{Table: "usage_state", Msg: fmt.Sprintf("%s: used is %s but the ledger sums to %s", at, used, w.Used)})
			}
		}
		for k, w := range want {
			c.Add(Problem{Table: "usage_state", Msg: fmt.Sprintf("customer %q meter %q month from %s: the ledger sums to %s but the usage state has no row",
				k.Customer, k.Meter, time.UnixMilli(k.PeriodStart).In(loc).Format(time.RFC3339), w.Used)})
		}
		return nil
	})
	return c, err
}

// touchedStates is, for each customer, meter and month a ledger row after
// afterID falls in, what the ledger sums to there and its usage_state row
// (if any): the part of the state that rows appended after an anchor
// changed.
func touchedStates(ctx context.Context, tx *schema.ReadTx, loc *time.Location, afterID int64) (map[StateKey]*StateSum, []schema.UsageState, error) {
	keys := map[StateKey]int64{} // and the month's end
	err := tx.ScanUsage(ctx, schema.UsageScan{Filter: schema.LedgerFilter{AfterID: afterID}}, func(r *schema.UsageRow) error {
		start, end := MonthOf(r.OccurredAt, loc)
		keys[StateKey{Customer: r.Customer, Meter: r.Meter, PeriodStart: start}] = end
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read the ledger after row %d: %w", afterID, err)
	}
	want := map[StateKey]*StateSum{}
	var states []schema.UsageState
	for k, end := range keys {
		sum := &StateSum{PeriodEnd: end}
		f := schema.LedgerFilter{Customer: k.Customer, Meter: k.Meter, From: k.PeriodStart, To: end}
		err := tx.ScanUsage(ctx, schema.UsageScan{Filter: f}, func(r *schema.UsageRow) error {
			sum.Used = sum.Used.Plus(RowQuantity(r.Quantity, int(r.Decimals)))
			sum.LastRowID = max(sum.LastRowID, r.ID)
			return nil
		})
		if err != nil {
			return nil, nil, fmt.Errorf("sum %s's %s: %w", k.Customer, k.Meter, err)
		}
		want[k] = sum
		st, ok, err := tx.UsageState(ctx, k.Customer, k.Meter, k.PeriodStart)
		if err != nil {
			return nil, nil, err
		}
		if ok {
			states = append(states, st)
		}
	}
	return want, states, nil
}
