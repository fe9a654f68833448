package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"

	"github.com/jmoiron/sqlx"
)

// versionEntitlements is the migration that created usage_state,
// limit_overrides and threshold_crossings (issue 28).
const versionEntitlements = 19

// UsageState is one row of usage_state: the exact sum of a customer's
// meter over one month, kept by the writer in the transaction of every row
// it appends.
type UsageState struct {
	Customer    string `db:"customer_id"`
	Meter       string `db:"meter"`
	PeriodStart int64  `db:"period_start"`
	PeriodEnd   int64  `db:"period_end"`
	Used        string `db:"used"` // a decimal
	LastRowID   int64  `db:"last_row_id"`
}

// StateZone is usage_state_zone's row: the zone usage_state's months are
// computed in, and the ledger head when it was built.
type StateZone struct {
	Zone    string `db:"zone"`
	BuiltAt int64  `db:"built_at"`
	Through int64  `db:"through"`
}

// LimitOverride is one row of limit_overrides.
type LimitOverride struct {
	ID            int64  `db:"id"`
	Customer      string `db:"customer_id"`
	Meter         string `db:"meter"`
	Limit         string `db:"limit_value"`
	Kind          string `db:"kind"`
	EffectiveFrom string `db:"effective_from"`
	RecordedAt    int64  `db:"recorded_at"`
	Note          string `db:"note"`
}

// Crossing is one row of threshold_crossings: a threshold that fired.
type Crossing struct {
	ID             int64  `db:"id"`
	Customer       string `db:"customer_id"`
	Meter          string `db:"meter"`
	PeriodStart    int64  `db:"period_start"`
	PeriodEnd      int64  `db:"period_end"`
	Threshold      string `db:"threshold"`
	ThresholdValue string `db:"threshold_value"`
	Limit          string `db:"limit_value"`
	Used           string `db:"used"`
	RowID          int64  `db:"row_id"`
	ReceiptID      int64  `db:"receipt_id"`
	CrossedAt      int64  `db:"crossed_at"`
}

const usageStateCols = `customer_id, meter, period_start, period_end, used, last_row_id`

const crossingCols = `id, customer_id, meter, period_start, period_end, threshold, threshold_value, limit_value, used,
	row_id, receipt_id, crossed_at`

const overrideCols = `id, customer_id, meter, limit_value, kind, effective_from, recorded_at, note`

// The writer's side, inside its batch.

// StateZone reads usage_state_zone (found false: not built yet).
func (b Batch) StateZone(ctx context.Context) (StateZone, bool, error) {
	return stateZone(ctx, b.tx)
}

// UsageState reads one usage_state row (found false: none yet). The writer
// reads one per customer, meter and month a batch touches.
func (b Batch) UsageState(ctx context.Context, customer, meter string, periodStart int64) (UsageState, bool, error) {
	return usageState(ctx, b.tx, customer, meter, periodStart)
}

const usageStateSQL = `SELECT ` + usageStateCols + ` FROM usage_state WHERE customer_id = ? AND meter = ? AND period_start = ?`

func usageState(ctx context.Context, q sqlx.QueryerContext, customer, meter string, periodStart int64) (UsageState, bool, error) {
	var s UsageState
	err := sqlx.GetContext(ctx, q, &s, usageStateSQL, customer, meter, periodStart)
	return foundUsageState(s, err, customer, meter)
}

func foundUsageState(s UsageState, err error, customer, meter string) (UsageState, bool, error) {
	if errors.Is(err, sql.ErrNoRows) {
		return UsageState{}, false, nil
	}
	if err != nil {
		return UsageState{}, false, fmt.Errorf("read usage state %s/%s: %w", customer, meter, err)
	}
	return s, true, nil
}

const saveUsageStateSQL = `INSERT INTO usage_state (` + usageStateCols + `) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (customer_id, meter, period_start) DO UPDATE SET period_end = excluded.period_end,
		used = excluded.used, last_row_id = excluded.last_row_id`

