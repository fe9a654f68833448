package customer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// An assignment is history too (DESIGN.md, invariant 8): a period closed for
// a customer was priced with the plan in force on its first day, and late
// usage of it is priced with that plan again. So an assignment that would
// take effect inside a closed period, or reach back to the first day of one,
// is refused, naming the close and the first date it may take effect from.
// It is refused rather than stored from that date: what is recorded is what
// the operator typed or nothing, and the refusal says what to type.

// ErrAssignmentInClosedPeriod is the outcome of an assignment that would
// change the plan of a closed period.
var ErrAssignmentInClosedPeriod = errors.New("the assignment reaches into a closed period")

// checkOpenPeriods refuses assignment a when it would take effect inside a
// period closed for its customer (its own close or a close for all), or be
// the assignment in force on the first day of one.
func checkOpenPeriods(ctx context.Context, tx *schema.RegistryTx, a PlanAssignment) error {
	closes, err := tx.PeriodCloses(ctx, a.Customer)
	if err != nil || len(closes) == 0 {
		return err
	}
	prior, err := tx.PlanAssignments(ctx, a.Customer)
	if err != nil {
		return err
	}
	slices.SortFunc(closes, func(x, y schema.PeriodClose) int { return cmp.Compare(x.PeriodStart, y.PeriodStart) })
	hit := reachedClose(closes, prior, a.EffectiveFrom)
	if hit == nil {
		return nil
	}
	from := a.EffectiveFrom
	for c := hit; c != nil; c = reachedClose(closes, prior, from) {
		from = ledger.PeriodDay(c.PeriodEnd, c.TZ) // the first day after it
	}
	who := "customer " + fmt.Sprintf("%q", a.Customer)
	if hit.Customer == "" {
		who = "all customers"
	}
	return fmt.Errorf("%w: plan %q from %s would change the plan of %s (%s to %s, %s), closed for %s by close %d on %s; "+
		"a closed period keeps the plan that priced it: assign from %s, the first day no closed period is reached",
		ErrAssignmentInClosedPeriod, a.Plan, a.EffectiveFrom, hit.Period, ledger.PeriodDay(hit.PeriodStart, hit.TZ), lastDay(hit.PeriodEnd, hit.TZ), hit.TZ,
		who, hit.ID, time.UnixMilli(hit.ClosedAt).UTC().Format(time.DateOnly), from)
}

// reachedClose is the first close an assignment from day would reach: one
// whose period holds day, or whose first day it would be in force on (no
// other assignment takes effect after day and on or before that first day;
// of two on the same date the later recorded wins, which is the new one).
func reachedClose(closes []schema.PeriodClose, prior []schema.PlanAssignment, day pricing.Date) *schema.PeriodClose {
	for i, c := range closes {
		first, last := ledger.PeriodDay(c.PeriodStart, c.TZ), lastDay(c.PeriodEnd, c.TZ)
		if day >= first && day <= last { // YYYY-MM-DD orders as text
			return &closes[i]
		}
		if day > first {
			continue
		}
		overtaken := slices.ContainsFunc(prior, func(p schema.PlanAssignment) bool {
			d := pricing.Date(p.EffectiveFrom)
			return d > day && d <= first
		})
		if !overtaken {
			return &closes[i]
		}
	}
	return nil
}

// lastDay is the last day of a period ending (exclusively) at end, in tz.
func lastDay(end int64, tz string) pricing.Date {
	return ledger.PeriodDay(end-1, tz)
}
