package upgrade_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the fixture loads over plain database/sql

	"github.com/hookledger/hookledger/internal/testenv"
)

// A database written by the previous release (before wide quantities:
// testdata/previous-release, made by its make.sh with hookledger at 064ad75)
// is migrated by this one, keeps every row and every hash, verifies, and
// then takes a 10 TB gauge event and a month of 10^16 requests, which it
// invoices and prices exactly and verifies again. On both backends.
func TestPreviousReleaseMigratesAndVerifies(t *testing.T) {
	bin := testenv.Binary(t)
	fixtures, err := filepath.Abs("testdata/previous-release")
	if err != nil {
		t.Fatal(err)
	}
	yml, err := os.ReadFile(filepath.Join(fixtures, "hookledger.yml"))
	if err != nil {
		t.Fatal(err)
	}
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		dir := t.TempDir()
		// The configuration's relative data directory is beside it: a copy
		// here keeps every run's files out of the checkout.
		config := filepath.Join(dir, "hookledger.yml")
		if err := os.WriteFile(config, yml, 0o600); err != nil {
			t.Fatal(err)
		}
		var db *sql.DB
		var env []string
		switch backend {
		case "sqlite":
			db = loadFixture(t, "sqlite", filepath.Join(dir, "hookledger.db"), filepath.Join(fixtures, "sqlite.sql"))
			env = []string{"HOOKLEDGER_DATA=" + dir}
		case "postgres":
			dsn := testenv.PostgresDatabase(t)
			db = loadFixture(t, "pgx", dsn, filepath.Join(fixtures, "postgres.sql"))
			env = []string{"HOOKLEDGER_DATABASE=" + dsn}
		}
		env = append(env, "HOOKLEDGER_CONFIG="+config)
		run := func(args ...string) string {
			t.Helper()
			out, err := testenv.Run(bin, dir, env, args...)
			if err != nil {
				t.Fatalf("hookledger %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			return out
		}
		// Everything the old release stored that a hash or digest commits to.
		kept := []string{
			`SELECT id, kind, provider, event_id, customer_id, meter, quantity, occurred_at, recorded_at, prev_hash, row_hash FROM metered_usage ORDER BY id`,
			`SELECT id, provider, event_id, body_sha256, prev_hash, row_hash FROM receipts ORDER BY id`,
			`SELECT id, customer_id, period, digest, price_digest, total FROM invoices ORDER BY id`,
			`SELECT invoice_id, line_no, quantity, digest, billed_before, amount_precise, amount FROM invoice_lines ORDER BY invoice_id, line_no`,
			`SELECT ledger_id, ledger_hash, receipt_id, receipt_hash FROM chain_head`,
		}
		before := make([]string, len(kept))
		for i, q := range kept {
			before[i] = dumpRows(t, db, q)
		}
		if !strings.Contains(before[0], "9223372036854775807") || !strings.Contains(before[3], "9223372036854775807") {
			t.Fatalf("the fixture lacks its row and line at the largest ordinary quantity:\n%s\n%s", before[0], before[3])
		}

		// Unmigrated, a read says what to do (read commands never migrate).
		if out, err := testenv.Run(bin, dir, env, "usage"); err == nil || !strings.Contains(out, "predates wide quantities: run hookledger migrate") {
			t.Errorf("usage before the migration: %v\n%s", err, out)
		}
		run("migrate")
		for i, q := range kept {
			if got := dumpRows(t, db, q); got != before[i] {
				t.Errorf("the migration changed %s:\nbefore %s\nafter  %s", q, before[i], got)
			}
		}
		// 0015: each usage row names the receipt of its event, in order;
		// an adjustment none.
		if got := dumpRows(t, db, `SELECT u.kind, COUNT(*), SUM(CASE WHEN u.receipt_id = (SELECT r.id FROM receipts r
			WHERE r.provider = u.provider AND r.event_id = u.event_id) THEN 1 ELSE 0 END), SUM(CASE WHEN u.receipt_id IS NULL THEN 1 ELSE 0 END)
			FROM metered_usage u GROUP BY u.kind ORDER BY u.kind`); got != "[adjustment 1 0 1]\n[usage 8 8 0]\n" {
			t.Errorf("receipt_id after 0015 (kind, rows, naming their receipt, none): %s", got)
		}
		if got := dumpRows(t, db, `SELECT DISTINCT decimals FROM metered_usage`); got != "[6]\n" {
			t.Errorf("old rows' decimals: %s", got)
		}
		if got := dumpRows(t, db, `SELECT DISTINCT quantity_wide FROM invoice_lines`); got != "[]\n" {
			t.Errorf("old lines' quantity_wide: %q", got)
		}
		// 0022: every old line bills a meter as a whole (no dimension value).
		if got := dumpRows(t, db, `SELECT COUNT(*), SUM(CASE WHEN dimensions = '' THEN 1 ELSE 0 END) FROM invoice_lines`); got != "[7 7]\n" {
			t.Errorf("old lines' dimensions after 0022 (lines, without a value): %s", got)
		}
		// 0023 and 0024: the Stripe invoice states and the spend tables exist,
		// empty, and take rows on the upgraded ledger.
		if got := dumpRows(t, db, `SELECT (SELECT COUNT(*) FROM stripe_invoice_states), (SELECT COUNT(*) FROM spend_overrides),
			(SELECT COUNT(*) FROM spend_crossings)`); got != "[0 0 0]\n" {
			t.Errorf("Stripe invoice states, spend overrides and crossings after 0023 and 0024: %s", got)
		}
		// 0026: every close the old release made is sealed, in close id order,
		// with the invoices it holds (verify below checks the seals' hashes).
		if got := dumpRows(t, db, `SELECT c.id, s.invoices, (SELECT COUNT(*) FROM invoices i WHERE i.close_id = c.id)
			FROM period_closes c LEFT JOIN close_seals s ON s.close_id = c.id ORDER BY c.id`); got == "" || strings.Contains(got, "<nil>") {
			t.Errorf("close seals after 0026 (close, sealed invoices, invoices): %q", got)
		} else {
			for _, r := range strings.Split(strings.TrimSpace(got), "\n") {
				if f := strings.Fields(strings.Trim(r, "[]")); len(f) != 3 || f[1] != f[2] {
					t.Errorf("close seals after 0026 (close, sealed invoices, invoices): %s", got)
				}
			}
		}
		// 0029–0034: the credit ledger, credit crossings and close
		// exclusions exist, empty; every old invoice is one part, every old
		// line bills its whole period, and the invoices kept their rows
		// through 0031's rebuild (compared whole above).
		if got := dumpRows(t, db, `SELECT (SELECT COUNT(*) FROM credit_entries), (SELECT COUNT(*) FROM credit_crossings),
			(SELECT COUNT(*) FROM close_exclusions), (SELECT COUNT(*) FROM invoices WHERE parts <> ''),
			(SELECT COUNT(*) FROM invoice_lines WHERE part_start <> 0 OR part_end <> 0)`); got != "[0 0 0 0 0]\n" {
			t.Errorf("credits, crossings, exclusions, split invoices and lines after 0029–0034: %s", got)
		}
		// 0031: an invoice is unique per customer, period and currency: a
		// copy of an old invoice in another currency is taken, one in its own
		// currency refused (in a transaction rolled back).
		copyOf := func(currency string) string {
			return `INSERT INTO invoices (id, close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at, digest, currency)
				SELECT (SELECT MAX(id) + 1 FROM invoices), close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at, digest, ` +
				currency + ` FROM invoices WHERE id = (SELECT MIN(id) FROM invoices)`
		}
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(copyOf("'XTS'")); err != nil {
			t.Errorf("an old invoice's copy in another currency after 0031: %v", err)
		}
		if _, err := tx.Exec(copyOf("currency")); err == nil {
			t.Error("an old invoice's copy in its own currency was taken after 0031")
		}
		tx.Rollback()
		run("credits", "grant", "cus_2", "25.00", "--currency", "USD", "--id", "upgrade-1", "--reason", "after the upgrade")
		if got := dumpRows(t, db, `SELECT id, kind, grant_id, amount, balance FROM credit_entries`); got != "[1 grant upgrade-1 25.00 25.00]\n" {
			t.Errorf("a grant on the upgraded ledger: %s", got)
		}
		run("limits", "set", "cus_2", "--spend", "100.00", "--from", "2026-01-01")
		if got := dumpRows(t, db, `SELECT customer_id, limit_value, effective_from FROM spend_overrides`); got != "[cus_2 100.00 2026-01-01]\n" {
			t.Errorf("spend override on the upgraded ledger: %s", got)
		}
		verifyClean(t, run("verify", "--format", "json"))

		// The new release's wide quantities on the migrated ledger: August is
		// not closed yet, so a close of it bills them.
		_, _, url := testenv.StartServe(t, bin, dir, env, "--no-replication")
		for i, ev := range []struct{ customer, meter, quantity string }{
			{"cus_1", "storage_bytes", "10000000000000"},   // a 10 TB gauge, in bytes
			{"cus_2", "api_requests", "5000000000000000"},  // half of 10^16 requests
			{"cus_2", "api_requests", "5000000000000000"},  // and the other half
			{"cus_2", "storage_bytes", "12345678901234.5"}, // a wide row with a decimal
		} {
			run("send", "--url", url, "--id", fmt.Sprintf("evt_wide_%d", i), "--customer", ev.customer, "--meter", ev.meter,
				"--quantity", ev.quantity, "--occurred-at", "2026-08-10T10:00:00Z")
		}
		var usage []struct{ Customer, Meter, Quantity string }
		if err := json.Unmarshal([]byte(run("usage", "--from", "2026-08-01", "--to", "2026-09-01", "--format", "json")), &usage); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(usage); got != "[{cus_1 storage_bytes 10000000000000} {cus_2 api_requests 10000000000000000} {cus_2 storage_bytes 12345678901234.5}]" {
			t.Fatalf("usage: %s", got)
		}
		run("invoice", "close", "--period", "2026-08", "--all")
		var invs []struct {
			Customer, Total string
			Lines           []struct{ Meter, Quantity, Amount string }
		}
		if err := json.Unmarshal([]byte(run("invoice", "list", "--period", "2026-08", "--format", "json")), &invs); err != nil {
			t.Fatal(err)
		}
		// 10^13 bytes × 0.000000000023 = 230; 10^16 requests: 1,000 free, the
		// rest at 0.001 = 9,999,999,999,999; 12345678901234.5 bytes ×
		// 0.000000000023 = 283.9506147283935 → 283.95; each plus the 29.00 fee,
		// which cus_3, registered without usage, pays alone.
		if got := fmt.Sprint(invs); got != "[{cus_1 259.00 [{storage_bytes 10000000000000 230.00}]} "+
			"{cus_2 10000000000311.95 [{api_requests 10000000000000000 9999999999999.00} {storage_bytes 12345678901234.5 283.95}]} {cus_3 29.00 []}]" {
			t.Fatalf("August's invoices: %s", got)
		}
		if got := dumpRows(t, db, `SELECT quantity, decimals FROM metered_usage WHERE event_id LIKE 'evt_wide_%' ORDER BY id`); got !=
			"[10000000000000 0]\n[5000000000000000 0]\n[5000000000000000 0]\n[123456789012345 1]\n" {
			t.Errorf("wide rows stored as %s", got)
		}
		if got := dumpRows(t, db, `SELECT quantity, quantity_wide FROM invoice_lines WHERE period = '2026-08' ORDER BY invoice_id, line_no`); got !=
			"[0 10000000000000]\n[0 10000000000000000]\n[0 12345678901234.5]\n" {
			t.Errorf("wide lines stored as %s", got)
		}
		for i, q := range kept[1:3] { // receipts and invoices only grew
			if got := dumpRows(t, db, q); !strings.HasPrefix(got, before[i+1]) {
				t.Errorf("%s changed:\nbefore %s\nafter  %s", q, before[i+1], got)
			}
		}
		verifyClean(t, run("verify", "--format", "json"))

		// Corrections on the migrated ledger (0017 admits kind void and
		// source amend): the old release's evt_2 (cus_1, 0.25 requests in
		// September, invoiced) moves to cus_2, and evt_1 is voided.
		run("amend", "default", "evt_2", "--set", "data.customer=cus_2", "--reason", "wrong customer", "--actor", "upgrade-test")
		run("void", "default", "evt_1", "--reason", "test traffic", "--actor", "upgrade-test")
		if got := dumpRows(t, db, `SELECT kind, provider, event_id, customer_id, quantity, ref FROM metered_usage WHERE id > 10 AND event_id NOT LIKE 'evt_wide_%' ORDER BY id`); got !=
			"[void  void:default/evt_2 cus_1 -250000 row:3]\n[usage default evt_2~amend cus_2 250000 event:default/evt_2]\n[void  void:default/evt_1 cus_1 -1200000000 row:2]\n" {
			t.Errorf("corrections stored as %s", got)
		}
		if got := dumpRows(t, db, `SELECT source, status FROM receipts WHERE event_id = 'evt_2~amend'`); got != "[amend applied]\n" {
			t.Errorf("amended receipt: %s", got)
		}
		verifyClean(t, run("verify", "--format", "json"))
	})
}

// loadFixture creates the database at dsn from a dump and returns it open.
func loadFixture(t *testing.T, driver, dsn, dump string) *sql.DB {
	t.Helper()
	script, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.ExecContext(context.Background(), string(script)); err != nil {
		t.Fatalf("load %s: %v", dump, err)
	}
	return db
}

// dumpRows renders every row of query, one line each.
func dumpRows(t *testing.T, db *sql.DB, query string) string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var b strings.Builder
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		for i, v := range vals {
			switch x := v.(type) {
			case []byte:
				vals[i] = fmt.Sprintf("%x", x)
			case bool: // PostgreSQL's booleans are SQLite's 0 and 1
				vals[i] = map[bool]int{true: 1}[x]
			}
		}
		fmt.Fprintln(&b, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// verifyClean fails t unless verify's JSON report has no problem.
func verifyClean(t *testing.T, out string) {
	t.Helper()
	var rep struct {
		Checks []struct {
			Name     string
			Checked  int64
			Problems []json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Checks) == 0 {
		t.Fatalf("verify: %v\n%s", err, out)
	}
	for _, c := range rep.Checks {
		if len(c.Problems) > 0 {
			t.Errorf("verify: %s: %s", c.Name, c.Problems)
		}
	}
}
