package dispute

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// seedLine builds the scenario: invoice 1 line 1 (cus_1, October)
// is built from 3 events, one of them delivered 3 times; cus_2 has an event
// of its own that must stay out of cus_1's line.
func seedLine(t *testing.T) *env {
	e := newEnv(t)
	e.lag = 1500 * time.Millisecond
	e.send("default", "evt_a", "cus_1", "3", "2026-10-20T10:00:00Z")
	e.Clock.Add(time.Minute)
	b := body("default", "evt_b", "cus_1", "api_requests", "2", "2026-10-20T11:00:00Z")
	for range 3 { // the sender retried twice: each retry is signed afresh
		if code := e.deliver("default", "evt_b", b); code != 200 {
			t.Fatalf("evt_b: %d", code)
		}
		e.Clock.Add(5 * time.Minute)
	}
	e.send("default", "evt_c", "cus_1", "5.5", "2026-10-21T09:30:00Z")
	e.send("default", "evt_d", "cus_2", "1", "2026-10-21T09:45:00Z")
	e.Clock.Set(time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC))
	res := e.close("2026-10")
	if len(res.Invoices) != 2 || res.Invoices[0].Customer != "cus_1" {
		t.Fatalf("close: %+v", res.Invoices)
	}
	return e
}

var remoteAddr = regexp.MustCompile(`"remote_addr": "127\.0\.0\.1:\d+"`)

// golden compares got with testdata/name, or rewrites it under -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./dispute -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(-update rewrites it if the change is intended)", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s differs in length: got %d lines, want %d", path, len(gl), len(wl))
	}
}

func TestLineTraceGolden(t *testing.T) {
	e := seedLine(t)
	tr := e.trace("invoice:1/1")

	if len(tr.Invoices) != 1 || len(tr.Invoices[0].Lines) != 1 {
		t.Fatalf("invoices: %+v", tr.Invoices)
	}
	inv, l := tr.Invoices[0], tr.Invoices[0].Lines[0]
	if !inv.DigestOK || inv.Digest != inv.DigestRecomputed || !l.OK || l.Digest != l.Recomputed.Digest {
		t.Errorf("digests do not recompute: invoice %v line %+v", inv.DigestOK, l)
	}
	if l.Quantity.String() != "10.5" || !l.Recomputed.Quantity.Equal(l.Quantity) || l.Rows != 3 {
		t.Errorf("line quantity %s (recomputed %s), rows %d; want 10.5 over 3 rows", l.Quantity, l.Recomputed.Quantity, l.Rows)
	}
	if len(tr.Rows) != 3 || !slices.Equal(l.RowIDs, []int64{1, 2, 3}) {
		t.Fatalf("rows: %+v, line row ids %v", tr.Rows, l.RowIDs)
	}
	var sum ledger.Total
	for _, r := range tr.Rows {
		sum = sum.Plus(r.Quantity)
		if r.Customer != "cus_1" || r.Chain != "ok" || !slices.Equal(r.BilledBy, []string{"invoice:1/1"}) {
			t.Errorf("row %+v", r)
		}
	}
	if !sum.Equal(l.Quantity) {
		t.Errorf("rows sum to %s, line says %s", sum, l.Quantity)
	}
	attempts := 0
	for _, ev := range tr.Events {
		if ev.Verification.Status != Valid {
			t.Errorf("%s: %+v", ev.EventID, ev.Verification)
		}
		for _, a := range ev.Attempts {
			attempts++
			if a.Signature.Status != Valid || a.SignatureAgeMS == nil || *a.SignatureAgeMS < 1000 {
				t.Errorf("%s attempt %d: %+v", ev.EventID, a.ID, a)
			}
		}
	}
	if len(tr.Events) != 3 || attempts != 5 {
		t.Fatalf("%d events, %d attempts; want 3 and 5", len(tr.Events), attempts)
	}
	if b := tr.Events[1]; b.EventID != "evt_b" || len(b.Attempts) != 3 || b.Attempts[0].Outcome != "inserted" ||
		b.Attempts[1].Outcome != "duplicate" || b.Attempts[2].Outcome != "duplicate" {
		t.Errorf("evt_b attempts: %+v", b.Attempts)
	}
	s := tr.Summary
	want := Summary{UsageRows: 3, Events: 3, Attempts: 5, Duplicates: 2, Bodies: Counts{Valid: 3}, Signatures: Counts{Valid: 5},
		ChainOK: true, InvoicesOK: true, Problems: []string{}}
	if !summaryEqual(s, want) {
		t.Errorf("summary %+v\nwant    %+v", s, want)
	}

	var out bytes.Buffer
	if err := WriteJSON(&out, tr); err != nil {
		t.Fatal(err)
	}
	golden(t, "invoice_line.golden.json", remoteAddr.ReplaceAll(out.Bytes(), []byte(`"remote_addr": "127.0.0.1:PORT"`)))

	// The whole invoice is the same here: it has one line.
	whole := e.trace("invoice:1")
	if whole.Kind != KindInvoice || len(whole.Rows) != 3 || whole.Summary.Attempts != 5 {
		t.Errorf("invoice:1: kind %s, %d rows, %d attempts", whole.Kind, len(whole.Rows), whole.Summary.Attempts)
	}
}

