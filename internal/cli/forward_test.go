package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// `forward attempts`, `forward list` and `forward status` never print a
// secret the relay sent, on either backend: not from an attempt whose
// destination (or api_base) echoed the request in a 400, and not from a row
// an older version stored whole.
func TestForwardViewsRedactSecrets(t *testing.T) {
	const (
		stripeKey  = "sk_test_51CliSecretKeyThatMustNeverBePrinted"
		destSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
		urlPass    = "pw-In-The-Destination-URL-77ab"
		adminToken = "admin-token-that-must-not-be-printed-0c1d"
	)
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		// A proxy's error page: the request's headers quoted back, PHP-style
		// JSON (/ as \/).
		echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			h, _ := json.Marshal(r.Header)
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"error":{"message":"bad request: %s"},"headers":%s}`, r.Header.Get("Authorization"),
				strings.ReplaceAll(string(h), "/", `\/`))
		}))
		defer echo.Close()
		e := testenv.New(t, testenv.Options{Backend: backend, RealTime: true})
		database := ""
		if backend == "postgres" {
			database = "database: " + e.Database()
		}
		yml := filepath.Join(t.TempDir(), "hookledger.yml")
		destURL := strings.Replace(echo.URL, "http://", "http://hook:"+urlPass+"@", 1) + "/in"
		err := os.WriteFile(yml, fmt.Appendf(nil, `data: %s
%s
providers:
  - name: default
    scheme: standard
    secrets: [%q]
admin:
  tokens: [%q]
destinations:
  - name: app
    url: %s
    secrets: [%q]
    max_attempts: 1
stripe:
  api_key: %s
  api_base: %s
  customers: identity
meters:
  - name: api_requests
    stripe: {event_name: api_requests, mode: stream, multiplier: 1}
%s`, e.Dir, database, testenv.Secret, adminToken, destURL, destSecret, stripeKey, echo.URL, testenv.UsageYAML), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(yml)
		if err != nil {
			t.Fatal(err)
		}
		e.Config = cfg
		e.Reopen() // routes the events to the destination and pushes them to Stripe

		relay := &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: cfg.Destinations, Stripe: cfg.Stripe, Pushes: e.DB,
			Poll: 50 * time.Millisecond, Sole: true, Log: slog.New(slog.DiscardHandler)}
		if err := relay.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		if res := e.Send("evt_cli", testenv.UsageBody("cus_1", "api_requests", "1")); res.Code != 200 {
			t.Fatalf("send: %d", res.Code)
		}
		await.Eventually(t, 15*time.Second, "the message and the push dead", func() bool { return e.Int(`SELECT COUNT(*) FROM outbox WHERE status = 'dead'`) >= 2 })
		relay.Close()

		// And a row as an older version stored it: the echo whole.
		ctx := context.Background()
		msgs, err := e.DB.ListOutbox(ctx, schema.OutboxFilter{})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("%d messages (%v), want 2", len(msgs), err)
		}
		old := fmt.Sprintf(`{"Authorization":"Bearer %s","secret":"%s","admin":"%s","url":"%s"}`, stripeKey, destSecret, adminToken, destURL)
		err = e.Writer.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
			now := time.Now().UnixMilli()
			return tx.Outbox().RecordOutboxResults(ctx, []schema.OutboxResult{{ID: msgs[0].ID, Status: schema.OutboxDead,
				AttemptedAt: now, NextAttemptAt: now, StatusCode: 400, Response: []byte(old), Error: "HTTP 400: " + old}})
		}))
		if err != nil {
			t.Fatal(err)
		}

		run := func(args ...string) string {
			t.Helper()
			var out bytes.Buffer
			app := newApp()
			app.Writer, app.ErrWriter = &out, &out
			args = append(args[:2:2], append([]string{"--config", yml}, args[2:]...)...)
			if err := app.Run(append([]string{"hookledger"}, args...)); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out.String())
			}
			return out.String()
		}
		var outputs []string
		for _, m := range msgs {
			for _, format := range []string{"json", "csv", "table"} {
				outputs = append(outputs, run("forward", "attempts", m.MessageID, "--format", format))
			}
		}
		if !strings.Contains(strings.Join(outputs, "\n"), "X-Hookledger-Event-Id") {
			t.Fatalf("the echoed headers are not shown at all:\n%s", strings.Join(outputs, "\n"))
		}
		outputs = append(outputs, run("forward", "list", "--format", "json"), run("forward", "status", "--format", "json"))
		for _, s := range []string{stripeKey[8:], destSecret[6:], urlPass, adminToken} {
			for i := 0; i+12 <= len(s); i++ {
				for _, out := range outputs {
					if part := s[i : i+12]; strings.Contains(out, part) || strings.Contains(out, strings.ReplaceAll(part, "/", `\/`)) {
						t.Errorf("%q (of %q) printed:\n%s", part, s, out)
					}
				}
			}
		}
	})
}

// Issue 41, item 9: `forward list --destination stripe` says whose each push
// is, on either backend: a usage row's push its event, customer and meter; an
// adjustment's (which has no event) its customer, meter, ledger row, reason
// and what it corrects.
func TestForwardListShowsWhosePush(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := testenv.New(t, testenv.Options{Backend: backend, RealTime: true})
		database := ""
		if backend == "postgres" {
			database = "database: " + e.Database()
		}
		yml := filepath.Join(t.TempDir(), "hookledger.yml")
		// No relay runs: the pushes stay pending, where the list shows them.
		err := os.WriteFile(yml, fmt.Appendf(nil, `data: %s
