package invoice

import (
	"context"

	"github.com/hookledger/hookledger/schema"
)

// Hooks for the external tests and benchmarks of closes.

// NoIndex makes the close read the table without its indexes.
func (r CloseRequest) NoIndex() CloseRequest { r.noIndex = true; return r }

func closeFilter(r CloseRequest, head int64) schema.LedgerFilter {
	return schema.LedgerFilter{From: r.Period.Start.UnixMilli(), To: r.Period.End.UnixMilli(), Customer: r.Customer, ThroughID: head, NoIndex: r.noIndex}
}

// PeriodSQL returns the statements a close for all customers runs to read its
// period: the id-range probe, and the scan (over the id range lo..hi).
func PeriodSQL(r CloseRequest, head, lo, hi int64) (probe string, probeArgs []any, scan string, scanArgs []any) {
	f := closeFilter(r, head)
	probe, probeArgs = schema.PeriodRangeSQL(f)
	scan, scanArgs = schema.PeriodScanSQL(periodScan(r.Meters, f, lo, hi, !r.noIndex))
	return probe, probeArgs, scan, scanArgs
}

// SetRangeScan turns the id-range read of closes on or off.
func SetRangeScan(on bool) { noRangeScan = !on }

// PeriodRange runs the id-range probe a close for all customers runs to read
// r's period over rows up to head: the range lo..hi holding the period's rows,
// and whether the close reads that range in rowid order (true) or reads the
// period through the event-time index (false).
func PeriodRange(ctx context.Context, db CloseStore, r CloseRequest, head int64) (lo, hi int64, ranged bool, err error) {
	err = db.CloseTx(ctx, func(tx *schema.CloseTx) error {
		lo, hi, ranged, err = periodRange(ctx, tx, closeFilter(r, head))
		if err != nil {
			return err
		}
		return schema.ErrRollback
	})
	return lo, hi, ranged, err
}

// PreRuleLate makes the close bill late usage of every closed period, as a
// close did before late lines went only on invoices of later periods: a test
// builds with it what an older version left in a database.
func (r CloseRequest) PreRuleLate() CloseRequest { r.preRuleLate = true; return r }

// NewInvoicePricer returns what prices the invoices of one close
// (benchmarks of the pricing path), with no invoice closed before.
func NewInvoicePricer(pr *Pricing) func(*Invoice) error {
	return newPricer(context.Background(), pr, nil).price
}

// LeavingGaps makes the close skip its refusal of a gap no close can fill:
// a test builds with it what an older version let through.
func (r CloseRequest) LeavingGaps() CloseRequest { r.leaveGaps = true; return r }