func summaryEqual(a, b Summary) bool {
	return slices.Equal(a.Problems, b.Problems) && a.UsageRows == b.UsageRows && a.Adjustments == b.Adjustments &&
		a.UnbilledRows == b.UnbilledRows && a.Events == b.Events && a.Attempts == b.Attempts && a.Duplicates == b.Duplicates &&
		a.PayloadMismatches == b.PayloadMismatches && a.Bodies == b.Bodies && a.Signatures == b.Signatures &&
		a.ChainOK == b.ChainOK && a.InvoicesOK == b.InvoicesOK
}

func TestRowAndEventTargets(t *testing.T) {
	e := seedLine(t)
	row := e.trace("row:2")
	if len(row.Rows) != 1 || row.Rows[0].EventID != "evt_b" || len(row.Events) != 1 || len(row.Events[0].Attempts) != 3 {
		t.Fatalf("row:2: %+v", row)
	}
	// The line billing the row is shown and checked, without all its rows.
	if len(row.Invoices) != 1 || len(row.Invoices[0].Lines) != 1 || !row.Invoices[0].Lines[0].OK || row.Invoices[0].Lines[0].RowIDs != nil {
		t.Errorf("row:2 invoices: %+v", row.Invoices)
	}
	for _, target := range []string{"default:evt_b", "event:default/evt_b"} {
		ev := e.trace(target)
		if ev.Target != "default:evt_b" || ev.Kind != KindEvent || len(ev.Rows) != 1 || ev.Rows[0].ID != 2 ||
			ev.Events[0].Receipt.Status != "applied" || ev.Summary.Duplicates != 2 {
			t.Errorf("%s: %+v", target, ev)
		}
	}
	// An adjustment naming the event belongs to its trace.
	adj := e.adjust(ledger.Adjustment{Customer: "cus_1", Meter: "api_requests", Quantity: ledger.TotalOf(-2 * ledger.Scale),
		Reason: "duplicate charge refunded", Ref: "event:default/evt_b"})
	ev := e.trace("default:evt_b")
	if len(ev.Rows) != 2 || ev.Rows[1].ID != adj.ID || ev.Rows[1].Kind != ledger.KindAdjustment || ev.Summary.Adjustments != 1 {
		t.Errorf("adjustment not in the event's trace: %+v", ev.Rows)
	}
	// It is late for the closed October, so nothing bills it yet.
	if len(ev.Rows[1].BilledBy) != 0 || ev.Summary.UnbilledRows != 1 {
		t.Errorf("late adjustment billed by %v, unbilled %d", ev.Rows[1].BilledBy, ev.Summary.UnbilledRows)
	}
}

