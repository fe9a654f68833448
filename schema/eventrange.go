package schema

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// EventRange is provider's event ids from From (inclusive) to To
// (exclusive): one contiguous range of the (provider, event_id) indexes, as
// a bench run's ids are.
type EventRange struct {
	Provider string
	From, To string
}

// RangeUsage is a usage row of an event in an EventRange.
type RangeUsage struct {
	EventID  string `db:"event_id"`
	Customer string `db:"customer_id"`
	Meter    string `db:"meter"`
	Quantity int64  `db:"quantity"` // micro-units
}

// UsageInRange reads the usage rows (not adjustments) of the events in r.
func (db *DB) UsageInRange(ctx context.Context, r EventRange) ([]RangeUsage, error) {
	var rows []RangeUsage
	err := sqlx.SelectContext(ctx, db.Read, &rows, `SELECT event_id, customer_id, meter, quantity FROM metered_usage
		WHERE provider = ? AND event_id >= ? AND event_id < ? AND kind = 'usage'`, r.Provider, r.From, r.To)
	return rows, err
}

// ReceiptsInRange counts the receipts of the events in r.
func (db *DB) ReceiptsInRange(ctx context.Context, r EventRange) (int, error) {
	var n int
	err := sqlx.GetContext(ctx, db.Read, &n, `SELECT COUNT(*) FROM receipts
		WHERE provider = ? AND event_id >= ? AND event_id < ?`, r.Provider, r.From, r.To)
	return n, err
}

// AttemptOutcomesInRange counts the delivery attempts of the events in r by
// outcome (inserted, duplicate, payload_mismatch).
func (db *DB) AttemptOutcomesInRange(ctx context.Context, r EventRange) (map[string]int, error) {
	var rows []struct {
		Outcome string `db:"outcome"`
		N       int    `db:"n"`
	}
	if err := sqlx.SelectContext(ctx, db.Read, &rows, `SELECT outcome, COUNT(*) AS n FROM delivery_attempts
		WHERE provider = ? AND event_id >= ? AND event_id < ? GROUP BY outcome`, r.Provider, r.From, r.To); err != nil {
		return nil, err
	}
	out := make(map[string]int, len(rows))
	for _, o := range rows {
		out[o.Outcome] = o.N
	}
	return out, nil
}
