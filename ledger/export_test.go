package ledger

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// Hooks for the external tests and benchmarks in package ledger_test.

// NoIndex makes q read the table without its indexes (benchmark comparison).
func (q UsageQuery) NoIndex() UsageQuery { q.noIndex = true; return q }

// NoIndex makes the close read the table without its indexes.
func (r CloseRequest) NoIndex() CloseRequest { r.noIndex = true; return r }

// UsageSQL is the statement Query runs for q.
func UsageSQL(q UsageQuery) (string, []any) { return usageSQL(q) }

// PeriodSQL returns the statements a close for all customers runs to read its
// period: the id-range probe, and the scan (over the id range lo..hi).
func PeriodSQL(r CloseRequest, head, lo, hi int64) (probe string, probeArgs []any, scan string, scanArgs []any) {
	f := rowFilter{from: r.Period.Start.UnixMilli(), to: r.Period.End.UnixMilli(), customer: r.Customer, throughID: head, noIndex: r.noIndex}
	where, args := f.where()
	scan, scanArgs = periodScanSQL(r.Meters, f, lo, hi, !r.noIndex)
	return periodRangeSQL + where, args, scan, scanArgs
}

// SetRangeScan turns the id-range read of closes on or off.
func SetRangeScan(on bool) { noRangeScan = !on }

// PeriodRange runs the id-range probe a close for all customers runs to read
// r's period over rows up to head: the range lo..hi holding the period's rows,
// and whether the close reads that range in rowid order (true) or reads the
// period through the event-time index (false).
func PeriodRange(ctx context.Context, db *sqlx.DB, r CloseRequest, head int64) (lo, hi int64, ranged bool, err error) {
	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		return 0, 0, false, err
	}
	defer tx.Rollback()
	f := rowFilter{from: r.Period.Start.UnixMilli(), to: r.Period.End.UnixMilli(), customer: r.Customer, throughID: head, noIndex: r.noIndex}
	return periodRange(ctx, tx, f)
}
