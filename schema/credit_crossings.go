package schema

import (
	"context"
	"fmt"
	"math"

	"github.com/jmoiron/sqlx"
)

// Credits in checks and alerts (migration 0030, docs/entitlements.md): the
// credit alerts that fired (credit_crossings, once per grant and
// threshold), and what a check of a plan limit of kind credit reads.

// versionCreditCrossings is the migration that created credit_crossings.
const versionCreditCrossings = 30

// CreditCrossing is one row of credit_crossings: a credit threshold that
// fired for one grant.
type CreditCrossing struct {
	ID             int64  `db:"id"`
	GrantID        string `db:"grant_id"`
	Customer       string `db:"customer_id"`
	Currency       string `db:"currency"`
	Threshold      string `db:"threshold"` // as configured, or "depleted"
	ThresholdValue string `db:"threshold_value"`
	Balance        string `db:"balance"`
	Drawn          string `db:"drawn"`
	Available      string `db:"available"`
	Plan           string `db:"plan"`
	PeriodStart    int64  `db:"period_start"`
	PeriodEnd      int64  `db:"period_end"`
	RowID          int64  `db:"row_id"`
	ReceiptID      int64  `db:"receipt_id"`
	CrossedAt      int64  `db:"crossed_at"`
}

const creditCrossingCols = `id, grant_id, customer_id, currency, threshold, threshold_value, balance, drawn, available,
	plan, period_start, period_end, row_id, receipt_id, crossed_at`

// FiredCredit is one grant's threshold that fired.
type FiredCredit struct {
	GrantID   string `db:"grant_id"`
	Threshold string `db:"threshold"`
}

// The writer's side, inside its batch.

// FiredCreditThresholds lists the credit thresholds that fired for the
// grants of customer.
func (b Batch) FiredCreditThresholds(ctx context.Context, customer string) ([]FiredCredit, error) {
	var fs []FiredCredit
	err := sqlx.SelectContext(ctx, b.tx, &fs, `SELECT grant_id, threshold FROM credit_crossings WHERE customer_id = ?`, customer)
	if err != nil {
		return nil, fmt.Errorf("read fired credit thresholds of %s: %w", customer, err)
	}
	return fs, nil
}

// InsertCreditCrossing stores c unless its grant's threshold fired before:
// inserted says which. The unique key decides, inside the transaction.
func (b Batch) InsertCreditCrossing(ctx context.Context, c CreditCrossing) (inserted bool, err error) {
	res, err := b.tx.ExecContext(ctx, `INSERT INTO credit_crossings (grant_id, customer_id, currency, threshold,
		threshold_value, balance, drawn, available, plan, period_start, period_end, row_id, receipt_id, crossed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (grant_id, threshold) DO NOTHING`,
		c.GrantID, c.Customer, c.Currency, c.Threshold, c.ThresholdValue, c.Balance, c.Drawn, c.Available, c.Plan,
		c.PeriodStart, c.PeriodEnd, c.RowID, c.ReceiptID, c.CrossedAt)
	if err != nil {
		return false, fmt.Errorf("insert credit crossing %s %s: %w", c.GrantID, c.Threshold, err)
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// The readers' side.

// CreditCrossings reads the credit thresholds that fired, of customer (""
// for every customer), newest first, at most limit (0: all).
func (db *DB) CreditCrossings(ctx context.Context, customer string, limit int) ([]CreditCrossing, error) {
	if limit <= 0 {
		limit = math.MaxInt32
	}
	var cs []CreditCrossing
	where, args := whereEqual(equal{"customer_id", customer})
	err := sqlx.SelectContext(ctx, db.Read, &cs, `SELECT `+creditCrossingCols+` FROM credit_crossings`+where+`
		ORDER BY id DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		if predates(ctx, db.Read, versionCreditCrossings) {
			return nil, nil
		}
		return nil, fmt.Errorf("read credit crossings: %w", err)
	}
	return cs, nil
}

// CreditReads is what a check of a limit of kind credit reads of one
// customer at one instant, beside its CheckReads: the month's usage state
// of every meter (the spend is priced from it) and the customer's credit
// ledger (the grants' balances are replayed from it).
type CreditReads struct {
	States  []UsageState
	Entries []CreditEntry
}

// CreditReads reads what a credit check of customer needs at the instant
// at, as one group (readHot). A database from before credits has no
// entries (and so no credit).
func (db *DB) CreditReads(ctx context.Context, customer string, at int64) (CreditReads, error) {
	var r CreditReads
	states, sargs := usageStatesQuery(customer, at)
	err := db.readHot(ctx, hotRead{states, sargs, &r.States},
		hotRead{`SELECT ` + creditColumns + ` FROM credit_entries WHERE customer_id = ? ORDER BY id`, []any{customer}, &r.Entries})
	if err != nil {
		if predates(ctx, db.Read, versionCredits) {
			return CreditReads{}, ErrNoCredits
		}
		return CreditReads{}, fmt.Errorf("read the credit check of %s: %w", customer, err)
	}
	return r, nil
}
