package testenv

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
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
)

// Secret is the Standard Webhooks secret (base64 after whsec_) of the
// zero-config "default" provider New configures when Options.Config is nil.
const Secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// DefaultNow is where an Env's clock starts unless Options.Now says otherwise.
var DefaultNow = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Options say how New builds an Env; the zero value is the zero-config
// receiver (the "default" standard provider and the usage.recorded mapping)
// in a fresh t.TempDir().
type Options struct {
	// Dir is the data directory, holding the database file; default
	// t.TempDir().
	Dir string
	// Config is the configuration; default config.Default(Dir) with Secret
	// in HOOKLEDGER_SECRET.
	Config *config.Config
	// Edits change the configuration, in order, before anything opens.
	Edits []func(*config.Config)
	// Now is the clock's start; default DefaultNow.
	Now time.Time
	// RealTime runs the writer and the handler on time.Now instead of the
	// Clock (Env.Clock is nil), for tests that sign with the real clock or
	// time what they do.
	RealTime bool
	// Writer, when set, configures the writer before it opens (its hooks are
	// read by the writer goroutine).
	Writer func(*custody.Writer)
	// HandlerVersion is what receipts record; default "test".
	HandlerVersion string
	// NoServer leaves out the configuration, the handler and the listener:
	// a database and a writer only.
	NoServer bool
	// Backend is the storage backend: "sqlite" (or empty), a file in Dir; or
	// "postgres", a fresh database on the test server (PostgresDatabase).
	Backend string
}

// Env is hookledger's write path on a real database (a SQLite file, or
// PostgreSQL with Options.Backend): the database, a
// running writer, and (unless Options.NoServer) the real webhook handler
// behind a real HTTP listener, all on one controllable clock (unless
// Options.RealTime). t.Cleanup closes it.
type Env struct {
	T      testing.TB
	Dir    string
	Config *config.Config
	Clock  *Clock
	DB     *schema.DB
	Writer *custody.Writer
	Server *receiver.Server
	HTTP   *httptest.Server

	opts Options
	now  func() time.Time // Clock.Now, or time.Now
	path string
	open bool
}

// New opens an Env as o says.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Now.IsZero() {
		o.Now = DefaultNow
	}
	if o.HandlerVersion == "" {
		o.HandlerVersion = "test"
	}
	e := &Env{T: t, Dir: o.Dir, Config: o.Config, opts: o, now: time.Now}
	if !o.RealTime {
		e.Clock = NewClock(o.Now)
		e.now = e.Clock.Now
	}
	e.path = filepath.Join(e.Dir, schema.FileName)
	if o.Backend == "" {
		o.Backend = os.Getenv(BackendEnv)
	}
	if o.Backend == "postgres" {
		e.path = PostgresDatabase(t)
	}
	if !o.NoServer {
		if e.Config == nil {
			t.Setenv("HOOKLEDGER_SECRET", Secret)
			cfg, _, err := config.Default(e.Dir)
			if err != nil {
				t.Fatal(err)
			}
			e.Config = cfg
		}
		for _, edit := range o.Edits {
			edit(e.Config)
		}
	}
	e.Reopen()
	t.Cleanup(e.Close)
	return e
}

// Reopen opens the database, the writer and the server again, as a restarted
// process would; it closes them first if they are open.
func (e *Env) Reopen() {
	t := e.T
	t.Helper()
	e.Close()
	db, err := schema.Open(context.Background(), e.path, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := writer.New(db, e.Config)
	w.Now = e.now
	if e.opts.Writer != nil {
		e.opts.Writer(w)
	}
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.DB, e.Writer, e.open = db, w, true
	if e.opts.NoServer {
		return
	}
	providers, err := receiver.NewProviders(e.Config.Providers)
	if err != nil {
		t.Fatal(err)
	}
	e.Server = &receiver.Server{
		Providers:      providers,
		Mapper:         e.Mapper(),
		Custody:        w,
		HandlerVersion: e.opts.HandlerVersion,
		Log:            slog.New(slog.DiscardHandler),
		Now:            e.now,
	}
	e.Server.API = e.api()
	// As serve: entitlement checks on the API's listener, from the config's plans.
	e.Server.Entitlements = &entitle.Checker{DB: db, Policy: entitle.NewPolicy(e.Config.Catalog, e.Config.Customers.DefaultPlan), Now: e.now}
	mux := http.NewServeMux()
	e.Server.Routes(mux)
	e.HTTP = httptest.NewServer(mux)
}

// Close stops the listener, the writer and the database, in that order; a
// second Close does nothing.
func (e *Env) Close() {
	if !e.open {
		return
	}
	e.open = false
	if e.HTTP != nil {
		e.HTTP.Close()
	}
	e.Writer.Close()
	e.DB.Close()
}

// Database is what the Env opened: the SQLite file, or the PostgreSQL
// database's URL; a second writer opened on it is a second receiver.
func (e *Env) Database() string { return e.path }

// Now is the time the writer and the handler see.
func (e *Env) Now() time.Time { return e.now() }

// Mapper maps deliveries as the configuration says.
func (e *Env) Mapper() *ledger.Mapper { return ledger.NewMapper(e.Config.Usage, e.Config.MeterNames()) }

// Provider is the configured provider called name, or fails the test.
func (e *Env) Provider(name string) config.Provider {
	e.T.Helper()
	for _, p := range e.Config.Providers {
		if p.Name == name {
			return p
		}
	}
	e.T.Fatalf("no provider %s", name)
	return config.Provider{}
}

// Sign returns the headers provider's scheme sends with body, signed with its
// first secret at the given time.
func (e *Env) Sign(provider, id, typ string, body []byte, at time.Time) http.Header {
	e.T.Helper()
	p := e.Server.Providers[provider]
	if p == nil {
		e.T.Fatalf("no provider %s", provider)
	}
	h := http.Header{}
	p.Scheme.Sign(h, body, p.Keys[0], id, typ, at)
	return h
}

// Post sends body with headers h to provider's webhook URL and returns the
// status code and the reply body.
func (e *Env) Post(provider string, h http.Header, body []byte) (int, []byte) {
	e.T.Helper()
	req, err := http.NewRequest(http.MethodPost, e.HTTP.URL+"/webhooks/"+provider, bytes.NewReader(body))
	if err != nil {
		e.T.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		e.T.Fatal(err)
	}
	return resp.StatusCode, raw
}

// Deliver signs body as provider does, now, and posts it.
func (e *Env) Deliver(provider, id, typ string, body []byte) (int, []byte) {
	e.T.Helper()
	return e.Post(provider, e.Sign(provider, id, typ, body, e.Now()), body)
}

// Reply is the webhook handler's JSON answer.
type Reply struct {
	Accepted  bool           `json:"accepted"`
	Duplicate bool           `json:"duplicate"`
	Status    custody.Status `json:"status,omitempty"`
	EventID   string         `json:"event_id,omitempty"`
	Error     string         `json:"error,omitempty"`
}

// Response is a status code and the reply it came with.
type Response struct {
	Code int
	Body Reply
}

// PostReply is Post for a reply that must be the handler's JSON.
func (e *Env) PostReply(provider string, h http.Header, body []byte) Response {
	e.T.Helper()
	code, raw := e.Post(provider, h, body)
	r := Response{Code: code}
	if err := json.Unmarshal(raw, &r.Body); err != nil {
		e.T.Fatalf("response %d is not JSON: %q", code, raw)
	}
	return r
}

// SignDefault signs body for the "default" provider, now.
func (e *Env) SignDefault(id string, body []byte) http.Header {
	e.T.Helper()
	return e.Sign("default", id, "", body, e.Now())
}

// Send delivers body to the "default" provider as event id, now.
func (e *Env) Send(id string, body []byte) Response {
	e.T.Helper()
	return e.PostReply("default", e.SignDefault(id, body), body)
}

// UsageBody is the documented generic usage event.
func UsageBody(customer, meter, quantity string) []byte {
	return fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":%q,"meter":%q,"quantity":%s,"occurred_at":"2026-11-29T10:00:00Z"}}`,
		customer, meter, quantity)
}

