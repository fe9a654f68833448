package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// ClosingSource is what ClosingMonth reads (*schema.DB).
type ClosingSource interface {
	UsageSource
	ClosesForAll(ctx context.Context) ([]schema.PeriodClose, error)
}

// ClosingMonth is the month the views about closing open on when none is
// asked for (the console's usage and customer pages, `stripe status`): at
// the start of a month, closing is about the month that just ended, so the
// previous month while it holds usage and no close for all customers covers
// it, then the current one. Previous says which was chosen. A ledger whose
// usage all lies in the current month opens on it.
func ClosingMonth(ctx context.Context, src ClosingSource, now time.Time, loc *time.Location) (p Period, previous bool, err error) {
	now = now.In(loc)
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc)
	last := first.AddDate(0, -1, 0)
	current, err := MonthPeriod(first.Format("2006-01"), loc)
	if err != nil {
		return Period{}, false, err
	}
	closes, err := src.ClosesForAll(ctx)
	if err != nil {
		return Period{}, false, err
	}
	for _, c := range closes {
		if c.PeriodStart == last.UnixMilli() && c.PeriodEnd == first.UnixMilli() {
			return current, false, nil
		}
	}
	errFound := errors.New("found")
	err = src.ScanUsage(ctx, schema.UsageScan{Filter: schema.LedgerFilter{From: last.UnixMilli(), To: first.UnixMilli()}},
		func(*schema.UsageRow) error { return errFound })
	switch {
	case errors.Is(err, errFound):
		p, err := MonthPeriod(last.Format("2006-01"), loc)
		return p, err == nil, err
	case err != nil:
		return Period{}, false, fmt.Errorf("read the last month's usage: %w", err)
	}
	return current, false, nil
}
