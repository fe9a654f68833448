package console_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// cli runs the hookledger binary on the env's data directory, with the
// env's secret (so `dispute` verifies with the same key as the console).
func (e *env) cli(t testing.TB, args ...string) string {
	t.Helper()
	testenv.SQLiteOnly(t, "runs the CLI on the env's data directory")
	out, err := testenv.RunFor(t, testenv.Binary(t), e.Dir, []string{"HOOKLEDGER_SECRET=" + testenv.Secret},
		append(args, "--data", e.Dir)...)
	if err != nil {
		t.Fatalf("hookledger %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func usageBody(customer, meter, quantity string, at time.Time) []byte {
	return fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":%q,"meter":%q,"quantity":%s,"occurred_at":%q}}`,
		customer, meter, quantity, at.UTC().Format(time.RFC3339))
}

// The usage page shows the numbers `hookledger usage` prints for the same
// window and zone: all customers over two pages, and one customer per day.
func TestUsageMatchesCLI(t *testing.T) {
	e := newEnv(t, false)
	start := time.Date(2026, 10, 31, 20, 0, 0, 0, time.UTC) // Berlin's November starts at 23:00 UTC
	for i := range 90 {
		at := start.Add(time.Duration(i) * 7 * time.Hour)
		meter := []string{"api_requests", "storage_gb"}[i%2]
		body := usageBody(fmt.Sprintf("cus_%02d", i%31), meter, fmt.Sprintf("%d.25", i), at)
		if r := e.Send(fmt.Sprintf("evt_%d", i), body); r.Code != 200 {
			t.Fatalf("send: %d %+v", r.Code, r.Body)
		}
	}
	e.signIn(t)
	const from, to, tz = "2026-11", "2026-12", "Europe/Berlin"
	var cli []ledger.UsageLine
	if err := json.Unmarshal([]byte(e.cli(t, "usage", "--from", from, "--to", to, "--tz", tz, "--format", "json")), &cli); err != nil {
		t.Fatal(err)
	}
	var want [][]string
	for _, l := range cli {
		want = append(want, []string{l.Customer, l.Meter, string(l.Aggregation), l.Quantity.String(), l.Unit, fmt.Sprint(l.Events), fmt.Sprint(l.Adjustments)})
	}
	var got [][]string
	e.pages(t, "/ui/usage?"+url.Values{"from": {from}, "to": {to}, "tz": {tz}}.Encode(), 4, func(doc *html.Node, _ int) {
		got = append(got, tableRows(t, doc, "usage")...)
	})
	if len(want) < 40 {
		t.Fatalf("only %d lines from the CLI", len(want))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("console usage\n%q\nCLI\n%q", got, want)
	}

	// One customer, per day.
	var days []ledger.UsageLine
	if err := json.Unmarshal([]byte(e.cli(t, "usage", "--from", from, "--to", to, "--tz", tz, "--customer", "cus_03",
		"--group-by", "customer,meter,day", "--format", "json")), &days); err != nil {
		t.Fatal(err)
	}
	doc := e.page(t, "/ui/usage?"+url.Values{"from": {from}, "to": {to}, "tz": {tz}, "customer": {"cus_03"}}.Encode())
	var gotDays, wantDays []string
	for _, d := range find(doc, func(n *html.Node) bool { return n.Data == "details" }) {
		for _, tr := range find(d, func(n *html.Node) bool { return n.Data == "tr" }) {
			if cells := find(tr, func(n *html.Node) bool { return n.Data == "td" }); len(cells) == 4 {
				gotDays = append(gotDays, text(cells[0])+" "+text(cells[1])+" "+text(cells[2]))
			}
		}
	}
	for _, d := range days {
		wantDays = append(wantDays, fmt.Sprintf("%s %s %d", d.Period, d.Quantity, d.Events))
	}
	if len(wantDays) == 0 || fmt.Sprint(gotDays) != fmt.Sprint(wantDays) {
		t.Errorf("per day: console %q, CLI %q", gotDays, wantDays)
	}
	if n := len(find(doc, func(n *html.Node) bool { return n.Data == "svg" })); n != 2 {
		t.Errorf("%d charts for two meters", n)
	}
}

// invoices closes November (with a late event after the close) and December
// (which bills it as a late line).
func invoices(t *testing.T, e *env) {
	t.Helper()
	for i := range 4 {
		for j := range 3 {
			e.send(t, fmt.Sprintf("evt_%d_%d", i, j), fmt.Sprintf("cus_%d", i), fmt.Sprint(j+1))
		}
	}
	e.Clock.Add(time.Second)
	e.send(t, "evt_0_0", "cus_0", "1") // a retry: a second delivery attempt
	e.closeMonth(t, "2026-11", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	e.Clock.Set(time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC))
	body := usageBody("cus_1", "api_requests", "5", time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC))
	if r := e.Send("evt_late", body); r.Code != 200 {
		t.Fatalf("late event: %d", r.Code)
	}
	e.closeMonth(t, "2026-12", time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC))
}

