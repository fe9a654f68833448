package ledger_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// tamper edits the database file through a separate connection, as someone
// with file access would: drop the guard trigger, change, restore it.
func tamper(t *testing.T, dir string, stmts ...string) {
	t.Helper()
	db, err := sqlx.Open("sqlite", "file:"+filepath.Join(dir, schema.FileName)+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func verified(t *testing.T, e *env) *ledger.VerifyReport {
	t.Helper()
	rep, err := ledger.Verify(e.ctx, e.db.Read)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func seedForVerify(t *testing.T) (*env, string) {
	dir := t.TempDir()
	e := newEnvAt(t, dir)
	e.setClock(ts("2026-10-20T00:00:00Z"))
	for i := 0; i < 5; i++ {
		e.write(row{customer: "c1", meter: "api", qty: q("2"), at: ts("2026-10-05T00:00:00Z").Add(time.Duration(i) * time.Hour)})
	}
	e.closePeriod(t, ledger.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")})
	return e, dir
}

func TestVerifyIntactDatabase(t *testing.T) {
	e, _ := seedForVerify(t)
	defer e.close()
	rep := verified(t, e)
	if p := rep.First(); p != nil {
		t.Fatalf("intact database: %v", p)
	}
	if len(rep.Checks) != 4 || rep.Checks[1].Checked != 5 || rep.Checks[2].Checked != 5 || rep.Checks[3].Checked != 1 {
		t.Fatalf("checks: %+v", rep.Checks)
	}
}

func TestVerifyReportsChangedQuantity(t *testing.T) {
	e, dir := seedForVerify(t)
	defer e.close()
	tamper(t, dir,
		`DROP TRIGGER metered_usage_no_update`,
		`UPDATE metered_usage SET quantity = 1000000 WHERE id = 3`,
	)
	rep := verified(t, e)
	p := rep.First()
	if p == nil || p.Table != "metered_usage" || p.ID != 3 || !strings.Contains(p.Msg, "row_hash does not match") {
		t.Fatalf("first problem: %+v", p)
	}
	if !strings.Contains(p.Error(), "metered_usage row 3") {
		t.Fatalf("message %q does not name the row", p.Error())
	}
	chain := rep.Checks[1]
	if len(chain.Problems) != 1 {
		t.Fatalf("one edit is reported once, got %+v", chain.Problems)
	}
	inv := rep.Checks[3]
	if len(inv.Problems) != 1 || !strings.Contains(inv.Problems[0].Msg, "digest of the covered rows differs") {
		t.Fatalf("invoice check: %+v", inv.Problems)
	}
}

func TestVerifyReportsDeletedAndRechainedRows(t *testing.T) {
	e, dir := seedForVerify(t)
	defer e.close()
	tamper(t, dir, `DROP TRIGGER metered_usage_no_delete`, `DELETE FROM metered_usage WHERE id = 2`)
	p := verified(t, e).First()
	if p == nil || p.ID != 3 || !strings.Contains(p.Msg, "ids jump from 1 to 3") {
		t.Fatalf("deleted row: %+v", p)
	}
}

func TestVerifyReportsReceiptMismatches(t *testing.T) {
	e, dir := seedForVerify(t)
	defer e.close()
	tamper(t, dir,
		`INSERT INTO receipts (provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
		 VALUES ('test', 'ghost', x'00', 'applied', 'x', 'webhook', 0, 0)`,
		`UPDATE receipts SET status = 'failed' WHERE event_id = 'evt_000004'`,
	)
	rep := verified(t, e)
	c := rep.Checks[2]
	if len(c.Problems) != 2 {
		t.Fatalf("receipts check: %+v", c.Problems)
	}
	if c.Problems[0].Table != "receipts" || !strings.Contains(c.Problems[0].Msg, "test/ghost has no usage rows") {
		t.Fatalf("orphan receipt: %+v", c.Problems[0])
	}
	if c.Problems[1].Table != "metered_usage" || c.Problems[1].ID != 4 {
		t.Fatalf("orphan usage row: %+v", c.Problems[1])
	}
}

// Receipts deleted by retention.keys leave their usage rows behind on
// purpose; only rows the recorded prune covered are excused.
func TestVerifyAcceptsReceiptsDeletedByRetention(t *testing.T) {
	e, dir := seedForVerify(t)
	defer e.close()
	tamper(t, dir,
		`DELETE FROM receipts WHERE event_id IN ('evt_000001', 'evt_000002')`,
		`INSERT INTO prune_runs (pruned_at, bodies_pruned, keys_deleted, ledger_head_id) VALUES (0, 0, 2, 2)`,
	)
	if rep := verified(t, e); len(rep.Checks[2].Problems) != 0 {
		t.Fatalf("rows covered by a keys prune reported: %+v", rep.Checks[2].Problems)
	}
	tamper(t, dir, `DELETE FROM receipts WHERE event_id = 'evt_000004'`)
	c := verified(t, e).Checks[2]
	if len(c.Problems) != 1 || c.Problems[0].ID != 4 {
		t.Fatalf("a row above the prune's ledger head must still be reported: %+v", c.Problems)
	}
}

func TestVerifyReportsEditedInvoice(t *testing.T) {
	e, dir := seedForVerify(t)
	defer e.close()
	tamper(t, dir, `DROP TRIGGER invoice_lines_no_update`, `UPDATE invoice_lines SET quantity = 1 WHERE invoice_id = 1`)
	rep := verified(t, e)
	p := rep.First()
	if p == nil || p.Table != "invoices" || p.ID != 1 || !strings.Contains(p.Msg, "stored digest does not match") {
		t.Fatalf("edited invoice: %+v", p)
	}
	if probs := rep.Checks[3].Problems; len(probs) != 2 || !strings.Contains(probs[1].Msg, "quantity recomputes to 10") {
		t.Fatalf("invoice problems: %+v", probs)
	}
}