func TestUnknownTargets(t *testing.T) {
	e := seedLine(t)
	tracer := e.tracer(nil)
	for _, c := range []struct {
		target string
		err    error
		msg    string
	}{
		{"invoice:99", ErrNotFound, "invoice:99: not found: there is no invoice 99"},
		{"invoice:1/7", ErrNotFound, "invoice 1 has no line 7 (it has 1)"},
		{"row:999", ErrNotFound, "no row 999"},
		{"default:evt_zzz", ErrNotFound, `no receipt and no ledger row for event "evt_zzz" of provider "default"`},
		{"nobody:evt_a", ErrNotFound, `provider "nobody"`},
		{"evt_a", ErrBadTarget, "PROVIDER:EVENT_ID"},
		{"invoice:one", ErrBadTarget, "invoice id"},
		{"invoice:1/x", ErrBadTarget, "line number"},
		{"row:-3", ErrBadTarget, "row id"},
		{"event:default", ErrBadTarget, "event:PROVIDER/EVENT_ID"},
		{"", ErrBadTarget, "want invoice:ID"},
	} {
		_, err := tracer.Trace(context.Background(), c.target)
		if !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v; want %v mentioning %q", c.target, err, c.err, c.msg)
		}
	}
}

func TestParseTargetRoundTrip(t *testing.T) {
	for in, want := range map[string]string{
		"invoice:12":         "invoice:12",
		"invoice:12/3":       "invoice:12/3",
		"row:7":              "row:7",
		"stripe:evt_1":       "stripe:evt_1",
		"acme:a:b:c":         "acme:a:b:c", // event ids may hold colons
		"event:row/ev1":      "event:row/ev1",
		"event:github/x/y/z": "github:x/y/z",
	} {
		tg, err := ParseTarget(in)
		if err != nil || tg.String() != want {
			t.Errorf("%q: %q, %v; want %q", in, tg.String(), err, want)
			continue
		}
		again, err := ParseTarget(tg.String())
		if err != nil || again != tg {
			t.Errorf("%q does not round-trip: %+v vs %+v (%v)", in, again, tg, err)
		}
	}
}