func TestInvoicePages(t *testing.T) {
	e := newEnv(t, false)
	invoices(t, e)
	e.signIn(t)
	list := tableRows(t, e.page(t, "/ui/invoices"), "invoices")
	if len(list) != 5 || list[0][0] != "5" || list[0][1] != "cus_1" || list[0][2] != "2026-12" || list[0][5] != "1" || list[4][0] != "1" {
		t.Fatalf("invoice list %q", list)
	}
	if r := tableRows(t, e.page(t, "/ui/invoices?customer=cus_1"), "invoices"); len(r) != 2 {
		t.Errorf("cus_1's invoices: %q", r)
	}
	if r := tableRows(t, e.page(t, "/ui/invoices?period=2026-11&before=3"), "invoices"); len(r) != 2 || r[0][0] != "2" {
		t.Errorf("November's below 3: %q", r)
	}

	doc := e.page(t, "/ui/invoices/5")
	lines := tableRows(t, doc, "lines")
	if len(lines) != 1 || !strings.Contains(lines[0][0], "late") || lines[0][3] != "2026-11" || lines[0][4] != "5" || lines[0][10] != "matches" {
		t.Errorf("late invoice lines %q", lines)
	}
	if !strings.Contains(text(doc), "recomputed") || !strings.Contains(text(byID(doc, "lines")), "invoice:5/1") {
		t.Errorf("invoice page: %s", text(doc))
	}
	doc = e.page(t, "/ui/invoices/1")
	if l := tableRows(t, doc, "lines"); len(l) != 1 || l[0][4] != "6" || l[0][6] != "3" {
		t.Errorf("invoice 1 lines %q", l)
	}
	if !strings.Contains(text(doc), "The invoice and every line recompute to what was frozen") {
		t.Error("invoice 1 does not say it recomputes")
	}
	// Its line links to the trace, which shows what `hookledger dispute` shows.
	trace := links(doc, func(a *html.Node) bool { return strings.Contains(attr(a, "class"), "trace") })
	if len(trace) != 1 || trace[0] != "/ui/dispute?target=invoice%3A1%2F1" {
		t.Fatalf("trace links %q", trace)
	}
	tdoc := e.page(t, trace[0])
	var cli struct {
		Rows   []struct{ ID int64 }
		Events []struct {
			EventID  string `json:"event_id"`
			Attempts []struct{ Outcome string }
		}
	}
	if err := json.Unmarshal([]byte(e.cli(t, "dispute", "invoice:1/1", "--format", "json")), &cli); err != nil {
		t.Fatal(err)
	}
	rows := tableRows(t, tdoc, "rows")
	if len(rows) != len(cli.Rows) || len(cli.Rows) != 3 {
		t.Errorf("trace rows %q, CLI %d", rows, len(cli.Rows))
	}
	for i, r := range cli.Rows {
		if i < len(rows) && rows[i][0] != fmt.Sprint(r.ID) {
			t.Errorf("row %d: %q, CLI %d", i, rows[i], r.ID)
		}
	}
	txt := text(tdoc)
	for _, ev := range cli.Events {
		if !strings.Contains(txt, "default:"+ev.EventID) {
			t.Errorf("trace lacks event %s", ev.EventID)
		}
	}
	if !strings.Contains(txt, "4 delivery attempt(s) (1 duplicate(s)") || !strings.Contains(txt, "3 valid, 0 invalid, 0 not verifiable, 0 pruned") {
		t.Errorf("trace summary: %s", txt)
	}
}

