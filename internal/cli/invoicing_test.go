package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// cliEnv is a data directory with a config declaring meters.
type cliEnv struct {
	t      *testing.T
	dir    string
	config string
}

func newCLIEnv(t *testing.T) *cliEnv {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookledger.yml")
	err := os.WriteFile(cfg, fmt.Appendf(nil, `data: %s
providers:
  - name: test
    scheme: github
    secrets: ["s3cret"]
meters:
  - name: api
    aggregation: sum
    unit: requests
  - name: users
    aggregation: unique_count
    property: user
    unit: users
`, filepath.Join(dir, "data")), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	return &cliEnv{t: t, dir: dir, config: cfg}
}

// appendConfig adds yaml to the end of the test's configuration file.
func (e *cliEnv) appendConfig(yaml string) {
	e.t.Helper()
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(e.config, append(cfg, yaml...), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// run runs the CLI in-process and returns stdout and the error.
func (e *cliEnv) run(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	cmd := append([]string{"hookledger", args[0]}, args[1:]...)
	// --config goes right after the (sub)command names.
	at := 2
	for at < len(cmd) && map[string]bool{"late": true, "close": true, "list": true, "show": true, "seed": true, "mismatches": true, "head": true}[cmd[at]] {
		at++
	}
	cmd = append(cmd[:at], append([]string{"--config", e.config}, cmd[at:]...)...)
	err := app.Run(cmd)
	return out.String(), err
}

func (e *cliEnv) mustRun(args ...string) string {
	e.t.Helper()
	out, err := e.run(args...)
	if err != nil {
		e.t.Fatalf("%v: %v\n%s", args, err, out)
	}
	return out
}

type usageEvent struct {
	customer, meter, qty, props string
	at                          time.Time
}

// write appends events through the real apply path with a writer clock set to recorded.
// count runs a COUNT query on the database, read-only.
func (e *cliEnv) count(query string) int {
	e.t.Helper()
	db, err := schema.Open(context.Background(), filepath.Join(e.dir, "data", schema.FileName), schema.Options{ReadOnly: true})
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.Read.Get(&n, query); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *cliEnv) write(recorded time.Time, events ...usageEvent) {
	e.t.Helper()
	ctx := context.Background()
	db, err := schema.Open(ctx, filepath.Join(e.dir, "data", schema.FileName), schema.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	defer db.Close()
	w := custody.NewWriter(db)
	w.Now = func() time.Time { return recorded }
	if err := w.Open(ctx); err != nil {
		e.t.Fatal(err)
	}
	defer w.Close()
	for i, ev := range events {
		q, err := ledger.ParseRowQuantity(ev.qty)
		if err != nil {
			e.t.Fatal(err)
		}
		if ev.props == "" {
			ev.props = "{}"
		}
		id := fmt.Sprintf("evt_%d_%d", recorded.UnixNano(), i)
		body := []byte(`{}`)
		sum := sha256.Sum256(body)
		d := &custody.Delivery{Provider: "test", EventID: id, EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
			Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: ev.at, Status: custody.StatusApplied,
			Rows: []ledger.UsageRow{{Customer: ev.customer, Meter: ev.meter, Quantity: q, OccurredAt: ev.at, Properties: ev.props}}}
		if err := w.Submit(ctx, d); err != nil {
			e.t.Fatal(err)
		}
	}
}

func t0(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Awkward customer ids: CSV must quote commas, quotes and newlines.
var awkward = []string{`acme, inc`, `say "hi"`, "multi\nline", "plain"}

func seedAwkward(e *cliEnv) {
	var evs []usageEvent
	for i, c := range awkward {
		evs = append(evs,
			usageEvent{customer: c, meter: "api", qty: fmt.Sprint(i + 1), at: t0("2026-10-03T10:00:00Z")},
			usageEvent{customer: c, meter: "api", qty: "0.5", at: t0("2026-10-04T10:00:00Z")},
			usageEvent{customer: c, meter: "users", qty: "1", props: `{"user":"u1"}`, at: t0("2026-10-05T10:00:00Z")},
			usageEvent{customer: c, meter: "users", qty: "1", props: `{"user":"u2"}`, at: t0("2026-10-05T11:00:00Z")},
			usageEvent{customer: c, meter: "users", qty: "1", props: `{"user":"u1"}`, at: t0("2026-10-06T11:00:00Z")},
		)
	}
	e.write(t0("2026-10-10T00:00:00Z"), evs...)
}

func TestUsageCSVFollowsRFC4180(t *testing.T) {
	e := newCLIEnv(t)
	seedAwkward(e)
	out := e.mustRun("usage", "--from", "2026-10", "--to", "2026-11", "--format", "csv")
	for _, quoted := range []string{`"acme, inc"`, `"say ""hi"""`, "\"multi\nline\""} {
		if !strings.Contains(out, quoted) {
			t.Errorf("CSV lacks %s:\n%s", quoted, out)
		}
	}
	if strings.Contains(out, `\"`) {
		t.Errorf("CSV escapes quotes with a backslash:\n%s", out)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("encoding/csv cannot read the output: %v\n%s", err, out)
	}
	want := [][]string{{"customer", "meter", "aggregation", "quantity", "unit", "events", "adjustments"}}
	sorted := append([]string(nil), awkward...)
	for _, c := range []string{`acme, inc`, "multi\nline", "plain", `say "hi"`} {
		i := indexOf(sorted, c)
		want = append(want,
			[]string{c, "api", "sum", fmt.Sprintf("%d.5", i+1), "requests", "2", "0"},
			[]string{c, "users", "unique_count", "2", "users", "3", "0"})
	}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("round trip:\ngot  %q\nwant %q", recs, want)
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func TestAdminUsageAPIMatchesCLI(t *testing.T) {
	e := newCLIEnv(t)
	seedAwkward(e)
	cfg, err := config.Load(e.config)
	if err != nil {
		t.Fatal(err)
	}
	db, err := schema.Open(context.Background(), cfg.DBPath(), schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	adm, err := admin.New("127.0.0.1:0", []string{"admin-token"})
	if err != nil {
		t.Fatal(err)
	}
	adm.Mux.Handle("GET /v1/usage", admin.Usage(db, ledger.NewMeters(cfg.Meters)))
	srv := httptest.NewServer(adm.Handler())
	defer srv.Close()

	get := func(query, token, accept string) (int, string, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/usage?"+query, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}

	query := "from=2026-10-01&to=2026-11-01&tz=Europe/Berlin&group_by=customer,meter,day"
	if code, _, body := get(query, "", ""); code != http.StatusUnauthorized || strings.Contains(body, "acme") {
		t.Fatalf("no token: %d %s", code, body)
	}
	if code, _, _ := get(query, "wrong-token", ""); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}

	code, ctype, body := get(query, "admin-token", "")
	if code != http.StatusOK || ctype != "application/json" {
		t.Fatalf("JSON: %d %s %s", code, ctype, body)
	}
	cliJSON := e.mustRun("usage", "--from", "2026-10-01", "--to", "2026-11-01", "--tz", "Europe/Berlin", "--group-by", "customer,meter,day", "--format", "json")
	var api, cli []ledger.UsageLine
	if err := json.Unmarshal([]byte(body), &api); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(cliJSON), &cli); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(api, cli) || len(api) != 4*4 {
		t.Fatalf("API and CLI differ:\nAPI %+v\nCLI %+v", api, cli)
	}
	var total ledger.Total
	for _, l := range api {
		if l.Meter == "api" {
			total = total.Plus(l.Quantity)
		}
	}
	if total.String() != "12" { // 1+2+3+4 plus 4 x 0.5
		t.Fatalf("API total %s, want 12", total)
	}

	code, ctype, body = get(query, "admin-token", "text/csv")
	cliCSV := e.mustRun("usage", "--from", "2026-10-01", "--to", "2026-11-01", "--tz", "Europe/Berlin", "--group-by", "customer,meter,day", "--format", "csv")
	if code != http.StatusOK || !strings.HasPrefix(ctype, "text/csv") || body != cliCSV {
		t.Fatalf("CSV: %d %s\nAPI:\n%s\nCLI:\n%s", code, ctype, body, cliCSV)
	}

	for _, bad := range []string{"from=someday", "tz=Nowhere/City", "group_by=week", "format=xml", "group_by=customer"} {
		if code, _, body := get(bad, "admin-token", ""); code != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
}

func TestInvoiceAdjustVerifyCLI(t *testing.T) {
	e := newCLIEnv(t)
	e.write(t0("2026-10-20T00:00:00Z"),
		usageEvent{customer: "c1", meter: "api", qty: "10", at: t0("2026-10-03T10:00:00Z")},
		usageEvent{customer: "c2", meter: "api", qty: "4", at: t0("2026-10-03T10:00:00Z")},
	)
	// A month that has not ended (plus grace) is refused and nothing is stored.
	future := time.Now().UTC().AddDate(0, 1, 0).Format("2006-01")
	if _, err := e.run("invoice", "close", "--period", future, "--all"); err == nil || !strings.Contains(err.Error(), "has not ended") {
		t.Fatalf("closing a future month: %v", err)
	}
	if _, err := e.run("invoice", "close", "--period", "2026-10"); err == nil || !strings.Contains(err.Error(), "--customer C or --all") {
		t.Fatalf("close without scope: %v", err)
	}
	if _, err := e.run("invoice", "close", "--period", "2026-1", "--all"); err == nil || !strings.Contains(err.Error(), "YYYY-MM") {
		t.Fatalf("bad period: %v", err)
	}
	if n := e.count("SELECT (SELECT COUNT(*) FROM period_closes) + (SELECT COUNT(*) FROM invoices) + (SELECT COUNT(*) FROM invoice_lines)"); n != 0 {
		t.Fatalf("refused closes stored %d rows in period_closes, invoices and invoice_lines", n)
	}
	out := e.mustRun("invoice", "close", "--period", "2026-10", "--all", "--format", "json")
	var res invoice.CloseResult
	if err := json.Unmarshal([]byte(out), &struct {
		Existing *bool  `json:"existing"`
		Head     *int64 `json:"ledger_head"`
	}{&res.Existing, &res.Head}); err != nil || res.Existing || res.Head != 2 {
		t.Fatalf("close: %v %+v\n%s", err, res, out)
	}
	again := e.mustRun("invoice", "close", "--period", "2026-10", "--all")
	if !strings.HasPrefix(again, "already closed 2026-10") {
		t.Fatalf("re-close:\n%s", again)
	}
	list := e.mustRun("invoice", "list", "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(list)).ReadAll()
	if err != nil || len(recs) != 3 || recs[1][1] != "c1" || recs[2][1] != "c2" {
		t.Fatalf("list: %v\n%s", err, list)
	}
	show := e.mustRun("invoice", "show", "1")
	if !strings.Contains(show, "customer  c1") || !strings.Contains(show, "api") || !strings.Contains(show, " 10 ") {
		t.Fatalf("show:\n%s", show)
	}
	if _, err := e.run("invoice", "show", "7"); err == nil || !strings.Contains(err.Error(), "no such invoice") {
		t.Fatalf("show missing: %v", err)
	}
	if _, err := e.run("invoice", "show", "x"); err == nil {
		t.Fatal("show x succeeded")
	}

	// Adjustments: the reason is required; a correction of the closed month is late.
	if _, err := e.run("adjust", "--customer", "c1", "--meter", "api", "--quantity", "-3", "--ref", "row:1"); err == nil || !strings.Contains(err.Error(), "reason") {
		t.Fatalf("adjust without reason: %v", err)
	}
	if _, err := e.run("adjust", "--customer", "c1", "--meter", "api", "--reason", "x"); err == nil || !strings.Contains(err.Error(), "--quantity is required") {
		t.Fatalf("adjust without quantity: %v", err)
	}
	if _, err := e.run("adjust", "--meter", "api", "--quantity", "1", "--reason", "x"); err == nil || !strings.Contains(err.Error(), "customer is required") {
		t.Fatalf("adjust without customer: %v", err)
	}
	if _, err := e.run("adjust", "--customer", "c1", "--meter", "api", "--quantity", "abc", "--reason", "x"); err == nil || !strings.Contains(err.Error(), "--quantity") {
		t.Fatalf("adjust bad quantity: %v", err)
	}
	if _, err := e.run("adjust", "--customer", "c1", "--meter", "gpu", "--quantity", "1", "--reason", "x"); err == nil || !strings.Contains(err.Error(), "not declared") {
		t.Fatalf("adjust undeclared meter: %v", err)
	}
	adj := e.mustRun("adjust", "--customer", "c1", "--meter", "api", "--quantity", "-3", "--reason", "double-counted retry", "--ref", "row:1", "--format", "csv")
	if !strings.Contains(adj, "adjustment,c1,api,-3,double-counted retry,row:1,2026-10-03T10:00:00Z") {
		t.Fatalf("adjust:\n%s", adj)
	}
	late := e.mustRun("usage", "late", "--format", "csv")
	if !strings.Contains(late, "c1,api,2026-10,UTC,sum,-3,requests,0,1,2,3") {
		t.Fatalf("usage late:\n%s", late)
	}
	total := e.mustRun("usage", "--from", "2026-10", "--to", "2026-11", "--customer", "c1", "--format", "csv")
	if !strings.Contains(total, "c1,api,sum,7,requests,1,1") {
		t.Fatalf("total after adjustment:\n%s", total)
	}
	asOf := e.mustRun("usage", "--from", "2026-10", "--to", "2026-11", "--customer", "c1", "--as-of", "id:2", "--format", "csv")
	if !strings.Contains(asOf, "c1,api,sum,10,requests,1,0") {
		t.Fatalf("as-of the invoice's ledger head:\n%s", asOf)
	}

	if out := e.mustRun("verify"); !strings.Contains(out, "hash chain") || strings.Contains(out, "BROKEN") {
		t.Fatalf("verify:\n%s", out)
	}
	db, err := sqlx.Open("sqlite", "file:"+filepath.Join(e.dir, "data", schema.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`DROP TRIGGER metered_usage_no_update`, `UPDATE metered_usage SET quantity = 99000000 WHERE id = 2`} {
		if _, err := db.Exec(s); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	out, err = e.run("verify")
	if err == nil || !strings.Contains(err.Error(), "metered_usage row 2") {
		t.Fatalf("verify after tampering: %v\n%s", err, out)
	}
	if !strings.Contains(out, "BROKEN") {
		t.Fatalf("verify output:\n%s", out)
	}
}

func TestUsageCLIErrors(t *testing.T) {
	e := newCLIEnv(t)
	seedAwkward(e)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"usage", "--format", "xml"}, "--format"},
		{[]string{"usage", "--tz", "Mars/Base"}, "--tz: time zone"},
		{[]string{"usage", "--from", "last week"}, "--from:"},
		{[]string{"usage", "--group-by", "customer,week"}, "--group-by:"},
		{[]string{"usage", "--group-by", "day"}, "cannot combine meters"},
		{[]string{"usage", "--as-of", "id:-1"}, "--as-of:"},
		{[]string{"usage", "late", "--format", "yaml"}, "--format"},
		{[]string{"invoice", "list", "--format", "yaml"}, "--format"},
		{[]string{"verify", "--format", "yaml"}, "--format"},
	} {
		if out, err := e.run(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q\n%s", tc.args, err, tc.want, out)
		}
	}
	// One total over everything, and a single meter over all customers.
	out := e.mustRun("usage", "--group-by", "", "--meter", "users", "--format", "csv")
	if out != "aggregation,quantity,unit,events,adjustments\nunique_count,2,users,12,0\n" {
		t.Fatalf("one total:\n%q", out)
	}
}

// A bad --format (flag or HOOKLEDGER_FORMAT) is refused by the flag itself,
// before the command opens or creates anything.
func TestBadFormatIsRefusedBeforeTheCommandRuns(t *testing.T) {
	e := newCLIEnv(t)
	// FORMAT marks where --format goes: before any positional argument.
	commands := [][]string{
		{"usage", "FORMAT"}, {"usage", "late", "FORMAT"}, {"invoice", "list", "FORMAT"}, {"invoice", "show", "FORMAT", "1"},
		{"verify", "FORMAT"}, {"audit", "mismatches", "FORMAT"},
		{"adjust", "FORMAT", "--customer", "c", "--meter", "api", "--quantity", "1", "--reason", "r"},
	}
	with := func(cmd []string, format ...string) []string {
		var args []string
		for _, a := range cmd {
			if a == "FORMAT" {
				args = append(args, format...)
			} else {
				args = append(args, a)
			}
		}
		return args
	}
	want := `--format: "xml" is not one of table, json, csv`
	for _, cmd := range commands {
		if _, err := e.run(with(cmd, "--format", "xml")...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v --format xml: %v, want %q", cmd, err, want)
		}
	}
	t.Setenv("HOOKLEDGER_FORMAT", "xml")
	for _, cmd := range commands {
		if _, err := e.run(with(cmd)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v with HOOKLEDGER_FORMAT=xml: %v, want %q", cmd, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(e.dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a refused command created the data directory: %v", err)
	}
}