func TestCustomerPeriod(t *testing.T) {
	e := seedLine(t) // October closed at 2026-11-01T02:00Z
	// Usage of October arriving after the close is late, as is a correction.
	e.send("stripe", "evt_late", "cus_1", "4", "2026-10-31T23:59:00Z")
	adj := e.adjust(ledger.Adjustment{Customer: "cus_1", Meter: "api_requests", Quantity: ledger.TotalOf(-1 * ledger.Scale),
		Reason: "goodwill credit", Ref: "invoice:1"})
	// A November event is not October's.
	e.send("default", "evt_nov", "cus_1", "9", "2026-11-01T08:00:00Z")
	oct, _ := ledger.MonthPeriod("2026-10", time.UTC)
	tracer := e.tracer(nil)

	tr, err := tracer.Customer(context.Background(), "cus_1", oct)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(tr *Trace) (out []int64) {
		for _, r := range tr.Rows {
			out = append(out, r.ID)
		}
		return out
	}
	// rows 1-3 billed on invoice 1, 4 is cus_2's, 5 late, 6 the adjustment, 7 November.
	if got := ids(tr); !slices.Equal(got, []int64{1, 2, 3, 5, 6}) {
		t.Fatalf("rows %v; want 1 2 3 5 6", got)
	}
	if s := tr.Summary; s.UsageRows != 4 || s.Adjustments != 1 || s.UnbilledRows != 2 || s.Events != 4 || s.Attempts != 6 || s.Duplicates != 2 {
		t.Errorf("summary before the late lines are billed: %+v", s)
	}
	if tr.Rows[4].ID != adj.ID || tr.Rows[4].Ref != "invoice:1" {
		t.Errorf("adjustment row %+v", tr.Rows[4])
	}
	if len(tr.Usage) != 1 || tr.Usage[0].Quantity.String() != "13.5" { // 3 + 2 + 5.5 + 4 - 1
		t.Errorf("usage now: %+v", tr.Usage)
	}

	// November's close bills the late row and the credit on a late line naming October.
	e.Clock.Set(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	e.close("2026-11")
	tr, err = tracer.Customer(context.Background(), "cus_1", oct)
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(tr); !slices.Equal(got, []int64{1, 2, 3, 5, 6}) {
		t.Fatalf("rows %v; want 1 2 3 5 6", got)
	}
	var late *LineView
	for _, inv := range tr.Invoices {
		for i, l := range inv.Lines {
			if l.Late {
				late = &inv.Lines[i]
			}
		}
	}
	if late == nil || late.Period != "2026-10" || late.Quantity.String() != "3" || !late.OK || !slices.Equal(late.RowIDs, []int64{5, 6}) {
		t.Fatalf("late line: %+v", late)
	}
	for _, r := range tr.Rows {
		want := "invoice:1/1"
		if r.ID >= 5 {
			want = late.Ref
		}
		if !slices.Equal(r.BilledBy, []string{want}) {
			t.Errorf("row %d billed by %v, want %s", r.ID, r.BilledBy, want)
		}
	}
	if tr.Summary.UnbilledRows != 0 || !tr.Summary.InvoicesOK {
		t.Errorf("summary after November's close: %+v", tr.Summary)
	}

	if _, err := tracer.Customer(context.Background(), "cus_nobody", oct); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown customer: %v", err)
	}
	if _, err := tracer.Customer(context.Background(), "", oct); err == nil {
		t.Errorf("empty customer: no error")
	}
}

// Rewriting a billed row is caught three ways: the row's own hash, the
// line's digest, and (for a row rewritten with a fresh hash) the next link.
func TestTamperedLedgerShowsInTrace(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e := seedLine(t)
	// The triggers refuse updates; someone with the file drops them first.
	e.Exec(`DROP TRIGGER metered_usage_no_update`)
	e.Exec(`UPDATE metered_usage SET quantity = quantity * 10 WHERE id = 2`)
	tr := e.trace("invoice:1/1")
	l := tr.Invoices[0].Lines[0]
	if l.OK || l.Digest == l.Recomputed.Digest || l.Recomputed.Quantity.Equal(l.Quantity) {
		t.Errorf("line still checks out: %+v", l)
	}
	if tr.Rows[1].Chain == "ok" || tr.Summary.ChainOK || tr.Summary.InvoicesOK || len(tr.Summary.Problems) < 2 {
		t.Errorf("row 2: %q; summary %+v", tr.Rows[1].Chain, tr.Summary)
	}

	// Recompute row 2's hash so it checks out alone: row 3's link breaks.
	r, err := invoice.GetRow(context.Background(), e.DB, 2)
	if err != nil {
		t.Fatal(err)
	}
	e.Exec(`UPDATE metered_usage SET row_hash = ? WHERE id = 2`, r.Hash(r.PrevHash))
	tr = e.trace("invoice:1/1")
	if !strings.Contains(tr.Rows[2].Chain, "prev_hash does not match row 2's row_hash") {
		t.Errorf("row 3 after row 2 was rehashed: chain %q", tr.Rows[2].Chain)
	}
	tr = e.trace("row:2")
	if !strings.Contains(tr.Rows[0].Chain, "row 3's prev_hash does not match") {
		t.Errorf("rewritten row 2: chain %q", tr.Rows[0].Chain)
	}
}

