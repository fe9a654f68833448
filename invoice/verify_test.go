package invoice_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"

	"github.com/jmoiron/sqlx"
	_ "modernc.org/sqlite"

	"github.com/hookledger/hookledger/chainhash"
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

func verified(t *testing.T, e *env) *invoice.VerifyReport {
	t.Helper()
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func seedForVerify(t *testing.T) (*env, string) {
	dir := t.TempDir()
	e := newEnvAt(t, dir)
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	for i := 0; i < 5; i++ {
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("2"), At: ts("2026-10-05T00:00:00Z").Add(time.Duration(i) * time.Hour)})
	}
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")})
	return e, dir
}

func TestVerifyIntactDatabase(t *testing.T) {
	e, _ := seedForVerify(t)
	defer e.Close()
	rep := verified(t, e)
	if p := rep.First(); p != nil {
		t.Fatalf("intact database: %v", p)
	}
	if len(rep.Checks) != 16 || rep.Checks[1].Checked != 5 || rep.Checks[2].Checked != 5 || rep.Checks[3].Checked != 1 || rep.Checks[11].Checked != 1 || rep.Checks[14].Checked != 1 {
		t.Fatalf("checks: %+v", rep.Checks)
	}
}

func TestVerifyReportsChangedQuantity(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedForVerify(t)
	defer e.Close()
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

// The quantity columns rewritten to spell the same value (2 units as 2 with 0
// decimals instead of 2000000 with 6), or a wide row's decimals changed:
// verify reports the row, as it reports any edit.
func TestVerifyReportsChangedDecimals(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	for _, edit := range []string{
		`UPDATE metered_usage SET quantity = 2, decimals = 0 WHERE id = 3`,
		`UPDATE metered_usage SET decimals = 1 WHERE id = 6`,
	} {
		e, dir := seedForVerify(t)
		e.SetClock(ts("2026-11-20T00:00:00Z"))
		e.Write(row{Customer: "c1", Meter: "api", Qty: q("1e15"), At: ts("2026-11-05T00:00:00Z")}) // id 6, 0 decimals
		if p := verified(t, e).First(); p != nil {
			t.Fatalf("before the edit: %v", p)
		}
		tamper(t, dir, `DROP TRIGGER metered_usage_no_update`, edit)
		rep := verified(t, e)
		p := rep.First()
		if p == nil || p.Table != "metered_usage" || !strings.Contains(p.Msg, "row_hash does not match") || len(rep.Checks[1].Problems) != 1 {
			t.Errorf("%s: first problem %+v, chain problems %+v", edit, p, rep.Checks[1].Problems)
		}
		e.Close()
	}
}

func TestVerifyReportsDeletedAndRechainedRows(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedForVerify(t)
	defer e.Close()
	tamper(t, dir, `DROP TRIGGER metered_usage_no_delete`, `DELETE FROM metered_usage WHERE id = 2`)
	p := verified(t, e).First()
	if p == nil || p.ID != 3 || !strings.Contains(p.Msg, "ids jump from 1 to 3") {
		t.Fatalf("deleted row: %+v", p)
	}
}

func TestVerifyReportsReceiptMismatches(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedForVerify(t)
	defer e.Close()
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

// A usage row names its receipt by id (migration 0015) outside its hash:
// verify checks that the receipt it names is of its own event, so a
// receipt_id moved to another receipt (whose meter it could then no longer
// be charged for twice) is reported.
func TestVerifyReportsUsageRowNamingAnotherReceipt(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedForVerify(t)
	defer e.Close()
	tamper(t, dir,
		`INSERT INTO receipts (id, provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
		 VALUES (100, 'test', 'ghost', x'00', 'applied', 'x', 'webhook', 0, 0)`,
		`DROP TRIGGER metered_usage_no_update`,
		`UPDATE metered_usage SET receipt_id = 100 WHERE id = 3`)
	c := verified(t, e).Checks[2]
	if len(c.Problems) != 2 || c.Problems[0].Table != "receipts" || c.Problems[1].Table != "metered_usage" || c.Problems[1].ID != 3 {
		t.Fatalf("receipts check: %+v, want receipt 3 without usage and row 3 without its receipt", c.Problems)
	}
}

// Receipts deleted by retention.keys leave their usage rows behind on
// purpose; only rows the recorded prune covered are excused.
func TestVerifyAcceptsReceiptsDeletedByRetention(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedForVerify(t)
	defer e.Close()
	tamper(t, dir,
		`DELETE FROM receipts WHERE event_id IN ('evt_000001', 'evt_000002')`,
		`INSERT INTO prune_runs (pruned_at, bodies_pruned, keys_deleted, ledger_head_id) VALUES (0, 0, 2, 2)`,
		`UPDATE chain_head SET receipts_pruned_through = (SELECT MAX(receipt_id) FROM metered_usage WHERE id <= 2)`,
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
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedForVerify(t)
	defer e.Close()
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

// forgeInvoice stores inv as a close would have, with digests that match its
// fields and the rows its lines name (what an older version wrote, or what
// someone with file access and this package's digest code can write).
func forgeInvoice(t *testing.T, e *env, dir string, inv invoice.Invoice) {
	t.Helper()
	stmts := []string{fmt.Sprintf(`INSERT INTO period_closes (id, customer_id, period, tz, period_start, period_end, grace_ms, cutoff, ledger_head, closed_at)
		VALUES (%d, '', %q, %q, %d, %d, 0, %d, %d, %d)`, inv.CloseID, inv.Period, inv.TZ, inv.PeriodStart, inv.PeriodEnd, inv.Cutoff, inv.LedgerHead, inv.ClosedAt)}
	for i := range inv.Lines {
		l := &inv.Lines[i]
		chk, err := invoice.CheckLine(e.Ctx, e.DB, *l)
		if err != nil {
			t.Fatal(err)
		}
		l.Digest = chk.Digest
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO invoice_lines (invoice_id, line_no, customer_id, meter, aggregation, property, unit, late, period, tz,
			period_start, period_end, after_id, through_id, quantity, row_count, adjustments, max_id, digest)
			VALUES (%d, %d, %q, %q, %q, %q, %q, %d, %q, %q, %d, %d, %d, %d, %d, %d, %d, %d, x'%x')`,
			l.InvoiceID, l.LineNo, l.Customer, l.Meter, l.Aggregation, l.Property, l.Unit, map[bool]int{true: 1}[l.Late], l.Period, l.TZ,
			l.PeriodStart, l.PeriodEnd, l.AfterID, l.ThroughID, l.Quantity.Micro().Int64(), l.Rows, l.Adjustments, l.MaxID, l.Digest))
	}
	stmts = append(stmts, fmt.Sprintf(`INSERT INTO invoices (id, close_id, customer_id, period, tz, period_start, period_end, cutoff, ledger_head, closed_at, digest)
		VALUES (%d, %d, %q, %q, %q, %d, %d, %d, %d, %d, x'%x')`, inv.ID, inv.CloseID, inv.Customer, inv.Period, inv.TZ, inv.PeriodStart, inv.PeriodEnd,
		inv.Cutoff, inv.LedgerHead, inv.ClosedAt, invoice.InvoiceDigest(&inv)))
	// Lines reference their invoice: insert it first.
	stmts[1], stmts[len(stmts)-1] = stmts[len(stmts)-1], stmts[1]
	// The close's seal, chained to the last one, as a close writes it.
	_, prev, err := e.DB.LastCloseSeal(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	seal := chainhash.CloseSeal{CloseID: inv.CloseID, Period: inv.Period, TZ: inv.TZ, PeriodStart: inv.PeriodStart, PeriodEnd: inv.PeriodEnd,
		Cutoff: inv.Cutoff, LedgerHead: inv.LedgerHead, ClosedAt: inv.ClosedAt, Invoices: 1,
		InvoicesDigest: chainhash.InvoicesDigest([]chainhash.SealedInvoice{{ID: inv.ID, Digest: invoice.InvoiceDigest(&inv)}}), PrevHash: prev}
	seal.RowHash = seal.Hash(prev)
	stmts = append(stmts, fmt.Sprintf(`INSERT INTO close_seals (close_id, invoices, invoices_digest, prev_hash, row_hash) VALUES (%d, 1, x'%x', x'%x', x'%x')`,
		seal.CloseID, seal.InvoicesDigest, seal.PrevHash, seal.RowHash))
	tamper(t, dir, stmts...)
}

// Two usage rows of 5,000,000,000,000 for one customer and meter, frozen as
// -8446744073709.551616 by a close that added int64 micro-units unchecked.
// Recomputing the same way agreed with it, so verify passed; the exact total
// is billed now, and verify names it.
func TestVerifyReportsAWrappedInvoiceQuantity(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	dir := t.TempDir()
	e := newEnvAt(t, dir)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	five := q("5000000000000")
	e.Write(row{Customer: "c", Meter: "api", Qty: five, At: october}, row{Customer: "c", Meter: "api", Qty: five, At: october})
	oct := month(t, "2026-10", "UTC")
	start, end := oct.Start.UnixMilli(), oct.End.UnixMilli()
	forgeInvoice(t, e, dir, invoice.Invoice{ID: 1, CloseID: 1, Customer: "c", Period: "2026-10", TZ: "UTC", PeriodStart: start, PeriodEnd: end,
		Cutoff: ts("2026-11-02T00:00:00Z").UnixMilli(), LedgerHead: 2, ClosedAt: ts("2026-11-02T00:00:00Z").UnixMilli(),
		Lines: []invoice.InvoiceLine{{InvoiceID: 1, LineNo: 1, Customer: "c", Meter: "api", Aggregation: ledger.AggSum, Period: "2026-10", TZ: "UTC",
			PeriodStart: start, PeriodEnd: end, ThroughID: 2, Quantity: q("-8446744073709.551616"), Rows: 2, MaxID: 2}}})

	rep := verified(t, e)
	probs := rep.Checks[3].Problems
	want := "line 1 (api 2026-10): quantity recomputes to 10000000000000, invoice says -8446744073709.551616"
	if len(probs) != 1 || probs[0].Table != "invoices" || probs[0].ID != 1 || probs[0].Msg != want {
		t.Fatalf("invoice problems: %+v\nwant one: %s", probs, want)
	}
	if p := rep.First(); p == nil || p.Check != "invoices" {
		t.Fatalf("first problem: %+v (the ledger itself is intact)", p)
	}
	// dispute reads the same check: the line does not match, and says why.
	inv, err := invoice.GetInvoice(e.Ctx, e.DB, 1)
	if err != nil {
		t.Fatal(err)
	}
	chk, err := invoice.CheckLine(e.Ctx, e.DB, inv.Lines[0])
	if err != nil || chk.Problem != strings.TrimPrefix(want, "line 1 (api 2026-10): ") || !chk.Quantity.Equal(q("10000000000000")) || chk.UsageRows != 2 {
		t.Fatalf("CheckLine: %v %+v", err, chk)
	}
}

// Lines edited consistently (numbers, digests and the invoice digest all
// recomputed) so that they no longer cover every row of the period: each
// line still matches the rows it names, but the invoice leaves rows off.
func TestVerifyReportsInvoiceLinesThatLeaveRowsOff(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	oct := month(t, "2026-10", "UTC")
	start, end := oct.Start.UnixMilli(), oct.End.UnixMilli()
	line := func(no int64, meter string, after, through int64, qty string, rows, maxID int64) invoice.InvoiceLine {
		return invoice.InvoiceLine{InvoiceID: 1, LineNo: no, Customer: "c", Meter: meter, Aggregation: ledger.AggSum, Period: "2026-10", TZ: "UTC",
			PeriodStart: start, PeriodEnd: end, AfterID: after, ThroughID: through, Quantity: q(qty), Rows: rows, MaxID: maxID}
	}
	for _, c := range []struct {
		name  string
		head  int64
		lines []invoice.InvoiceLine
		want  []string
	}{
		{"an intact invoice", 3, []invoice.InvoiceLine{line(1, "api", 0, 3, "3", 2, 3), line(2, "gpu", 0, 3, "5", 1, 2)}, nil},
		{"a line cut short of the head", 3, []invoice.InvoiceLine{line(1, "api", 0, 1, "1", 1, 1), line(2, "gpu", 0, 3, "5", 1, 2)},
			[]string{"line 1 covers rows up to id 1, the invoice's ledger head is 3"}},
		{"a line starting late", 3, []invoice.InvoiceLine{line(1, "api", 1, 3, "2", 1, 3), line(2, "gpu", 0, 3, "5", 1, 2)},
			[]string{"line 1 covers 2026-10 after id 1, not all of the invoice's period 2026-10"}},
		{"a meter's line removed", 3, []invoice.InvoiceLine{line(1, "api", 0, 3, "3", 2, 3)},
			[]string{`meter "gpu" has rows in 2026-10 up to id 3 but no line: they were left off the invoice`}},
		{"a meter billed twice", 3, []invoice.InvoiceLine{line(1, "api", 0, 3, "3", 2, 3), line(2, "api", 0, 3, "3", 2, 3), line(3, "gpu", 0, 3, "5", 1, 2)},
			[]string{`line 2 bills meter "api" for 2026-10 a second time`, "line 2 (api 2026-10) bills ledger ids 1 to 3 again: invoice 1 line 1 billed them"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			e := newEnvAt(t, dir)
			defer e.Close()
			e.SetClock(ts("2026-10-20T00:00:00Z"))
			e.Write(row{Customer: "c", Meter: "api", Qty: q("1"), At: october}, row{Customer: "c", Meter: "gpu", Qty: q("5"), At: october},
				row{Customer: "c", Meter: "api", Qty: q("2"), At: october})
			forgeInvoice(t, e, dir, invoice.Invoice{ID: 1, CloseID: 1, Customer: "c", Period: "2026-10", TZ: "UTC", PeriodStart: start, PeriodEnd: end,
				Cutoff: ts("2026-11-02T00:00:00Z").UnixMilli(), LedgerHead: c.head, ClosedAt: ts("2026-11-02T00:00:00Z").UnixMilli(), Lines: c.lines})
			var got []string
			for _, p := range verified(t, e).Checks[3].Problems {
				got = append(got, p.Msg)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("invoice problems:\n%q\nwant\n%q", got, c.want)
			}
		})
	}
}
