package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Copying a ledger from SQLite to PostgreSQL (`hookledger copy`): every
// table, every row as stored (ids, hashes, pruned bodies), in one
// transaction on the target, through PostgreSQL's COPY.

// copyTables are hookledger's tables, parents before children. CopyLedger
// refuses a source with a table missing here, so a migration that adds a
// table cannot be forgotten by copy.
var copyTables = []string{
	"receipts", "delivery_attempts", "metered_usage", "replays",
	"period_closes", "close_exclusions", "invoices", "invoice_lines", "close_seals",
	"reconcile_checkpoints", "redelivery_requests", "prune_runs",
	"stripe_pushes", "stripe_sends", "stripe_reports", "stripe_invoice_states", "stripe_invoice_pushes", "stripe_invoice_results", "outbox", "outbox_attempts", "outbox_delivered", "forward_destinations",
	"api_keys",
	"customers", "plan_assignments",
	"usage_state", "usage_state_zone", "limit_overrides", "threshold_crossings", "spend_overrides", "spend_crossings",
	"credit_entries", "credit_crossings",
	"chain_head",
}

// ErrTargetNotEmpty means the copy's target already holds a ledger.
var ErrTargetNotEmpty = errors.New("the target database is not empty")

// CopyCounts are the rows of each table a copy moves.
type CopyCounts map[string]int64

