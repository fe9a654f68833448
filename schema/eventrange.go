package schema

import (
	"context"
	"strings"

	"github.com/jmoiron/sqlx"
)

// EventRange is provider's event ids from From (inclusive) to To
// (exclusive): one contiguous range of the (provider, event_id) indexes, as
// a bench run's sequential ids are. When IDs is set, the events are exactly
// those instead (random ids, like Stripe's, form no range).
type EventRange struct {
	Provider string
	From, To string
	IDs      []string
}

// idsPerQuery keeps each query's parameters far below SQLite's limit
// (32,766) and PostgreSQL's (65,535).
const idsPerQuery = 10_000

// each calls fn with the WHERE condition selecting one part of r's events
// and its arguments: the range in one part, IDs in parts of idsPerQuery.
func (r EventRange) each(fn func(where string, args []any) error) error {
	if r.IDs == nil {
		return fn(`provider = ? AND event_id >= ? AND event_id < ?`, []any{r.Provider, r.From, r.To})
	}
	for from := 0; from < len(r.IDs); from += idsPerQuery {
		part := r.IDs[from:min(from+idsPerQuery, len(r.IDs))]
		args := make([]any, 0, 1+len(part))
		args = append(args, r.Provider)
		for _, id := range part {
			args = append(args, id)
		}
		where := `provider = ? AND event_id IN (?` + strings.Repeat(`, ?`, len(part)-1) + `)`
		if err := fn(where, args); err != nil {
			return err
		}
	}
	return nil
}

// RangeUsage is a usage row of an event in an EventRange.
type RangeUsage struct {
	EventID  string `db:"event_id"`
	Customer string `db:"customer_id"`
	Meter    string `db:"meter"`
	Quantity int64  `db:"quantity"` // × 10^-Decimals
	Decimals int64  `db:"decimals"`
}

// UsageInRange reads the usage rows (not adjustments) of the events in r.
func (db *DB) UsageInRange(ctx context.Context, r EventRange) ([]RangeUsage, error) {
	var rows []RangeUsage
	err := r.each(func(where string, args []any) error {
		var part []RangeUsage
		err := sqlx.SelectContext(ctx, db.Read, &part, `SELECT event_id, customer_id, meter, quantity, decimals FROM metered_usage
			WHERE `+where+` AND kind = 'usage'`, args...)
		rows = append(rows, part...)
		return err
	})
	return rows, err
}

// ReceiptsInRange counts the receipts of the events in r.
func (db *DB) ReceiptsInRange(ctx context.Context, r EventRange) (int, error) {
	total := 0
	err := r.each(func(where string, args []any) error {
		var n int
		err := sqlx.GetContext(ctx, db.Read, &n, byEventKey(db.Read, `SELECT COUNT(*) FROM receipts WHERE `+where), args...)
		total += n
		return err
	})
	return total, err
}

// AttemptOutcomesInRange counts the delivery attempts of the events in r by
// outcome (inserted, duplicate, payload_mismatch), wherever they are stored:
// the first attempts kept in receipts count as inserted.
func (db *DB) AttemptOutcomesInRange(ctx context.Context, r EventRange) (map[string]int, error) {
	out := map[string]int{}
	err := r.each(func(where string, args []any) error {
		var rows []struct {
			Outcome string `db:"outcome"`
			N       int    `db:"n"`
		}
		if err := sqlx.SelectContext(ctx, db.Read, &rows, `SELECT outcome, COUNT(*) AS n FROM delivery_attempts
			WHERE `+where+` GROUP BY outcome`, args...); err != nil {
			return err
		}
		for _, o := range rows {
			out[o.Outcome] += o.N
		}
		var inline int
		err := sqlx.GetContext(ctx, db.Read, &inline, byEventKey(db.Read, `SELECT COUNT(status_code) FROM receipts WHERE `+where), args...)
		if err != nil && !predates(ctx, db.Read, versionFirstAttempt) {
			return err
		}
		if inline > 0 {
			out["inserted"] += inline
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
