package dispute

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// Secrets of the test providers. acme's is full of shell metacharacters, so
// the README's openssl commands are shown to quote it right.
var secrets = map[string]string{
	"default": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"stripe":  "whsec_stripe5a1f0c2e9b7d4e1f",
	"github":  "gh-webhook-secret-0123456789",
	"shopify": "shpss_0123456789abcdef0123",
	"slack":   "8f742231b10e8888abcd99yyyzzz85a5",
	"acme":    `acme's "quoted" secret $HOME`,
}

// providerNames lists every provider, one per scheme.
var providerNames = []string{"default", "stripe", "github", "shopify", "slack", "acme"}

const configYAML = `
providers:
  - name: default
    scheme: standard
    secrets: ["%s"]
  - name: stripe
    scheme: stripe
    secrets: ["%s"]
  - name: github
    scheme: github
    secrets: ["%s"]
  - name: shopify
    scheme: shopify
    secrets: ["%s"]
  - name: slack
    scheme: slack
    secrets: ["%s"]
  - name: acme
    scheme: hmac
    secrets: ['%s']
    hmac:
      header: X-Acme-Signature
      encoding: base64
      prefix: "sha256="
      timestamp_header: X-Acme-Timestamp
      id_header: X-Acme-Event
      template: "{timestamp}:{id}:{body}|end"
` + testenv.UsageYAML + `meters:
  - name: api_requests
    aggregation: sum
    unit: requests
  - name: seats
    aggregation: max
    unit: seats
`

// testConfig parses the test configuration; edit changes the text first
// (rotating a secret, dropping a provider).
func testConfig(t testing.TB, dir string, edit func(map[string]string)) *config.Config {
	t.Helper()
	s := map[string]string{}
	for k, v := range secrets {
		s[k] = v
	}
	if edit != nil {
		edit(s)
	}
	quote := func(v string) string { b, _ := json.Marshal(v); return string(b[1 : len(b)-1]) }
	src := fmt.Sprintf(configYAML, quote(s["default"]), quote(s["stripe"]), quote(s["github"]), quote(s["shopify"]), quote(s["slack"]),
		// single-quoted YAML: a quote is doubled
		bytes.ReplaceAll([]byte(s["acme"]), []byte("'"), []byte("''")))
	cfg, err := config.Parse([]byte(src), dir)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, src)
	}
	return cfg
}

// env is the real receiver on a real SQLite file behind a real HTTP listener,
// with every scheme configured.
type env struct {
	*testenv.Env
	lag  time.Duration // how long before e.Now() deliveries are signed
	reqs int
}

func newEnv(t testing.TB) *env {
	t.Helper()
	dir := t.TempDir()
	return &env{Env: testenv.New(t, testenv.Options{Dir: dir, Config: testConfig(t, dir, nil),
		Now: time.Date(2026, 10, 20, 12, 0, 0, 0, time.UTC), HandlerVersion: "test-1"})}
}

// body is a usage event as each provider would shape it.
func body(provider, id, customer, meter, qty, occurred string) []byte {
	data := fmt.Sprintf(`"data":{"customer":%q,"meter":%q,"quantity":%s,"occurred_at":%q}`, customer, meter, qty, occurred)
	switch provider {
	case "stripe":
		return fmt.Appendf(nil, `{"id":%q,"object":"event","type":"usage.recorded",%s}`, id, data)
	case "slack":
		return fmt.Appendf(nil, `{"event_id":%q,"type":"event_callback","event":{"type":"usage.recorded"},%s}`, id, data)
	}
	return fmt.Appendf(nil, `{"type":"usage.recorded",%s}`, data)
}

// deliver signs b as provider does, e.lag before now, and posts it; the
// request id and user agent are fixed so traces are reproducible.
func (e *env) deliver(provider, id string, b []byte) int {
	e.T.Helper()
	h := e.Sign(provider, id, "usage.recorded", b, e.Now().Add(-e.lag))
	e.reqs++
	h.Set("X-Request-Id", fmt.Sprintf("req-%d", e.reqs))
	h.Set("User-Agent", provider+"-webhooks/1.0")
	code, _ := e.Post(provider, h, b)
	return code
}

// send delivers a usage event and insists it was accepted.
func (e *env) send(provider, id, customer, qty, occurred string) {
	e.T.Helper()
	if code := e.deliver(provider, id, body(provider, id, customer, "api_requests", qty, occurred)); code != http.StatusOK {
		e.T.Fatalf("deliver %s/%s: status %d", provider, id, code)
	}
}

// close closes a month for every customer at e.Now().
func (e *env) close(month string) *invoice.CloseResult {
	e.T.Helper()
	p, err := ledger.MonthPeriod(month, time.UTC)
	if err != nil {
		e.T.Fatal(err)
	}
	res, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: p, All: true, Grace: time.Hour,
		Meters: ledger.NewMeters(e.Config.Meters), Now: e.Now})
	if err != nil {
		e.T.Fatal(err)
	}
	return res
}

// adjust appends an adjustment through the writer, as `hookledger adjust` does.
func (e *env) adjust(a ledger.Adjustment) *ledger.Row {
	e.T.Helper()
	var row *ledger.Row
	err := e.Writer.Submit(context.Background(), custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		r, err := a.Row(ctx, tx.Refs(), tx.Now())
		if err != nil {
			return err
		}
		row = r
		return tx.Append(ctx, r)
	}))
	if err != nil {
		e.T.Fatal(err)
	}
	return row
}

// tracer traces with the configuration as it is, or as edit changes it.
func (e *env) tracer(edit func(map[string]string)) *Tracer {
	e.T.Helper()
	cfg := e.Config
	if edit != nil {
		cfg = testConfig(e.T, e.Dir, edit)
	}
	v, err := NewVerifier(cfg.Providers)
	if err != nil {
		e.T.Fatal(err)
	}
	return &Tracer{DB: e.DB, Verifier: v, Meters: ledger.NewMeters(cfg.Meters)}
}

func (e *env) trace(target string) *Trace {
	e.T.Helper()
	tr, err := e.tracer(nil).Trace(context.Background(), target)
	if err != nil {
		e.T.Fatalf("trace %s: %v", target, err)
	}
	return tr
}
