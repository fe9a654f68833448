package schema

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
)

// Stats are the database-derived figures the metrics scrape exports.
type Stats struct {
	// Applied, Ignored and Failed count the receipts by status.
	Applied, Ignored, Failed int64
	// OldestFailedAt is the received_at (unix ms) of the oldest failed
	// receipt; HasFailed is false when there is none.
	OldestFailedAt int64
	HasFailed      bool
	// LedgerRows counts metered_usage (usage and adjustments).
	LedgerRows int64
}

// Stats reads the figures of Stats in one snapshot. It runs at every scrape,
// so each query is an index or b-tree walk, never a scan that decodes rows.
func (tx *ReadTx) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	// COUNT(*) of a whole table is a b-tree page walk, while GROUP BY status
	// decodes every index entry (about 10 ms against 100-400 ms at a million
	// receipts). So count the total, count the two small statuses over the
	// receipts_status index, and derive applied (the table's CHECK constraint
	// allows only these three statuses).
	var total int64
	if err := tx.tx.GetContext(ctx, &total, `SELECT COUNT(*) FROM receipts`); err != nil {
		return st, fmt.Errorf("count receipts: %w", err)
	}
	for _, c := range []struct {
		status string
		n      *int64
	}{{"ignored", &st.Ignored}, {"failed", &st.Failed}} {
		if err := tx.tx.GetContext(ctx, c.n, `SELECT COUNT(*) FROM receipts WHERE status = ?`, c.status); err != nil {
			return st, fmt.Errorf("count %s receipts: %w", c.status, err)
		}
	}
	st.Applied = total - st.Ignored - st.Failed
	var oldest sql.NullInt64
	if err := tx.tx.GetContext(ctx, &oldest, `SELECT MIN(received_at) FROM receipts WHERE status = 'failed'`); err != nil {
		return st, fmt.Errorf("oldest failed receipt: %w", err)
	}
	st.OldestFailedAt, st.HasFailed = oldest.Int64, oldest.Valid
	if err := tx.tx.GetContext(ctx, &st.LedgerRows, `SELECT COUNT(*) FROM metered_usage`); err != nil {
		return st, fmt.Errorf("count ledger rows: %w", err)
	}
	return st, nil
}

// Pools returns the read pool and the write connection's handles for their
// connection statistics (the go_sql_* metrics); nothing outside schema
// queries through them.
func (db *DB) Pools() (read, write *sql.DB) { return db.Read.DB, db.Write.DB }

// CountRows is the number of rows in one of hookledger's tables.
func (db *DB) CountRows(ctx context.Context, table string) (int64, error) {
	// A table name cannot be a bound parameter: only hookledger's own
	// tables (the ones copy moves) ever reach the query text.
	if !slices.Contains(copyTables, table) {
		return 0, fmt.Errorf("count rows: %q is not one of hookledger's tables", table)
	}
	var n int64
	err := db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM `+table)
	return n, err
}
