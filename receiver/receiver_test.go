package receiver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/scheme"
)

// testSecret is a Standard Webhooks secret (base64 after whsec_).
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// env is a receiver on a real SQLite file behind a real HTTP listener.
type env struct {
	t      *testing.T
	db     *schema.DB
	writer *custody.Writer
	srv    *Server
	http   *httptest.Server
	now    time.Time

	configure func(*custody.Writer) // see newEnvWithWriter
}

type envOpt func(*config.Config)

// newEnv starts a receiver with one provider per given config (default: the
// zero-config "default" standard provider and usage.recorded mapping).
func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	return newEnvWithWriter(t, nil, opts...)
}

// newEnvWithWriter is newEnv with configure applied to the writer before it
// opens (its hooks are read by the writer goroutine).
func newEnvWithWriter(t *testing.T, configure func(*custody.Writer), opts ...envOpt) *env {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOOKLEDGER_SECRET", testSecret)
	cfg, _, err := config.Default(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range opts {
		o(cfg)
	}
	e := &env{t: t, now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), configure: configure}
	e.open(cfg, filepath.Join(dir, "hookledger.db"))
	return e
}

func (e *env) open(cfg *config.Config, path string) {
	t := e.t
	db, err := schema.Open(context.Background(), path, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	providers, err := NewProviders(cfg.Providers)
	if err != nil {
		t.Fatal(err)
	}
	w := custody.NewWriter(db)
	w.Now = func() time.Time { return e.now }
	if e.configure != nil {
		e.configure(w)
	}
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.db, e.writer = db, w
	e.srv = &Server{
		Providers:      providers,
		Mapper:         ledger.NewMapper(cfg.Usage, cfg.MeterNames()),
		Custody:        w,
		HandlerVersion: "test",
		Log:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		Now:            func() time.Time { return e.now },
	}
	mux := http.NewServeMux()
	e.srv.Routes(mux)
	e.http = httptest.NewServer(mux)
	t.Cleanup(e.close)
}

func (e *env) close() {
	if e.http == nil {
		return
	}
	e.http.Close()
	e.writer.Close()
	e.db.Close()
	e.http = nil
}

// usageBody is the documented generic usage event.
func usageBody(customer, meter, quantity string) []byte {
	return []byte(fmt.Sprintf(`{"type":"usage.recorded","data":{"customer":%q,"meter":%q,"quantity":%s,"occurred_at":"2026-11-29T10:00:00Z"}}`,
		customer, meter, quantity))
}

// sign signs body for the default provider as Standard Webhooks would.
func (e *env) sign(id string, body []byte) http.Header {
	s, _ := scheme.New("standard", scheme.HMACOptions{})
	key, err := s.Key(testSecret)
	if err != nil {
		e.t.Fatal(err)
	}
	h := http.Header{}
	s.Sign(h, body, key, id, "", e.now)
	return h
}

type response struct {
	Code int
	Body reply
}

func (e *env) post(provider string, h http.Header, body []byte) response {
	req, err := http.NewRequest(http.MethodPost, e.http.URL+"/webhooks/"+provider, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var r response
	r.Code = resp.StatusCode
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &r.Body); err != nil {
		e.t.Fatalf("response %d is not JSON: %q", resp.StatusCode, raw)
	}
	return r
}

func (e *env) send(id string, body []byte) response {
	return e.post("default", e.sign(id, body), body)
}

// count returns the row count of a table.
func (e *env) count(table string) int {
	var n int
	if err := e.db.Read.Get(&n, "SELECT COUNT(*) FROM "+table); err != nil {
		e.t.Fatal(err)
	}
	return n
}

// counts returns receipts, attempts and usage rows.
func (e *env) counts() [3]int {
	return [3]int{e.count("receipts"), e.count("delivery_attempts"), e.count("metered_usage")}
}

// totals sums usage per customer in micro-units.
func (e *env) totals() map[string]ledger.Quantity {
	rep, err := ledger.Query(context.Background(), e.db, ledger.UsageQuery{})
	if err != nil {
		e.t.Fatal(err)
	}
	m := map[string]ledger.Quantity{}
	for _, l := range rep.Lines {
		m[l.Customer] += l.Quantity
	}
	return m
}