// Count is the number of rows in table.
func (e *Env) Count(table string) int {
	e.T.Helper()
	n, err := e.DB.CountRows(context.Background(), table)
	if err != nil {
		e.T.Fatal(err)
	}
	return int(n)
}

// Int is the one integer query returns.
func (e *Env) Int(query string, args ...any) int {
	e.T.Helper()
	var n int
	if err := e.DB.Read.Get(&n, query, args...); err != nil {
		e.T.Fatal(err)
	}
	return n
}

// Rows counts receipts, delivery attempts (wherever stored: Attempts) and
// usage rows, what every delivery writes.
func (e *Env) Rows() [3]int {
	e.T.Helper()
	return [3]int{e.Count("receipts"), e.Attempts(), e.Count("metered_usage")}
}

// Totals sums usage per customer in micro-units (the tests' totals fit a
// Quantity).
func (e *Env) Totals() map[string]ledger.Quantity {
	e.T.Helper()
	rep, err := ledger.Query(context.Background(), e.DB, ledger.UsageQuery{})
	if err != nil {
		e.T.Fatal(err)
	}
	sums := map[string]ledger.Total{}
	for _, l := range rep.Lines {
		sums[l.Customer] = sums[l.Customer].Plus(l.Quantity)
	}
	m := map[string]ledger.Quantity{}
	for c, t := range sums {
		q, ok := t.Quantity()
		if !ok {
			e.T.Fatalf("total of %s is %s, beyond a Quantity", c, t)
		}
		m[c] = q
	}
	return m
}

// Exec runs a statement on the write handle, as a test that tampers with the
// file does.
func (e *Env) Exec(query string, args ...any) {
	e.T.Helper()
	if _, err := e.DB.Write.Exec(query, args...); err != nil {
		e.T.Fatal(err)
	}
}

// PruneBody prunes the body of provider's receipt for eventID as
// retention.payload does (schema.Batch.PruneReceipts and MarkBodiesPruned,
// through the writer), and no other receipt's.
func (e *Env) PruneBody(provider, eventID string) {
	e.T.Helper()
	var rc schema.Receipt
	err := e.DB.View(context.Background(), func(tx *schema.ReadTx) error {
		rs, err := tx.EventReceipts(context.Background(), provider, []string{eventID})
		if err == nil && len(rs) != 1 {
			err = fmt.Errorf("no receipt %s/%s", provider, eventID)
		}
		if err == nil {
			rc = rs[0]
		}
		return err
	})
	if err != nil {
		e.T.Fatal(err)
	}
	before := rc.ReceivedAt + 1
	err = e.Writer.Submit(context.Background(), custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		if pruned, _, err := tx.Retention().PruneReceipts(ctx, schema.PruneBodies, []int64{rc.ID}, before); err != nil || len(pruned) != 1 {
			return fmt.Errorf("prune %s/%s: %v (pruned %v)", provider, eventID, err, pruned)
		}
		return tx.Retention().MarkBodiesPruned(ctx, before)
	}))
	if err != nil {
		e.T.Fatal(err)
	}
}

// Clock is a time the test sets, safe to read from the writer goroutine.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock is a clock stopped at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's reading.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set stops the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// UsageYAML is the documented generic usage mapping (the shape UsageBody
// sends), as the end of a configuration file.
const UsageYAML = `usage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
`
