package schema

import (
	"context"
	"fmt"
	"math"

	"github.com/jmoiron/sqlx"
)

// versionSpend is the migration that created spend_overrides and
// spend_crossings (issue 28, spend).
const versionSpend = 24

// SpendOverride is one row of spend_overrides.
type SpendOverride struct {
	ID            int64  `db:"id"`
	Customer      string `db:"customer_id"`
	Limit         string `db:"limit_value"`
	Kind          string `db:"kind"`
	EffectiveFrom string `db:"effective_from"`
	RecordedAt    int64  `db:"recorded_at"`
	Note          string `db:"note"`
}

// SpendCrossing is one row of spend_crossings: a spend threshold that fired.
type SpendCrossing struct {
	ID             int64  `db:"id"`
	Customer       string `db:"customer_id"`
	PeriodStart    int64  `db:"period_start"`
	PeriodEnd      int64  `db:"period_end"`
	Threshold      string `db:"threshold"`
	ThresholdValue string `db:"threshold_value"`
	Limit          string `db:"limit_value"`
	Spent          string `db:"spent"`
	Currency       string `db:"currency"`
	Plan           string `db:"plan"`
	PlanSnapshot   string `db:"plan_snapshot"`
	RowID          int64  `db:"row_id"`
	ReceiptID      int64  `db:"receipt_id"`
	CrossedAt      int64  `db:"crossed_at"`
}

const spendOverrideCols = `id, customer_id, limit_value, kind, effective_from, recorded_at, note`

const spendCrossingCols = `id, customer_id, period_start, period_end, threshold, threshold_value, limit_value, spent,
	currency, plan, plan_snapshot, row_id, receipt_id, crossed_at`

// The writer's side, inside its batch.

// FiredSpendThresholds lists the spend thresholds that fired for a
// customer in the period starting at periodStart.
func (b Batch) FiredSpendThresholds(ctx context.Context, customer string, periodStart int64) ([]string, error) {
	var ts []string
	err := sqlx.SelectContext(ctx, b.tx, &ts, `SELECT threshold FROM spend_crossings
		WHERE customer_id = ? AND period_start = ?`, customer, periodStart)
	if err != nil {
		return nil, fmt.Errorf("read fired spend thresholds of %s: %w", customer, err)
	}
	return ts, nil
}

// InsertSpendCrossing stores c unless its threshold already fired in its
// period: inserted says which. The unique key decides, inside the
// transaction.
func (b Batch) InsertSpendCrossing(ctx context.Context, c SpendCrossing) (inserted bool, err error) {
	res, err := b.tx.ExecContext(ctx, `INSERT INTO spend_crossings (customer_id, period_start, period_end, threshold,
		threshold_value, limit_value, spent, currency, plan, plan_snapshot, row_id, receipt_id, crossed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (customer_id, period_start, threshold) DO NOTHING`,
		c.Customer, c.PeriodStart, c.PeriodEnd, c.Threshold, c.ThresholdValue, c.Limit, c.Spent, c.Currency, c.Plan,
		c.PlanSnapshot, c.RowID, c.ReceiptID, c.CrossedAt)
	if err != nil {
		return false, fmt.Errorf("insert spend crossing %s %s: %w", c.Customer, c.Threshold, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// SpendOverrides reads a customer's spend overrides in the batch, oldest
// first.
func (b Batch) SpendOverrides(ctx context.Context, customer string) ([]SpendOverride, error) {
	return spendOverrides(ctx, b.tx, customer)
}

// The readers' side.

// SpendOverrides reads the spend overrides of customer ("" for every
// customer), by customer, date and id.
func (db *DB) SpendOverrides(ctx context.Context, customer string) ([]SpendOverride, error) {
	os, err := spendOverrides(ctx, db.hot, customer)
	if err != nil && predates(ctx, db.Read, versionSpend) {
		return nil, nil
	}
	return os, err
}

func spendOverrides(ctx context.Context, q sqlx.QueryerContext, customer string) ([]SpendOverride, error) {
	var os []SpendOverride
	query, args := spendOverridesQuery(customer)
	if err := sqlx.SelectContext(ctx, q, &os, query, args...); err != nil {
		return nil, fmt.Errorf("read spend overrides: %w", err)
	}
	return os, nil
}

// spendOverridesQuery reads the spend overrides of customer ("" for every
// customer), by customer, date and id.
func spendOverridesQuery(customer string) (string, []any) {
	where, args := whereEqual(equal{"customer_id", customer})
	return `SELECT ` + spendOverrideCols + ` FROM spend_overrides` + where + `
		ORDER BY customer_id, effective_from, id`, args
}

// InsertSpendOverride appends one spend override and returns its id; like
// limit overrides, it takes turns with serve's writer through the write
// lock.
func (db *DB) InsertSpendOverride(ctx context.Context, o SpendOverride) (int64, error) {
	db.registry.Add(1) // before it commits (DataVersion)
	var id int64
	err := db.Write.QueryRowxContext(ctx, `INSERT INTO spend_overrides (customer_id, limit_value, kind, effective_from,
		recorded_at, note) VALUES (?, ?, ?, ?, ?, ?) RETURNING id`,
		o.Customer, o.Limit, o.Kind, o.EffectiveFrom, o.RecordedAt, o.Note).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert spend override for %q: %w", o.Customer, err)
	}
	return id, nil
}

// SpendCrossings reads the spend thresholds that fired, of customer (""
// for every customer), newest first, at most limit (0: all).
func (db *DB) SpendCrossings(ctx context.Context, customer string, limit int) ([]SpendCrossing, error) {
	cs, err := spendCrossings(ctx, db.Read, customer, limit)
	if err != nil && predates(ctx, db.Read, versionSpend) {
		return nil, nil
	}
	return cs, err
}

// SpendCrossings reads every spend crossing in the snapshot (verify).
func (tx *ReadTx) SpendCrossings(ctx context.Context) ([]SpendCrossing, error) {
	if predates(ctx, tx.tx, versionSpend) {
		// Asked first: on PostgreSQL a failed statement ends the snapshot.
		return nil, nil
	}
	return spendCrossings(ctx, tx.tx, "", 0)
}

func spendCrossings(ctx context.Context, q sqlx.QueryerContext, customer string, limit int) ([]SpendCrossing, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	var cs []SpendCrossing
	where, args := whereEqual(equal{"customer_id", customer})
	if err := sqlx.SelectContext(ctx, q, &cs, `SELECT `+spendCrossingCols+` FROM spend_crossings`+where+`
		ORDER BY id DESC LIMIT ?`, append(args, limit)...); err != nil {
		return nil, fmt.Errorf("read spend crossings: %w", err)
	}
	return cs, nil
}