// CopyPlan checks that src (SQLite) can be copied into dst (PostgreSQL,
// migrated to the same schema version) and counts the rows to copy. dst
// must hold no receipt, ledger row, invoice or anything else.
func CopyPlan(ctx context.Context, src, dst *DB) (CopyCounts, error) {
	if src.Postgres() || !dst.Postgres() {
		return nil, errors.New("copy goes from a SQLite database to a PostgreSQL one")
	}
	sv, err := src.SchemaVersion(ctx)
	if err != nil {
		return nil, err
	}
	dv, err := dst.SchemaVersion(ctx)
	if err != nil {
		return nil, err
	}
	if sv != dv {
		return nil, fmt.Errorf("the source is at schema version %d and the target at %d: run the same hookledger's migrate on both", sv, dv)
	}
	var tables []string
	if err := src.Read.SelectContext(ctx, &tables, `SELECT name FROM sqlite_schema WHERE type = 'table'
		AND name NOT LIKE 'sqlite_%' AND name != 'schema_migrations' ORDER BY name`); err != nil {
		return nil, err
	}
	for _, t := range tables {
		if !slices.Contains(copyTables, t) {
			return nil, fmt.Errorf("copy does not know the source's table %s", t)
		}
	}
	counts := CopyCounts{}
	for _, t := range copyTables {
		if !slices.Contains(tables, t) {
			return nil, fmt.Errorf("the source has no table %s", t)
		}
		var n, m int64
		if err := src.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM `+t); err != nil {
			return nil, err
		}
		counts[t] = n
		if t == "chain_head" {
			continue // the migration made the target's; the copy moves it
		}
		if err := dst.Read.GetContext(ctx, &m, `SELECT COUNT(*) FROM `+t); err != nil {
			return nil, err
		}
		if m > 0 {
			return nil, fmt.Errorf("%w: its %s holds %d rows (copy only into a database hookledger has just migrated)", ErrTargetNotEmpty, t, m)
		}
	}
	if h, err := dst.LatestHead(ctx); err != nil {
		return nil, err
	} else if h.LedgerID != 0 || h.ReceiptID != 0 {
		return nil, fmt.Errorf("%w: its chain head has moved", ErrTargetNotEmpty)
	}
	return counts, nil
}

// CopyLedger copies every table of src into dst (after CopyPlan), in one
// transaction on dst: a failed copy leaves the target as empty as it was.
// progress is called after each batch of rows with the table and the rows
// copied so far in it. src must not change meanwhile (the caller holds its
// data directory's lock); its rows are read in one snapshot anyway.
func CopyLedger(ctx context.Context, src, dst *DB, progress func(table string, rows int64)) error {
	rtx, err := src.Read.BeginTxx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer rtx.Rollback()
	conn, err := dst.Write.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc := dc.(rebindConn).Conn.Conn()
		tx, err := pc.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		for _, t := range copyTables {
			if t == "chain_head" {
				var h ChainHead
				var pruned, payload int64
				if err := rtx.QueryRowxContext(ctx, `SELECT ledger_id, ledger_hash, receipt_id, receipt_hash, receipts_pruned_through,
					payload_pruned_before FROM chain_head WHERE id = 1`).
					Scan(&h.LedgerID, &h.LedgerHash, &h.ReceiptID, &h.ReceiptHash, &pruned, &payload); err != nil {
					return fmt.Errorf("chain_head: %w", err)
				}
				if _, err := tx.Exec(ctx, `UPDATE chain_head SET ledger_id = $1, ledger_hash = $2, receipt_id = $3, receipt_hash = $4,
					receipts_pruned_through = $5, payload_pruned_before = $6 WHERE id = 1`,
					h.LedgerID, h.LedgerHash, h.ReceiptID, h.ReceiptHash, pruned, payload); err != nil {
					return fmt.Errorf("chain_head: %w", err)
				}
				progress(t, 1)
				continue
			}
			if err := copyTable(ctx, rtx.Tx, tx, t, progress); err != nil {
				var bad *UnmovableRowError
				if errors.As(err, &bad) {
					return err // it names its table
				}
				return fmt.Errorf("%s: %w", t, err)
			}
		}
		// Identity columns go on after the ids copied.
		rows, err := tx.Query(ctx, `SELECT table_name::text, pg_get_serial_sequence(table_name, column_name) FROM information_schema.columns
			WHERE table_schema = current_schema() AND is_identity = 'YES'`)
		if err != nil {
			return err
		}
		seqs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (s [2]string, err error) {
			return s, r.Scan(&s[0], &s[1])
		})
		if err != nil {
			return err
		}
		for _, s := range seqs {
			if _, err := tx.Exec(ctx, `SELECT setval($1, (SELECT COALESCE(MAX(id), 0) FROM `+pgx.Identifier{s[0]}.Sanitize()+`) + 1, false)`, s[1]); err != nil {
				return fmt.Errorf("%s: move its identity past the copied ids: %w", s[0], err)
			}
		}
		return tx.Commit(ctx)
	})
}

// copyTable streams one table from SQLite into PostgreSQL's COPY, in id (or
// rowid) order.
func copyTable(ctx context.Context, src *sql.Tx, dst pgx.Tx, table string, progress func(string, int64)) error {
	rows, err := src.QueryContext(ctx, `SELECT * FROM `+table+` ORDER BY rowid`)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	// SQLite keeps booleans as 0 and 1; PostgreSQL's boolean columns want
	// bools. Its text holds any bytes, PostgreSQL's refuses some: each text
	// value is checked, so a row that cannot move is named (COPY's own error
	// gives a line number).
	boolean := make([]bool, len(cols))
	text := make([]bool, len(cols))
	for i, c := range cols {
		var typ string
		if err := dst.QueryRow(ctx, `SELECT data_type FROM information_schema.columns
			WHERE table_schema = current_schema() AND table_name = $1 AND column_name = $2`, table, c).Scan(&typ); err != nil {
			return fmt.Errorf("column %s: %w", c, err)
		}
		boolean[i] = typ == "boolean"
		text[i] = typ == "text" || typ == "character varying"
	}
	key, err := rowKey(ctx, dst, table, cols)
	if err != nil {
		return err
	}
	src2 := &rowSource{table: table, cols: cols, rows: rows, vals: make([]any, len(cols)), ptrs: make([]any, len(cols)),
		boolean: boolean, text: text, key: key, progress: func(n int64) { progress(table, n) }}
	for i := range src2.vals {
		src2.ptrs[i] = &src2.vals[i]
	}
	_, err = dst.CopyFrom(ctx, pgx.Identifier{table}, cols, src2)
	if src2.bad != nil {
		return src2.bad // pgx answers with the server's COPY error, which only quotes it
	}
	if err == nil {
		progress(table, src2.n)
	}
	return err
}

// rowKey is the indexes in cols of what names a row of table in copy's
// errors: its id, else its primary key's columns (none: its position).
func rowKey(ctx context.Context, dst pgx.Tx, table string, cols []string) ([]int, error) {
	if i := slices.Index(cols, "id"); i >= 0 {
		return []int{i}, nil
	}
	rows, err := dst.Query(ctx, `SELECT a.attname::text FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = to_regclass($1) AND i.indisprimary ORDER BY array_position(i.indkey::int2[], a.attnum)`,
		pgx.Identifier{table}.Sanitize())
	if err != nil {
		return nil, fmt.Errorf("primary key: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("primary key: %w", err)
	}
	var key []int
	for _, n := range names {
		if i := slices.Index(cols, n); i >= 0 {
			key = append(key, i)
		}
	}
	return key, nil
}

// rowSource is pgx's CopyFromSource over database/sql rows.
type rowSource struct {
	table    string
	cols     []string
	rows     *sql.Rows
	vals     []any
	ptrs     []any
	boolean  []bool
	text     []bool
	key      []int // indexes of the columns that name a row (rowKey)
	n        int64
	err      error
	bad      *UnmovableRowError
	progress func(int64)
}

// checkText refuses the current row when a text column holds what
// PostgreSQL's text cannot, naming the row and the column.
func (s *rowSource) checkText() error {
	for i, t := range s.text {
		var v string
		switch x := s.vals[i].(type) {
		case string:
			v = x
		case []byte:
			v = string(x)
		default:
			continue
		}
		if !t || CheckText(v) == nil {
			continue
		}
		s.bad = &UnmovableRowError{Table: s.table, Row: s.name(), Column: s.cols[i], Where: badTextAt(v)}
		return s.bad
	}
	return nil
}

// name is the current row's key as copy's errors show it.
func (s *rowSource) name() string {
	if len(s.key) == 0 {
		return fmt.Sprintf("number %d (in rowid order)", s.n)
	}
	parts := make([]string, len(s.key))
	for j, i := range s.key {
		v := s.vals[i]
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		if str, ok := v.(string); ok {
			parts[j] = fmt.Sprintf("%s %q", s.cols[i], clipKey(str))
		} else {
			parts[j] = fmt.Sprintf("%s %v", s.cols[i], v)
		}
	}
	return strings.Join(parts, ", ")
}

// clipKey shortens a key quoted in an error (an old ledger's keys may be
// kilobytes long).
func clipKey(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}

func (s *rowSource) Next() bool {
	if !s.rows.Next() {
		s.err = s.rows.Err()
		return false
	}
	s.n++
	if s.n%10_000 == 0 {
		s.progress(s.n)
	}
	return true
}

func (s *rowSource) Values() ([]any, error) {
	if err := s.rows.Scan(s.ptrs...); err != nil {
		return nil, err
	}
	for i, b := range s.boolean {
		if b {
			if v, ok := s.vals[i].(int64); ok {
				s.vals[i] = v != 0
			}
		}
		// An empty BLOB (x'') scans as a nil slice, which pgx would send
		// as NULL: it is an empty bytea.
		if v, ok := s.vals[i].([]byte); ok && v == nil {
			s.vals[i] = []byte{}
		}
	}
	if err := s.checkText(); err != nil {
		return nil, err
	}
	return s.vals, nil
}

func (s *rowSource) Err() error { return s.err }
