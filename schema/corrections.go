package schema

import (
	"context"
	"fmt"
	"regexp"

	"github.com/jmoiron/sqlx"
)

// Corrections (migration 0017): void rows in metered_usage and amended
// events in receipts. Their reads and the migration step live here.

// looseCheck is a CHECK constraint a migration loosens on SQLite: how the
// table's stored definition may spell it (0001's IN list, or equalities as
// 0004 rewrote receipts' checks, or an earlier loosening) and what replaces it.
type looseCheck struct {
	table   string
	old     *regexp.Regexp
	loosest string
}

// looseChecks0017 admit void rows and amended events (corrections).
var looseChecks0017 = []looseCheck{
	{"metered_usage", regexp.MustCompile(`CHECK \(kind IN \('usage', 'adjustment'\)\)|CHECK \(kind = 'usage' OR kind = 'adjustment'\)`),
		`CHECK (kind = 'usage' OR kind = 'adjustment' OR kind = 'void')`},
	{"receipts", regexp.MustCompile(`CHECK \(source = 'webhook' OR source = 'reconcile' OR source = 'replay' OR source = 'api'\)|` +
		`CHECK \(source IN \('webhook', 'reconcile', 'replay', 'api'\)\)`),
		`CHECK (source = 'webhook' OR source = 'reconcile' OR source = 'replay' OR source = 'api' OR source = 'amend')`},
}

// looseChecks0019 admit threshold alerts' receipts (entitlements).
var looseChecks0019 = []looseCheck{
	{"receipts", regexp.MustCompile(`CHECK \(source = 'webhook' OR source = 'reconcile' OR source = 'replay' OR source = 'api' OR source = 'amend'\)`),
		`CHECK (source = 'webhook' OR source = 'reconcile' OR source = 'replay' OR source = 'api' OR source = 'amend' OR source = 'alert')`},
}

// loosenChecks returns a migration step that edits the stored definitions
// of cs's tables so their checks admit more, following SQLite's documented
// procedure for a change that leaves every stored row valid and the file
// format as it is: writable_schema, the edit, schema_version + 1 so every
// connection reads the new definition, integrity_check. No row is copied. A
// definition that spells no known form stops the migration (nothing is
// changed): editing text it does not recognise could break the table.
func loosenChecks(cs []looseCheck) func(context.Context, *sqlx.Tx) error {
	return func(ctx context.Context, tx *sqlx.Tx) error {
		var version int64
		if err := tx.GetContext(ctx, &version, `PRAGMA schema_version`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `PRAGMA writable_schema = ON`); err != nil {
			return err
		}
		for _, c := range cs {
			var def string
			if err := tx.GetContext(ctx, &def, `SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?`, c.table); err != nil {
				return fmt.Errorf("read %s's definition: %w", c.table, err)
			}
			if n := len(c.old.FindAllStringIndex(def, -1)); n != 1 {
				return fmt.Errorf("%s's definition has %d checks of the form this migration loosens, want 1: %s", c.table, n, def)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE sqlite_master SET sql = ? WHERE type = 'table' AND name = ?`,
				c.old.ReplaceAllLiteralString(def, c.loosest), c.table); err != nil {
				return fmt.Errorf("loosen %s's check: %w", c.table, err)
			}
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA schema_version = %d`, version+1)); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `PRAGMA writable_schema = OFF`); err != nil {
			return err
		}
		var problems []string
		if err := tx.SelectContext(ctx, &problems, `PRAGMA integrity_check`); err != nil {
			return err
		}
		if len(problems) != 1 || problems[0] != "ok" {
			return fmt.Errorf("integrity_check after loosening checks: %v", problems)
		}
		return nil
	}
}

// EventLedgerRows reads an event's ledger rows in id order, inside the batch
// (a void reads what it voids, and whether it was voided, under the write
// lock, so no other writer can void it meanwhile).
func (b Batch) EventLedgerRows(ctx context.Context, provider, eventID string) ([]LedgerRow, error) {
	return eventLedgerRows(ctx, b.tx, provider, eventID)
}

// VoidRows reads the void rows with id > afterID in id order, at most limit
// (0: all), through the corrections index.
func (r ledgerReads) VoidRows(ctx context.Context, afterID int64, limit int) ([]LedgerRow, error) {
	return voidRows(ctx, r.q, afterID, limit)
}

// VoidRows: see ledgerReads; on the read pool.
func (db *DB) VoidRows(ctx context.Context, afterID int64, limit int) ([]LedgerRow, error) {
	return db.reads().VoidRows(ctx, afterID, limit)
}

func voidRows(ctx context.Context, q sqlx.QueryerContext, afterID int64, limit int) ([]LedgerRow, error) {
	// "kind <> 'usage'" is the index's own condition, so the planner may use
	// the partial index (neither engine proves kind = 'void' implies it).
	query := `SELECT ` + ledgerColumns + ` FROM metered_usage WHERE kind <> 'usage' AND kind = 'void' AND id > ? ORDER BY id`
	args := []any{afterID}
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	var rows []LedgerRow
	err := sqlx.SelectContext(ctx, q, &rows, query, args...)
	return rows, err
}