// SaveUsageState stores s, replacing the row of its key.
func (b Batch) SaveUsageState(ctx context.Context, s UsageState) error {
	_, err := b.tx.ExecContext(ctx, saveUsageStateSQL, s.Customer, s.Meter, s.PeriodStart, s.PeriodEnd, s.Used, s.LastRowID)
	if err != nil {
		return fmt.Errorf("save usage state %s/%s: %w", s.Customer, s.Meter, err)
	}
	return nil
}

// ResetUsageState empties usage_state and records that it is being built
// in zone, from the ledger up to through: the caller then saves every row.
func (b Batch) ResetUsageState(ctx context.Context, z StateZone) error {
	if _, err := b.tx.ExecContext(ctx, `DELETE FROM usage_state`); err != nil {
		return fmt.Errorf("reset usage state: %w", err)
	}
	_, err := b.tx.ExecContext(ctx, `INSERT INTO usage_state_zone (one, zone, built_at, through) VALUES (1, ?, ?, ?)
		ON CONFLICT (one) DO UPDATE SET zone = excluded.zone, built_at = excluded.built_at, through = excluded.through`,
		z.Zone, z.BuiltAt, z.Through)
	if err != nil {
		return fmt.Errorf("record usage state zone: %w", err)
	}
	return nil
}

// ScanUsage reads ledger rows inside the batch (the usage state's build
// sees exactly the rows the lock holds still).
func (b Batch) ScanUsage(ctx context.Context, s UsageScan, fn func(*UsageRow) error) error {
	return scanUsage(ctx, b.tx, s, fn)
}

// FiredThresholds lists the thresholds that fired for a customer's meter in
// the period starting at periodStart.
func (b Batch) FiredThresholds(ctx context.Context, customer, meter string, periodStart int64) ([]string, error) {
	var ts []string
	err := sqlx.SelectContext(ctx, b.tx, &ts, `SELECT threshold FROM threshold_crossings
		WHERE customer_id = ? AND meter = ? AND period_start = ?`, customer, meter, periodStart)
	if err != nil {
		return nil, fmt.Errorf("read fired thresholds %s/%s: %w", customer, meter, err)
	}
	return ts, nil
}

