package invoice

import (
	"context"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// ClosingSource is what ClosingMonth reads (*schema.DB).
type ClosingSource interface {
	HoldsUsage(ctx context.Context, from, to int64) (bool, error)
	ClosesForAll(ctx context.Context) ([]schema.PeriodClose, error)
}

// ClosingMonth is the month the views about closing open on when none is
// asked for (the console's usage and customer pages, `stripe status`): at
// the start of a month, closing is about the month that just ended, so the
// previous month while it holds usage and no close for all customers covers
// it, then the current one. Previous says which was chosen. A ledger whose
// usage all lies in the current month opens on it.
func ClosingMonth(ctx context.Context, src ClosingSource, now time.Time, loc *time.Location) (p ledger.Period, previous bool, err error) {
	now = now.In(loc)
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc)
	last := first.AddDate(0, -1, 0)
	current, err := ledger.MonthPeriod(first.Format("2006-01"), loc)
	if err != nil {
		return ledger.Period{}, false, err
	}
	closes, err := src.ClosesForAll(ctx)
	if err != nil {
		return ledger.Period{}, false, err
	}
	for _, c := range closes {
		if c.PeriodStart == last.UnixMilli() && c.PeriodEnd == first.UnixMilli() {
			return current, false, nil
		}
	}
	held, err := src.HoldsUsage(ctx, last.UnixMilli(), first.UnixMilli())
	switch {
	case err != nil:
		return ledger.Period{}, false, fmt.Errorf("read the last month's usage: %w", err)
	case held:
		p, err := ledger.MonthPeriod(last.Format("2006-01"), loc)
		return p, err == nil, err
	}
	return current, false, nil
}
