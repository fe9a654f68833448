package schema

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
)

// openAt creates a database with only the migrations up to version applied,
// as an older hookledger would have left it.
func openAt(t *testing.T, version int) (string, *sqlx.DB) {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	db, err := sqlx.Open("sqlite", dsn(path, []string{"journal_mode(wal)"}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	db.MustExec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	for _, m := range ms {
		if m.Version > version {
			break
		}
		db.MustExec(m.SQL)
		db.MustExec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name)
	}
	return path, db
}

// receiptsAt8 reads receipts with the columns they had at version 8 (0009
// adds the first attempt's), for a test of an older migration to compare.
const receiptsAt8 = `SELECT id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
	handler_version, source, received_at, processed_at, prev_hash, row_hash FROM receipts ORDER BY id`

// fillCustody writes a receipt with two attempts and a replay, and one
// ignored receipt with one attempt, through plain SQL. The receipt's digest
// is its body's (SHA-256 of {}): prune keeps a body that does not match.
func fillCustody(t *testing.T, db *sqlx.DB) {
	t.Helper()
	db.MustExec(`INSERT INTO receipts (id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
		handler_version, source, received_at, processed_at) VALUES
		(7, 'stripe', 'evt_1', 'invoice.paid', X'7B7D', X'44136FA355B3678A1146AD16F7E8649E94FB4FC21FE77E8310C060F61CAAFF8A', 'Stripe-Signature: t=1,v1=aa', 'applied', '', 'v1', 'webhook', 1000, 1001),
		(9, 'github', 'd-2', 'ping', NULL, X'02', '', 'ignored', 'no mapping', 'v1', 'reconcile', 2000, 2001)`)
	db.MustExec(`INSERT INTO delivery_attempts (id, provider, event_id, received_at, remote_addr, user_agent, request_id,
		body_sha256, signature_headers, signature_age_ms, outcome, status_code) VALUES
		(3, 'stripe', 'evt_1', 1000, '10.0.0.1:1', 'Stripe/1.0', 'r1', X'44136FA355B3678A1146AD16F7E8649E94FB4FC21FE77E8310C060F61CAAFF8A', 'h', 40, 'inserted', 200),
		(4, 'stripe', 'evt_1', 1500, '10.0.0.1:2', 'Stripe/1.0', 'r2', X'03', 'h', NULL, 'payload_mismatch', 200),
		(5, 'github', 'd-2', 2000, '', '', '', X'02', '', NULL, 'inserted', 200)`)
	db.MustExec(`INSERT INTO replays (provider, event_id, replayed_at, from_status, to_status, from_handler_version, handler_version)
		VALUES ('stripe', 'evt_1', 3000, 'failed', 'applied', 'v0', 'v1')`)
}

// dumps renders every row of each query (dump), to compare a database's
// contents before and after a migration with keptRows.
func dumps(t *testing.T, db *sqlx.DB, queries []string) []string {
	t.Helper()
	out := make([]string, len(queries))
	for i, q := range queries {
		out[i] = dump(t, db, q)
	}
	return out
}

// keptRows fails t for each query whose rows in db differ from before
// (dumps of the same queries).
func keptRows(t *testing.T, db *sqlx.DB, queries, before []string) {
	t.Helper()
	for i, q := range queries {
		if got := dump(t, db, q); got != before[i] {
			t.Errorf("%s changed:\nbefore %s\nafter  %s", q, before[i], got)
		}
	}
}

// dump renders every row of query, for comparing contents before and after.
func dump(t *testing.T, db *sqlx.DB, query string) string {
	t.Helper()
	rows, err := db.Queryx(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		vals, err := rows.SliceScan()
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if bs, ok := v.([]byte); ok {
				v = fmt.Sprintf("x%x", bs)
			}
			fmt.Fprintf(&b, "%v|", v)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func TestEqualityChecksMigrationKeepsRowsAndConstraints(t *testing.T) {
	ctx := context.Background()
	path, old := openAt(t, 3)
	fillCustody(t, old)
	queries := []string{
		// The columns receipts had at version 3 (0005 adds the chain's).
		`SELECT id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
			handler_version, source, received_at, processed_at FROM receipts ORDER BY id`,
		`SELECT * FROM delivery_attempts ORDER BY id`,
		`SELECT * FROM replays ORDER BY id`,
	}
	before := dumps(t, old, queries)
	old.Close()

	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keptRows(t, db.Write, queries, before)
	var fk int
	db.Write.Get(&fk, `PRAGMA foreign_keys`)
	if fk != 1 {
		t.Fatalf("foreign_keys=%d after migrating, want 1", fk)
	}

	// The same values pass and fail the rewritten checks.
	for _, bad := range []string{
		`INSERT INTO receipts (provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
			VALUES ('p', 'e1', X'00', 'done', 'v', 'webhook', 0, 0)`,
		`INSERT INTO receipts (provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
			VALUES ('p', 'e2', X'00', 'applied', 'v', 'email', 0, 0)`,
		`INSERT INTO delivery_attempts (provider, event_id, received_at, body_sha256, outcome, status_code)
			VALUES ('stripe', 'evt_1', 0, X'00', 'retried', 200)`,
		// The foreign key still points at receipts.
		`INSERT INTO delivery_attempts (provider, event_id, received_at, body_sha256, outcome, status_code)
			VALUES ('stripe', 'evt_missing', 0, X'00', 'duplicate', 200)`,
	} {
		if _, err := db.Write.Exec(bad); err == nil {
			t.Errorf("accepted: %s", bad)
		}
	}
	db.Write.MustExec(`INSERT INTO delivery_attempts (provider, event_id, received_at, body_sha256, outcome, status_code)
		VALUES ('stripe', 'evt_1', 4000, X'01', 'duplicate', 200)`)

	// No INSERT on the hot path builds a temporary table for its checks.
	for _, table := range []string{"receipts", "delivery_attempts"} {
		var cols []string
		if err := db.Write.Select(&cols, `SELECT name FROM pragma_table_info(?) WHERE name != 'id'`, table); err != nil {
			t.Fatal(err)
		}
		insert := "INSERT INTO " + table + " (" + strings.Join(cols, ", ") + ") VALUES (" +
			strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
		rows, err := db.Write.Queryx("EXPLAIN "+insert, make([]any, len(cols))...)
		if err != nil {
			t.Fatal(err)
		}
		var ops []string
		for rows.Next() {
			vals, err := rows.SliceScan()
			if err != nil {
				t.Fatal(err)
			}
			ops = append(ops, fmt.Sprint(vals[1]))
		}
		rows.Close()
		if len(ops) == 0 {
			t.Fatalf("EXPLAIN %s: no program", insert)
		}
		for _, op := range ops {
			if op == "OpenEphemeral" {
				t.Errorf("INSERT INTO %s opens an ephemeral table", table)
			}
		}
	}

	// Deleting a receipt still cascades to its attempts and replays.
	db.Write.MustExec(`DELETE FROM receipts WHERE id = 7`)
	var attempts, replays, others int
	for q, dst := range map[string]*int{
		`SELECT COUNT(*) FROM delivery_attempts WHERE event_id = 'evt_1'`: &attempts,
		`SELECT COUNT(*) FROM replays`:                                    &replays,
		`SELECT COUNT(*) FROM delivery_attempts WHERE event_id = 'd-2'`:   &others,
	} {
		if err := db.Write.Get(dst, q); err != nil {
			t.Fatal(err)
		}
	}
	if others != 1 {
		t.Errorf("the other receipt's attempts: %d, want 1 (the cascade must stay with its receipt)", others)
	}
	if attempts != 0 || replays != 0 {
		t.Errorf("after deleting the receipt: %d attempts, %d replays remain, want 0 and 0", attempts, replays)
	}
}

func TestMigrationRefusesForeignKeyViolations(t *testing.T) {
	path, old := openAt(t, 3)
	fillCustody(t, old)
	// Written with foreign keys off, as a damaged database might hold it.
	old.MustExec(`INSERT INTO delivery_attempts (provider, event_id, received_at, body_sha256, outcome, status_code)
		VALUES ('stripe', 'evt_gone', 0, X'00', 'inserted', 200)`)
	old.Close()

	_, err := Open(context.Background(), path, Options{})
	if err == nil || !strings.Contains(err.Error(), "foreign_key_check") || !strings.Contains(err.Error(), "delivery_attempts") {
		t.Fatalf("Open: %v, want a foreign_key_check error naming delivery_attempts", err)
	}
	// Nothing of the failed migration is left: the database is still at version 3.
	db, err := sqlx.Open("sqlite", dsn(path, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version, tables int
	if err := db.Get(&version, `SELECT MAX(version) FROM schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if err := db.Get(&tables, `SELECT COUNT(*) FROM sqlite_schema WHERE name LIKE '%_new'`); err != nil {
		t.Fatal(err)
	}
	if version != 3 || tables != 0 {
		t.Errorf("after the refused migration: version %d, %d leftover tables; want 3 and 0", version, tables)
	}
}