// InsertCrossing stores c unless its threshold already fired in its period:
// inserted says which. The unique key decides, inside the transaction.
func (b Batch) InsertCrossing(ctx context.Context, c Crossing) (inserted bool, err error) {
	res, err := b.tx.ExecContext(ctx, `INSERT INTO threshold_crossings (customer_id, meter, period_start, period_end,
		threshold, threshold_value, limit_value, used, row_id, receipt_id, crossed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (customer_id, meter, period_start, threshold) DO NOTHING`,
		c.Customer, c.Meter, c.PeriodStart, c.PeriodEnd, c.Threshold, c.ThresholdValue, c.Limit, c.Used, c.RowID, c.ReceiptID, c.CrossedAt)
	if err != nil {
		return false, fmt.Errorf("insert threshold crossing %s/%s %s: %w", c.Customer, c.Meter, c.Threshold, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// LimitOverrides reads a customer's overrides of meter in the batch, oldest
// first.
func (b Batch) LimitOverrides(ctx context.Context, customer, meter string) ([]LimitOverride, error) {
	return limitOverrides(ctx, b.tx, customer, meter)
}

// PlanAssignments reads a customer's plan assignments in the batch.
func (b Batch) PlanAssignments(ctx context.Context, customer string) ([]PlanAssignment, error) {
	if customer == "" {
		return nil, errors.New("plan assignments: a customer is required")
	}
	return planAssignments(ctx, b.tx, customer)
}

// The readers' side, on the read pool.

// StateZone reads usage_state_zone (found false: not built yet, or a
// database older than it).
func (db *DB) StateZone(ctx context.Context) (StateZone, bool, error) {
	z, ok, err := stateZone(ctx, db.hot)
	if err != nil && predates(ctx, db.Read, versionEntitlements) {
		return StateZone{}, false, nil
	}
	return z, ok, err
}

const stateZoneQuery = `SELECT zone, built_at, through FROM usage_state_zone WHERE one = 1`

func stateZone(ctx context.Context, q sqlx.QueryerContext) (StateZone, bool, error) {
	var z StateZone
	err := sqlx.GetContext(ctx, q, &z, stateZoneQuery)
	if errors.Is(err, sql.ErrNoRows) {
		return StateZone{}, false, nil
	}
	if err != nil {
		return StateZone{}, false, fmt.Errorf("read usage state zone: %w", err)
	}
	return z, true, nil
}

// UsageStates reads the usage_state rows of customer ("" for every
// customer) whose period contains the instant at (0: every period), by
// customer, meter and period.
func (db *DB) UsageStates(ctx context.Context, customer string, at int64) ([]UsageState, error) {
	var ss []UsageState
	query, args := usageStatesQuery(customer, at)
	if err := sqlx.SelectContext(ctx, db.Read, &ss, query, args...); err != nil {
		if predates(ctx, db.Read, versionEntitlements) {
			return nil, nil
		}
		return nil, fmt.Errorf("read usage state: %w", err)
	}
	return ss, nil
}

// MonthUsageStates reads the usage_state rows of the month starting at
// start, of customer ("" for every customer), by customer and meter:
// through the month's index (migration 0032), not a scan.
func (db *DB) MonthUsageStates(ctx context.Context, customer string, start int64) ([]UsageState, error) {
	where, args := whereEqual(equal{"customer_id", customer})
	if where == "" {
		where = " WHERE"
	} else {
		where += " AND"
	}
	var ss []UsageState
	err := sqlx.SelectContext(ctx, db.Read, &ss, `SELECT `+usageStateCols+` FROM usage_state`+where+` period_start = ?
		ORDER BY customer_id, meter`, append(args, start)...)
	if err != nil {
		if predates(ctx, db.Read, versionEntitlements) {
			return nil, nil
		}
		return nil, fmt.Errorf("read usage state: %w", err)
	}
	return ss, nil
}

// usageStatesQuery reads the usage_state rows of customer ("" for every
// customer) whose period contains the instant at (0: every period), by
// customer, meter and period.
func usageStatesQuery(customer string, at int64) (string, []any) {
	where, args := whereEqual(equal{"customer_id", customer})
	if at != 0 {
		if where == "" {
			where = " WHERE"
		} else {
			where += " AND"
		}
		where, args = where+" period_start <= ? AND ? < period_end", append(args, at, at)
	}
	return `SELECT ` + usageStateCols + ` FROM usage_state` + where + `
		ORDER BY customer_id, meter, period_start`, args
}

// CheckReads is what an entitlement check reads of one customer at one
// instant (DB.CheckReads).
type CheckReads struct {
	Zone  StateZone
	Built bool // serve has built the usage state (Zone is its zone)
	// Assignments and LimitOverrides are the customer's, every meter's.
	Assignments    []PlanAssignment
	LimitOverrides []LimitOverride
	// States are the usage_state rows whose period contains the instant:
	// the asked meters', or with spend every meter's.
	States         []UsageState
	SpendOverrides []SpendOverride // with spend only
}

// CheckReads reads what an entitlement check of customer's meters (and,
// with spend, of its spend) needs at the instant at: the state's zone, the
// customer's assignments and overrides, and its usage state in the period
// containing at, one primary-key read per meter. They are the reads serve
// makes thousands of times a second, so they run as one group (readHot):
// each prepared once, and on PostgreSQL all in one round trip.
func (db *DB) CheckReads(ctx context.Context, customer string, meters []string, spend bool, at int64) (CheckReads, error) {
	r, err := db.checkReads(ctx, customer, meters, spend, spend, at)
	if err == nil {
		return r, nil
	}
	switch {
	case predates(ctx, db.Read, versionEntitlements): // its tables are missing: nothing is built
		return CheckReads{}, nil
	case spend && predates(ctx, db.Read, versionSpend): // opened read-only, older than spend overrides: none
		r, err = db.checkReads(ctx, customer, meters, true, false, at)
	}
	if err != nil {
		return CheckReads{}, fmt.Errorf("read the entitlement check of %s: %w", customer, err)
	}
	return r, nil
}

// checkReads is CheckReads' group of reads; spendOverrides says whether it
// reads the spend overrides too.
func (db *DB) checkReads(ctx context.Context, customer string, meters []string, spend, spendOverrides bool, at int64) (CheckReads, error) {
	var r CheckReads
	var zones []StateZone
	assignments, aargs := planAssignmentsQuery(customer)
	overrides, oargs := limitOverridesQuery(customer, "")
	reads := []hotRead{{stateZoneQuery, nil, &zones}, {assignments, aargs, &r.Assignments}, {overrides, oargs, &r.LimitOverrides}}
	states := make([][]UsageState, len(meters))
	if spend {
		q, args := usageStatesQuery(customer, at)
		reads = append(reads, hotRead{q, args, &r.States})
	} else {
		for i, m := range meters {
			reads = append(reads, hotRead{`SELECT ` + usageStateCols + ` FROM usage_state
				WHERE customer_id = ? AND meter = ? AND period_start <= ? AND ? < period_end
				ORDER BY period_start DESC LIMIT 1`, []any{customer, m, at, at}, &states[i]})
		}
	}
	if spendOverrides {
		q, args := spendOverridesQuery(customer)
		reads = append(reads, hotRead{q, args, &r.SpendOverrides})
	}
	if err := db.readHot(ctx, reads...); err != nil {
		return CheckReads{}, err
	}
	for _, s := range states {
		r.States = append(r.States, s...)
	}
	if len(zones) == 1 {
		r.Zone, r.Built = zones[0], true
	}
	return r, nil
}

// LimitOverrides reads the overrides of customer ("" for every customer)
// and meter ("" for every meter), by customer, meter, date and id.
func (db *DB) LimitOverrides(ctx context.Context, customer, meter string) ([]LimitOverride, error) {
	os, err := limitOverrides(ctx, db.hot, customer, meter)
	if err != nil && predates(ctx, db.Read, versionEntitlements) {
		return nil, nil
	}
	return os, err
}

func limitOverrides(ctx context.Context, q sqlx.QueryerContext, customer, meter string) ([]LimitOverride, error) {
	var os []LimitOverride
	query, args := limitOverridesQuery(customer, meter)
	if err := sqlx.SelectContext(ctx, q, &os, query, args...); err != nil {
		return nil, fmt.Errorf("read limit overrides: %w", err)
	}
	return os, nil
}

// limitOverridesQuery reads the overrides of customer and meter ("" for
// every one), by customer, meter, date and id.
func limitOverridesQuery(customer, meter string) (string, []any) {
	where, args := whereEqual(equal{"customer_id", customer}, equal{"meter", meter})
	return `SELECT ` + overrideCols + ` FROM limit_overrides` + where + `
		ORDER BY customer_id, meter, effective_from, id`, args
}

// InsertLimitOverride appends one override and returns its id. Like the
// registry, overrides are no part of the custody chain: the write takes
// turns with serve's writer through the write lock.
func (db *DB) InsertLimitOverride(ctx context.Context, o LimitOverride) (int64, error) {
	db.registry.Add(1) // before it commits (DataVersion)
	var id int64
	err := db.Write.QueryRowxContext(ctx, `INSERT INTO limit_overrides (customer_id, meter, limit_value, kind, effective_from,
		recorded_at, note) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		o.Customer, o.Meter, o.Limit, o.Kind, o.EffectiveFrom, o.RecordedAt, o.Note).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert limit override for %q: %w", o.Customer, err)
	}
	return id, nil
}

// Crossings reads the thresholds that fired, of customer ("" for every
// customer), newest first, at most limit (0: all).
func (db *DB) Crossings(ctx context.Context, customer string, limit int) ([]Crossing, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	var cs []Crossing
	where, args := whereEqual(equal{"customer_id", customer})
	if err := sqlx.SelectContext(ctx, db.Read, &cs, `SELECT `+crossingCols+` FROM threshold_crossings`+where+`
		ORDER BY id DESC LIMIT ?`, append(args, limit)...); err != nil {
		if predates(ctx, db.Read, versionEntitlements) {
			return nil, nil
		}
		return nil, fmt.Errorf("read threshold crossings: %w", err)
	}
	return cs, nil
}