%s
providers:
  - name: default
    scheme: standard
    secrets: [%q]
stripe:
  api_key: sk_test_forwardlist
  api_base: http://127.0.0.1:9
  customers: identity
meters:
  - name: api_requests
    stripe: {event_name: api_requests, mode: stream, multiplier: 1}
%s`, e.Dir, database, testenv.Secret, testenv.UsageYAML), 0o600)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(yml)
		if err != nil {
			t.Fatal(err)
		}
		e.Config = cfg
		e.Reopen() // pushes the ledger rows to Stripe
		if res := e.Send("evt_usage", testenv.UsageBody("cus_1", "api_requests", "3")); res.Code != 200 {
			t.Fatalf("send: %d", res.Code)
		}
		// run runs the command whose name is its first words words.
		run := func(words int, args ...string) string {
			t.Helper()
			var out bytes.Buffer
			app := newApp()
			app.Writer, app.ErrWriter = &out, &out
			args = append(args[:words:words], append([]string{"--config", yml}, args[words:]...)...)
			if err := app.Run(append([]string{"hookledger"}, args...)); err != nil {
				t.Fatalf("%v: %v\n%s", args, err, out.String())
			}
			return out.String()
		}
		run(1, "adjust", "--customer", "cus_1", "--meter", "api_requests", "--quantity", "-1",
			"--reason", "refund for the outage", "--ref", "event:default/evt_usage")

		table := run(2, "forward", "list", "--destination", "stripe")
		lines := strings.Split(strings.TrimSpace(table), "\n")
		if len(lines) != 3 {
			t.Fatalf("want a header and two pushes:\n%s", table)
		}
		header := strings.Fields(lines[0])
		col := func(line, name string) string {
			t.Helper()
			i := strings.Index(lines[0], name)
			if i < 0 || i > len(line) {
				t.Fatalf("no column %s in\n%s", name, table)
			}
			return strings.Fields(line[i:])[0]
		}
		if want := []string{"MESSAGE_ID", "DESTINATION", "STATUS", "PROVIDER", "EVENT_ID", "EVENT_TYPE", "CUSTOMER", "METER", "LEDGER"}; !slices.Equal(header[:len(want)], want) {
			t.Errorf("header %v", header)
		}
		usage, adj := lines[1], lines[2]
		for name, want := range map[string]string{"PROVIDER": "default", "EVENT_ID": "evt_usage", "EVENT_TYPE": "usage.recorded", "CUSTOMER": "cus_1",
			"METER": "api_requests", "LEDGER": "usage"} {
			if got := col(usage, name); got != want {
				t.Errorf("the usage push's %s is %q, want %q:\n%s", name, got, want, table)
			}
		}
		for name, want := range map[string]string{"CUSTOMER": "cus_1", "METER": "api_requests", "LEDGER": "adjustment"} {
			if got := col(adj, name); got != want {
				t.Errorf("the adjustment's push's %s is %q, want %q:\n%s", name, got, want, table)
			}
		}
		if want := "adjustment row:2: refund for the outage (ref event:default/evt_usage)"; !strings.Contains(adj, want) {
			t.Errorf("the adjustment's push does not say %q:\n%s", want, table)
		}
		csv := run(2, "forward", "list", "--destination", "stripe", "--format", "csv")
		if want := ",cus_1,api_requests,adjustment row:2: refund for the outage (ref event:default/evt_usage),"; !strings.Contains(csv, want) {
			t.Errorf("the CSV has no %q:\n%s", want, csv)
		}
		var ms []forward.Message
		if err := json.Unmarshal([]byte(run(2, "forward", "list", "--destination", "stripe", "--format", "json")), &ms); err != nil || len(ms) != 2 {
			t.Fatalf("json: %d messages (%v)", len(ms), err)
		}
		want := forward.Push{Customer: "cus_1", Meter: "api_requests", Kind: "adjustment", Ledger: "row:2", Rows: 1, LastRow: "row:2", Reason: "refund for the outage",
			Ref: "event:default/evt_usage"}
		if p := ms[1].Push; p == nil || *p != want {
			t.Errorf("the adjustment's push in JSON: %+v, want %+v", p, want)
		}
		if p := ms[0].Push; p == nil || p.Ledger != "row:1" || p.Kind != "usage" || ms[0].EventID != "evt_usage" {
			t.Errorf("the usage push in JSON: %+v %+v", ms[0], p)
		}
	})
}
