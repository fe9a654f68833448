package forward_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// The destination's URL carries basic-auth credentials, sent by Go's client
// in an Authorization: Basic header.
const (
	urlUser     = "hook"
	urlPassword = "pw-Of-The-Destination-URL-93f1"
)

// echoServer stands in for a misbehaving destination or api_base (a proxy's
// error page, a debugging endpoint): it answers 400 with the request's
// headers quoted back, in turn
//   - as a JSON body, PHP-style (/ escaped as \/), with the secret the
//     application verifies with printed whole and without whsec_;
//   - as a plain header dump, padded so that the Authorization header's
//     value straddles the first KiB the relay keeps.
//
// It records the Webhook-Signature values it was sent.
type echoServer struct {
	srv   *httptest.Server
	calls atomic.Int64
	mu    sync.Mutex
	sigs  []string
}

func newEchoServer(t *testing.T, appSecret string) *echoServer {
	es := &echoServer{}
	es.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		es.mu.Lock()
		for _, s := range strings.Fields(r.Header.Get("Webhook-Signature")) {
			_, v, _ := strings.Cut(s, ",")
			es.sigs = append(es.sigs, v)
		}
		es.mu.Unlock()
		var body string
		if es.calls.Add(1)%2 == 1 {
			h, _ := json.Marshal(r.Header)
			msg := "invalid request: Authorization: " + r.Header.Get("Authorization")
			if appSecret != "" {
				msg += "; the signature did not verify with " + appSecret + " (key " + strings.TrimPrefix(appSecret, "whsec_") + ")"
			}
			m, _ := json.Marshal(msg)
			body = strings.ReplaceAll(fmt.Sprintf(`{"error":{"type":"invalid_request_error","message":%s},"received_headers":%s}`, m, h), "/", `\/`)
		} else {
			var names []string
			for k := range r.Header {
				names = append(names, k)
			}
			sort.Strings(names)
			var b strings.Builder
			b.WriteString("400 Bad Request\n")
			for _, k := range names {
				if k != "Authorization" {
					fmt.Fprintf(&b, "%s: %s\n", k, strings.Join(r.Header[k], ", "))
				}
			}
			line := "Authorization: " + r.Header.Get("Authorization")
			b.WriteString(strings.Repeat(".", max(0, 1024-20-b.Len()-len("Authorization: "))))
			b.WriteString(line + "\n")
			body = b.String()
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, body)
	}))
	t.Cleanup(es.srv.Close)
	return es
}

func (es *echoServer) signatures() []string {
	es.mu.Lock()
	defer es.mu.Unlock()
	return slices.Clone(es.sigs)
}

// leaks lists the secrets found in texts: each secret whole, and any 12
// characters of it in a row (a half kept by a cut is a leak too).
func leaks(texts []string, secrets ...string) []string {
	var found []string
	for _, s := range secrets {
		for i := 0; i+12 <= len(s); i++ {
			part := s[i : i+12]
			for _, form := range []string{part, strings.ReplaceAll(part, "/", `\/`)} {
				for _, t := range texts {
					if strings.Contains(t, form) {
						found = append(found, fmt.Sprintf("%q (of %q) in %q", form, s, t))
					}
				}
			}
		}
	}
	return found
}

// storedTexts is every column of every row of the tables the relay writes
// what a destination answered to (outbox_attempts) and its errors (outbox,
// forward_destinations, and stripe_pushes beside them), as text.
func storedTexts(t *testing.T, e *testenv.Env) []string {
	t.Helper()
	var out []string
	for _, table := range []string{"outbox_attempts", "outbox", "forward_destinations", "stripe_pushes"} {
		rows, err := e.DB.Read.Queryx(`SELECT * FROM ` + table)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			m := map[string]any{}
			if err := rows.MapScan(m); err != nil {
				t.Fatal(err)
			}
			for col, v := range m {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				out = append(out, fmt.Sprintf("%s.%s=%v", table, col, v))
			}
		}
		rows.Close()
	}
	return out
}

