package ledger

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
)

// UsageQuery selects ledger rows by event time, half-open: From <= occurred_at < To.
// A zero From or To leaves that side open.
type UsageQuery struct {
	From, To time.Time
	Customer string
	Meter    string
}

// UsageTotal is one customer × meter total.
type UsageTotal struct {
	Customer string   `db:"customer_id" json:"customer"`
	Meter    string   `db:"meter" json:"meter"`
	Quantity Quantity `db:"quantity" json:"quantity"`
	Events   int64    `db:"events" json:"events"`
}

// Totals sums usage (and adjustments) per customer and meter.
func Totals(ctx context.Context, db sqlx.QueryerContext, q UsageQuery) ([]UsageTotal, error) {
	var where []string
	var args []any
	if !q.From.IsZero() {
		where, args = append(where, "occurred_at >= ?"), append(args, q.From.UnixMilli())
	}
	if !q.To.IsZero() {
		where, args = append(where, "occurred_at < ?"), append(args, q.To.UnixMilli())
	}
	if q.Customer != "" {
		where, args = append(where, "customer_id = ?"), append(args, q.Customer)
	}
	if q.Meter != "" {
		where, args = append(where, "meter = ?"), append(args, q.Meter)
	}
	query := `SELECT customer_id, meter, SUM(quantity) AS quantity, SUM(kind = 'usage') AS events FROM metered_usage`
	if len(where) > 0 {
		query += " WHERE " + strings.Join(where, " AND ")
	}
	query += ` GROUP BY customer_id, meter ORDER BY customer_id, meter`
	var out []UsageTotal
	if err := sqlx.SelectContext(ctx, db, &out, query, args...); err != nil {
		return nil, fmt.Errorf("query usage: %w", err)
	}
	return out, nil
}