// A deleted row shows as a gap on both sides and in the line's counts.
func TestDeletedRowShowsInTrace(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e := seedLine(t)
	e.Exec(`DROP TRIGGER metered_usage_no_delete`)
	e.Exec(`DELETE FROM metered_usage WHERE id = 2`)
	tr := e.trace("invoice:1/1")
	if len(tr.Rows) != 2 || tr.Rows[0].Chain != "ids jump from 1 to 3: rows were deleted" || tr.Rows[1].Chain != "ids jump from 1 to 3: rows were deleted" {
		t.Fatalf("rows %+v", tr.Rows)
	}
	if l := tr.Invoices[0].Lines[0]; l.OK || l.Recomputed.Rows != 2 || !strings.Contains(l.Problem, "ledger rows were added or removed") {
		t.Errorf("line %+v", l)
	}
}

// A failing database is an error, never a partial trace.
func TestTraceReadErrors(t *testing.T) {
	testenv.SQLiteOnly(t, "breaks the database file")
	e := seedLine(t)
	db, err := schema.Open(context.Background(), e.DB.Path, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	tracer := e.tracer(nil)
	tracer.DB = db
	if _, err := tracer.Trace(context.Background(), "invoice:1/1"); err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("closed database: %v", err)
	}
	oct, _ := ledger.MonthPeriod("2026-10", time.UTC)
	if _, err := tracer.Customer(context.Background(), "cus_1", oct); err == nil {
		t.Errorf("closed database: no error")
	}
	// A table that cannot be read is an error too.
	e.Exec(`DROP TABLE delivery_attempts`)
	if _, err := e.tracer(nil).Trace(context.Background(), "default:evt_a"); err == nil || !strings.Contains(err.Error(), "delivery attempts") {
		t.Errorf("missing table: %v", err)
	}
}

func TestSuggest(t *testing.T) {
	e := seedLine(t)
	e.send("stripe", "evt_a", "cus_1", "1", "2026-10-20T10:00:00Z") // the same id at two providers
	tracer := e.tracer(nil)
	if got := tracer.Suggest(context.Background(), "evt_a"); !slices.Equal(got, []string{"default:evt_a", "stripe:evt_a"}) {
		t.Errorf("Suggest(evt_a) = %v", got)
	}
	if got := tracer.Suggest(context.Background(), "evt_none"); got != nil {
		t.Errorf("Suggest(evt_none) = %v", got)
	}
}

// A voided and amended event's trace holds both events, its rows, the void
// with its reason and the amendment's rows; the amendment's trace the same.
func TestVoidAndAmendInTrace(t *testing.T) {
	e := newEnv(t)
	e.send("default", "evt_v", "cus_1", "7", "2026-10-05T10:00:00Z")
	a := &custody.AmendEvent{Void: ledger.Void{Provider: "default", EventID: "evt_v", Reason: "wrong customer", Actor: "ana"},
		Mapper: e.Mapper(), Meters: ledger.NewMeters(e.Config.Meters), HandlerVersion: "test-1",
		Edit: func(b []byte) ([]byte, error) { return bytes.Replace(b, []byte(`"cus_1"`), []byte(`"cus_2"`), 1), nil }}
	if err := e.Writer.Submit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"default:evt_v", "default:evt_v~amend"} {
		tr := e.trace(target)
		if len(tr.Rows) != 3 || tr.Rows[1].Kind != ledger.KindVoid || tr.Rows[1].Reason != "wrong customer (by ana)" ||
			tr.Rows[2].Customer != "cus_2" || tr.Rows[2].Ref != "event:default/evt_v" || len(tr.Events) != 2 ||
			tr.Summary.UsageRows != 2 || tr.Summary.Voids != 1 {
			t.Fatalf("%s: rows %+v, events %d, summary %+v", target, tr.Rows, len(tr.Events), tr.Summary)
		}
		var text bytes.Buffer
		if err := WriteTable(&text, tr); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"row 2 voids row 1: wrong customer (by ana)", "row 3 amends event:default/evt_v", "1 void,"} {
			if !strings.Contains(text.String(), want) {
				t.Errorf("%s: text lacks %q:\n%s", target, want, text.String())
			}
		}
	}
}
