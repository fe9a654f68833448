package ledger

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/jmoiron/sqlx"
)

// Closing a month for every customer reads the month's rows once: at 10M
// rows that is ~800k rows, so this path avoids per-row allocations and
// per-row index lookups. Everything else reads through ledgerScan.

// rangeSlack bounds how sparse an id range may be before the close reads the
// period through the event-time index instead: rows arrive roughly in event
// time, so a month's rows are nearly one contiguous id range.
const rangeSlack = 2

const periodRangeSQL = "SELECT MIN(id), MAX(id), COUNT(*)"

// periodRange returns the id range [lo, hi] holding the period's rows up to
// head, and whether scanning it in rowid order beats the event-time index.
func periodRange(ctx context.Context, tx *sqlx.Tx, f rowFilter) (lo, hi int64, ok bool, err error) {
	where, args := f.where()
	var n int64
	var l, h sql.NullInt64
	if err := tx.QueryRowxContext(ctx, periodRangeSQL+where, args...).Scan(&l, &h, &n); err != nil {
		return 0, 0, false, fmt.Errorf("read period range: %w", err)
	}
	if !l.Valid {
		return 0, 0, false, nil
	}
	span := h.Int64 - l.Int64 + 1
	return l.Int64, h.Int64, span <= rangeSlack*n+1024, nil
}

// lineSet holds one customer's line accumulators, one per meter.
type lineSet struct {
	customer string
	skip     bool // already invoiced for this period
	meters   []string
	accs     []*lineAcc
}

// hashArena hands out 32-byte row hashes from large blocks, so keeping
// ~800k of them for the digests costs a few allocations, not 800k.
type hashArena struct{ block []byte }

func (a *hashArena) copy(b []byte) []byte {
	if len(a.block)+len(b) > cap(a.block) {
		a.block = make([]byte, 0, max(1<<16, len(b)))
	}
	a.block = append(a.block, b...)
	return a.block[len(a.block)-len(b) : len(a.block) : len(a.block)]
}

// periodLines bills the period's rows up to the ledger head, per customer and meter.
func periodLines(ctx context.Context, tx *sqlx.Tx, req CloseRequest, head int64, skip map[string]bool) ([]InvoiceLine, error) {
	p := req.Period
	if head == 0 {
		return nil, nil
	}
	f := rowFilter{from: p.Start.UnixMilli(), to: p.End.UnixMilli(), customer: req.Customer, throughID: head, noIndex: req.noIndex}
	var lo, hi int64
	ranged := false
	if req.Customer == "" && !req.noIndex && !noRangeScan {
		var err error
		if lo, hi, ranged, err = periodRange(ctx, tx, f); err != nil {
			return nil, fmt.Errorf("close %s: %w", p.Label, err)
		}
		if lo == 0 {
			return nil, nil
		}
	}
	query, args := periodScanSQL(req.Meters, f, lo, hi, ranged)
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("close %s: read ledger: %w", p.Label, err)
	}
	defer rows.Close()

	sets := map[string]*lineSet{}
	var order []*lineSet
	var arena hashArena
	var (
		id, adj, qty, occurred int64
		cust, meter, props     sql.RawBytes
		hash                   sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&id, &adj, &cust, &meter, &qty, &occurred, &props, &hash); err != nil {
			return nil, fmt.Errorf("close %s: read ledger: %w", p.Label, err)
		}
		set := sets[string(cust)] // no allocation for the lookup
		if set == nil {
			c := string(cust)
			set = &lineSet{customer: c, skip: skip[c]}
			sets[c] = set
			if !set.skip {
				order = append(order, set)
			}
		}
		if set.skip {
			continue
		}
		var la *lineAcc
		for i, m := range set.meters {
			if m == string(meter) {
				la = set.accs[i]
				break
			}
		}
		if la == nil {
			m := string(meter)
			la = &lineAcc{agg: newAggregate(req.Meters.Get(m).spec())}
			set.meters, set.accs = append(set.meters, m), append(set.accs, la)
		}
		kind := KindUsage
		if adj != 0 {
			kind = KindAdjustment
		}
		var pr string
		if la.agg.distinct != nil {
			pr = string(props)
		}
		la.add(kind, id, Quantity(qty), occurred, pr, arena.copy(hash))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("close %s: read ledger: %w", p.Label, err)
	}
	var lines []InvoiceLine
	for _, set := range order {
		for i, la := range set.accs {
			m := req.Meters.Get(set.meters[i])
			qty, err := la.agg.value().checked(set.customer, m.Name, p.Label)
			if err != nil {
				return nil, err
			}
			lines = append(lines, InvoiceLine{Customer: set.customer, Meter: m.Name, Aggregation: m.Aggregation, Property: m.Property, Unit: m.Unit,
				Period: p.Label, TZ: p.Zone, PeriodStart: p.Start.UnixMilli(), PeriodEnd: p.End.UnixMilli(), AfterID: 0, ThroughID: head,
				Quantity: qty, Rows: la.agg.rows, Adjustments: la.agg.adjustments, MaxID: la.maxID(), Digest: rowsDigest(la.rows)})
		}
	}
	return lines, nil
}

// noRangeScan makes closes read through the event-time index (tests compare both paths).
var noRangeScan bool

// periodScanSQL is the statement a close reads its period with: the id range
// [lo, hi] in rowid order when ranged, else the WHERE clause of f (the
// event-time or customer index). Properties are read only for unique_count
// meters, the one aggregation that needs them.
func periodScanSQL(ms Meters, f rowFilter, lo, hi int64, ranged bool) (string, []any) {
	props := "''"
	if needsProperties(ms, "") {
		props = "properties"
	}
	query := "SELECT id, kind = 'adjustment', customer_id, meter, quantity, occurred_at, " + props + ", row_hash"
	if ranged {
		// "+occurred_at" keeps the planner off the event-time index: the
		// range is read in rowid order, one page after the next.
		return query + " FROM metered_usage WHERE id BETWEEN ? AND ? AND +occurred_at >= ? AND +occurred_at < ?", []any{lo, hi, f.from, f.to}
	}
	where, args := f.where()
	return query + where, args
}