// The bundle download is byte for byte what `dispute export` writes.
func TestBundleMatchesExport(t *testing.T) {
	e := newEnv(t, false)
	invoices(t, e)
	e.signIn(t)
	for _, target := range []string{"invoice:1/1", "invoice:5", "default:evt_late"} {
		resp := e.do(t, "GET", "/ui/dispute/bundle?target="+url.QueryEscape(target), nil)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %v", target, resp.StatusCode, err)
		}
		if ct, cd := resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"); ct != "application/zip" || !strings.HasPrefix(cd, `attachment; filename="dispute-`) {
			t.Errorf("%s: %s, %s", target, ct, cd)
		}
		out := filepath.Join(t.TempDir(), "bundle.zip")
		e.cli(t, "dispute", "export", target, "--out", out)
		want, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s: the download (%d bytes) differs from dispute export (%d bytes)", target, len(got), len(want))
		}
	}
}

// The invoice list pages on the invoice id: every invoice once, newest first.
func TestInvoicesPagination(t *testing.T) {
	e := newEnv(t, false)
	for i := range 120 {
		e.send(t, fmt.Sprintf("evt_%d", i), fmt.Sprintf("cus_%03d", i), "1")
	}
	e.closeMonth(t, "2026-11", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	e.signIn(t)
	var ids []string
	e.pages(t, "/ui/invoices", 5, func(doc *html.Node, _ int) {
		for _, r := range tableRows(t, doc, "invoices") {
			ids = append(ids, r[0])
		}
	})
	if len(ids) != 120 {
		t.Fatalf("%d invoices over the pages, want 120", len(ids))
	}
	for i, id := range ids {
		if id != fmt.Sprint(120-i) {
			t.Fatalf("row %d is invoice %s, want %d", i, id, 120-i)
		}
	}
}

// A ledger row changed after the close shows: the invoice line no longer
// recomputes, the trace marks the row's chain broken, and a changed body is
// "invalid" on the event page.
func TestTamperShows(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e := newEnv(t, false)
	invoices(t, e)
	e.Exec(`DROP TRIGGER metered_usage_no_update`)
	e.Exec(`UPDATE metered_usage SET quantity = quantity * 10 WHERE id = 2`)
	e.Exec(`UPDATE receipts SET body = CAST('{}' AS BLOB) WHERE event_id = 'evt_0_2'`)
	e.signIn(t)
	doc := e.page(t, "/ui/invoices/1")
	if txt := text(doc); !strings.Contains(txt, "MISMATCH") {
		t.Errorf("the invoice page does not say MISMATCH: %s", txt)
	}
	if l := tableRows(t, doc, "lines"); len(l) != 1 || l[0][10] == "matches" {
		t.Errorf("tampered line %q", l)
	}
	tdoc := e.page(t, "/ui/dispute?target=invoice:1/1")
	rows := tableRows(t, tdoc, "rows")
	if len(rows) != 3 || rows[1][8] == "ok" || rows[0][8] != "ok" {
		t.Errorf("trace rows %q: want row 2's chain broken", rows)
	}
	if txt := text(tdoc); !strings.Contains(txt, "BROKEN") || !strings.Contains(txt, "PROBLEM") {
		t.Errorf("trace summary does not name the problems: %s", txt)
	}
	if v := text(byID(e.page(t, "/ui/event?provider=default&id=evt_0_2"), "verification")); v != "invalid" {
		t.Errorf("changed body: %q, want invalid", v)
	}
}