// adminTexts is what the admin API's forwarding views answer for every
// message (attempts, messages, status), as serve mounts them.
func adminTexts(t *testing.T, e *testenv.Env) []string {
	t.Helper()
	mux := http.NewServeMux()
	(&admin.Forward{DB: e.DB, Writer: e.Writer, Destinations: forward.Names(e.Config.OutboxDestinations()),
		Secrets: forward.Secrets(e.Config), Now: time.Now}).Routes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	get := func(path string) string {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return string(b)
	}
	out := []string{get("/v1/forward/status"), get("/v1/forward/messages?limit=1000")}
	rows, err := e.DB.ListOutbox(context.Background(), schema.OutboxFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		out = append(out, get("/v1/forward/messages/"+url.PathEscape(r.MessageID)+"/attempts"))
	}
	return out
}

// A destination and an api_base that echo the request back in a 400: no
// secret the relay sent (the Stripe key, the destination's secret, its URL's
// password and basic auth, the signatures) is stored in any column, or shown
// by the admin API, on either backend.
func TestEchoedSecretsAreNotStored(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		t.Run("destination", func(t *testing.T) {
			es := newEchoServer(t, newSecret)
			u, _ := url.Parse(es.srv.URL)
			u.User = url.UserPassword(urlUser, urlPassword)
			d := destination("app", u.String(), newSecret)
			e := testenv.New(t, testenv.Options{Backend: backend, RealTime: true, Edits: []func(*config.Config){func(c *config.Config) {
				c.Destinations = []config.Destination{d}
			}}})
			r := &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: e.Config.Destinations, Log: slog.New(slog.DiscardHandler),
				Poll: 50 * time.Millisecond, Sole: true}
			if err := r.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			if res := e.Send("evt_echo", testenv.UsageBody("cus_1", "api_requests", "1")); res.Code != 200 {
				t.Fatalf("send: %d", res.Code)
			}
			await.Eventually(t, 15*time.Second, "four failed attempts", func() bool {
				return e.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE status_code = 400`) >= 4
			})
			r.Close()
			secrets := append([]string{strings.TrimPrefix(newSecret, "whsec_"), urlPassword,
				base64.StdEncoding.EncodeToString([]byte(urlUser + ":" + urlPassword))}, es.signatures()...)
			stored := storedTexts(t, e)
			if !slices.ContainsFunc(stored, func(s string) bool { return strings.Contains(s, "X-Hookledger-Event-Id") }) {
				t.Fatalf("the echoed headers are not stored at all: %q", stored)
			}
			for _, l := range leaks(stored, secrets...) {
				t.Errorf("stored: %s", l)
			}
			for _, l := range leaks(adminTexts(t, e), secrets...) {
				t.Errorf("admin API: %s", l)
			}
		})
		t.Run("stripe", func(t *testing.T) {
			es := newEchoServer(t, "")
			e := testenv.New(t, testenv.Options{Backend: backend, RealTime: true,
				Edits: []func(*config.Config){stripeConfig(es.srv.URL, ledger.StripeStream, "1")}})
			r := &forward.Relay{DB: e.DB, Writer: e.Writer, Stripe: e.Config.Stripe, Pushes: e.DB, Poll: 50 * time.Millisecond, Sole: true,
				Log: slog.New(slog.DiscardHandler)}
			if err := r.Open(context.Background()); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"evt_s1", "evt_s2"} { // one answer of each kind
				if res := e.Send(id, testenv.UsageBody("cus_1", "api_requests", "1")); res.Code != 200 {
					t.Fatalf("send: %d", res.Code)
				}
			}
			await.Eventually(t, 15*time.Second, "both pushes dead (400)", func() bool { return rowsPushed(e, "dead") == 2 })
			r.Close()
			stored := storedTexts(t, e)
			if !slices.ContainsFunc(stored, func(s string) bool {
				return strings.Contains(s, "Idempotency-Key") || strings.Contains(s, "User-Agent")
			}) {
				t.Fatalf("the echoed headers are not stored at all: %q", stored)
			}
			for _, l := range leaks(stored, stripeKey[len("sk_test_"):]) {
				t.Errorf("stored: %s", l)
			}
			for _, l := range leaks(adminTexts(t, e), stripeKey[len("sk_test_"):]) {
				t.Errorf("admin API: %s", l)
			}
		})
	})
}

// A row an older version stored whole (the response quoting the key and the
// destination's secret) is shown redacted by every view: with the config's
// secrets, and by shape alone for a Stripe key rotated since (not in the
// config any more).
func TestOldRowsAreShownRedacted(t *testing.T) {
	const rotated = "sk_live_51OldKeyRotatedSinceAndNotInTheConfig"
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		u := "http://" + urlUser + ":" + urlPassword + "@127.0.0.1:1/in"
		e := testenv.New(t, testenv.Options{Backend: backend, RealTime: true, Edits: []func(*config.Config){
			stripeConfig("http://127.0.0.1:1", ledger.StripeStream, "1"),
			func(c *config.Config) { c.Destinations = []config.Destination{destination("app", u, newSecret)} },
		}})
		if res := e.Send("evt_old", testenv.UsageBody("cus_1", "api_requests", "1")); res.Code != 200 {
			t.Fatalf("send: %d", res.Code)
		}
		ctx := context.Background()
		msgs, err := e.DB.ListOutbox(ctx, schema.OutboxFilter{})
		if err != nil || len(msgs) != 2 {
			t.Fatalf("%d messages (%v), want the destination's and the push", len(msgs), err)
		}
		// As an older version recorded an echo: whole, the key in clear.
		echo := fmt.Sprintf(`{"headers":{"Authorization":"Bearer %s","X-Old":"Bearer %s"},"secret":"%s","url":"%s"}`,
			stripeKey, rotated, strings.ReplaceAll(newSecret, "/", `\/`), u)
		now := time.Now().UnixMilli()
		err = e.Writer.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
			var rs []schema.OutboxResult
			for _, m := range msgs {
				rs = append(rs, schema.OutboxResult{ID: m.ID, Status: schema.OutboxDead, AttemptedAt: now, NextAttemptAt: now,
					StatusCode: 400, Response: []byte(echo), Error: "HTTP 400: Bearer " + stripeKey})
			}
			if err := tx.Outbox().RecordOutboxResults(ctx, rs); err != nil {
				return err
			}
			return tx.Outbox().SaveBackoff(ctx, schema.DestinationState{Name: "app", Failures: 1, LastError: "HTTP 400: " + newSecret, UpdatedAt: now})
		}))
		if err != nil {
			t.Fatal(err)
		}
		if l := leaks(storedTexts(t, e), stripeKey[8:]); len(l) == 0 {
			t.Fatal("the old row does not hold the key: the test stores nothing to redact")
		}
		secrets := []string{stripeKey[8:], rotated[8:], strings.TrimPrefix(newSecret, "whsec_"), urlPassword}

		shown := forward.Secrets(e.Config)
		var texts []string
		for _, m := range msgs {
			as, err := forward.Attempts(ctx, e.DB, m.MessageID, shown)
			if err != nil || len(as) != 1 || !strings.Contains(as[0].Response, "X-Old") {
				t.Fatalf("attempts of %s: %+v %v", m.MessageID, as, err)
			}
			b, _ := json.Marshal(as)
			texts = append(texts, string(b))
		}
		ms, err := forward.List(ctx, e.DB, schema.OutboxFilter{}, shown)
		st, err2 := forward.Status(ctx, e.DB, forward.Names(e.Config.OutboxDestinations()), shown, time.Now())
		if err != nil || err2 != nil {
			t.Fatal(err, err2)
		}
		b, _ := json.Marshal([]any{ms, st})
		texts = append(texts, string(b))
		texts = append(texts, adminTexts(t, e)...)
		for _, l := range leaks(texts, secrets...) {
			t.Errorf("shown: %s", l)
		}

		// Without the config's secrets, what has a credential's shape is
		// still redacted.
		as, err := forward.Attempts(ctx, e.DB, msgs[0].MessageID, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ = json.Marshal(as)
		for _, l := range leaks([]string{string(b)}, stripeKey[8:], rotated[8:], strings.TrimPrefix(newSecret, "whsec_")) {
			t.Errorf("shown without the config: %s", l)
		}
	})
}
