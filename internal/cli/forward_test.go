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
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
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
		for deadline := time.Now().Add(15 * time.Second); e.Int(`SELECT COUNT(*) FROM outbox WHERE status = 'dead'`) < 2; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the message and the push are not dead after 15s")
			}
		}
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
			return tx.Batch().RecordOutboxResults(ctx, []schema.OutboxResult{{ID: msgs[0].ID, Status: schema.OutboxDead,
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
