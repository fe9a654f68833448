package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// invoicingConfig prices api_requests at 0.01 EUR with a 10.00 fee and
// closes Berlin's months 72h after they end.
const invoicingConfig = `data: %s
providers:
  - name: default
    scheme: standard
    secrets: ["` + testenv.Secret + `"]
usage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
meters:
  - name: api_requests
plans:
  - name: pro
    currency: EUR
    effective_from: 2026-01-01
    fee: "10.00"
    prices:
      - {meter: api_requests, model: unit, unit: "0.01"}
customers:
  default_plan: pro
invoicing:
  close: monthly
  tz: %s
  grace: 72h
`

// schedEnv is a database with a running writer and the webhook handler,
// configured by invoicingConfig, on a clock the test sets.
type schedEnv struct {
	*testenv.Env
	logs *testenv.Buffer
	met  *metrics.Metrics
	seq  int
}

func newSchedEnv(t *testing.T, backend, tz string) *schedEnv {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "hookledger.yml")
	if err := os.WriteFile(path, fmt.Appendf(nil, invoicingConfig, filepath.Join(dir, "data"), tz), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := testenv.New(t, testenv.Options{Dir: filepath.Join(dir, "data"), Config: cfg, Backend: backend, Now: time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)})
	return &schedEnv{Env: e, logs: &testenv.Buffer{}, met: metrics.New(metrics.Options{})}
}

// scheduler is what serve runs, on the Env's database and clock; a second
// call for the same Env shares the metrics (another scheduler after a
// restart counts into a fresh registry: see restart).
func (e *schedEnv) scheduler(met *metrics.Invoicing) *invoiceScheduler {
	return &invoiceScheduler{DB: e.DB, Config: e.Config, Log: slog.New(slog.NewJSONHandler(e.logs, nil)), Metrics: met, Now: e.Clock.Now}
}

// use records quantity api_requests for customer at the event time at.
func (e *schedEnv) use(customer string, quantity int, at string) {
	e.T.Helper()
	e.seq++
	body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":%q,"meter":"api_requests","quantity":%d,"occurred_at":%q}}`, customer, quantity, at)
	if r := e.Send(fmt.Sprintf("evt_%d", e.seq), body); r.Code != 200 || r.Body.Status != "applied" {
		e.T.Fatalf("send: %d %+v", r.Code, r.Body)
	}
}

// closes lists the closes as "CUSTOMER PERIOD TZ", in id order ("*" for all customers).
func (e *schedEnv) closes() []string {
	e.T.Helper()
	cs, err := e.DB.PeriodCloses(context.Background(), "")
	if err != nil {
		e.T.Fatal(err)
	}
	slices.SortFunc(cs, func(a, b schema.PeriodClose) int { return cmp.Compare(a.ID, b.ID) })
	var out []string
	for _, c := range cs {
		who := c.Customer
		if who == "" {
			who = "*"
		}
		out = append(out, who+" "+c.Period+" "+c.TZ)
	}
	return out
}

// invoices lists the invoices as "PERIOD CUSTOMER TOTAL", in id order.
func (e *schedEnv) invoices() []string {
	e.T.Helper()
	invs, err := invoice.ListInvoices(context.Background(), e.DB, invoice.InvoiceFilter{})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for _, inv := range invs {
		out = append(out, inv.Period+" "+inv.Customer+" "+inv.Money.Total+" "+inv.Money.Currency)
	}
	return out
}

func (e *schedEnv) at(s string) {
	e.T.Helper()
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		e.T.Fatal(err)
	}
	e.Clock.Set(t)
}

// metric is the value of the series name{labels} in reg (-1 when absent).
func metric(t *testing.T, m *metrics.Metrics, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, s := range mf.GetMetric() {
			if hasLabels(s, labels) {
				if s.Counter != nil {
					return s.Counter.GetValue()
				}
				return s.Gauge.GetValue()
			}
		}
	}
	return -1
}

func hasLabels(s *dto.Metric, kv []string) bool {
	for i := 0; i+1 < len(kv); i += 2 {
		found := false
		for _, l := range s.GetLabel() {
			if l.GetName() == kv[i] && l.GetValue() == kv[i+1] {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Which months a check closes: the latest one past its grace when nothing
// was closed for all customers yet, else every month since the latest such
// close, oldest first; months in the configured zone.
func TestDuePeriods(t *testing.T) {
	berlin, err := ledger.LoadZone("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	closed := func(label string, loc *time.Location) *schema.PeriodClose {
		p, err := ledger.MonthPeriod(label, loc)
		if err != nil {
			t.Fatal(err)
		}
		return &schema.PeriodClose{Period: label, TZ: loc.String(), PeriodStart: p.Start.UnixMilli(), PeriodEnd: p.End.UnixMilli()}
	}
	for _, c := range []struct {
		name  string
		last  *schema.PeriodClose
		now   string
		loc   *time.Location
		grace time.Duration
		want  string
	}{
		// November ends 2026-11-30T23:00Z in Berlin: closable from 2026-12-03T23:00Z.
		{"grace not over: the month before", nil, "2026-12-03T22:59:59Z", berlin, 72 * time.Hour, "2026-10"},
		{"grace over, to the millisecond", nil, "2026-12-03T23:00:00Z", berlin, 72 * time.Hour, "2026-11"},
		{"no grace, at the end", nil, "2026-12-01T00:00:00Z", time.UTC, 0, "2026-11"},
		{"no grace, a millisecond before", nil, "2026-11-30T23:59:59.999Z", time.UTC, 0, "2026-10"},
		{"nothing closed yet: only the latest", nil, "2027-03-20T00:00:00Z", berlin, 72 * time.Hour, "2027-02"},
		{"up to date", closed("2026-11", berlin), "2026-12-20T00:00:00Z", berlin, 72 * time.Hour, ""},
		{"closed ahead by hand", closed("2026-12", berlin), "2026-12-20T00:00:00Z", berlin, 72 * time.Hour, ""},
		{"one behind", closed("2026-10", berlin), "2026-12-20T00:00:00Z", berlin, 72 * time.Hour, "2026-11"},
		{"down across three month ends: oldest first", closed("2026-09", berlin), "2027-01-05T00:00:00Z", berlin, 72 * time.Hour,
			"2026-10 2026-11 2026-12"},
		{"across a year end and DST", closed("2026-02", berlin), "2026-04-04T00:00:00Z", berlin, 72 * time.Hour, "2026-03"},
		// Closed in UTC, now Berlin: the first Berlin month starts before
		// the UTC close ended; its close reports the overlap (no gap).
		{"closed in another zone", closed("2026-09", time.UTC), "2026-11-20T00:00:00Z", berlin, 72 * time.Hour, "2026-10"},
	} {
		t.Run(c.name, func(t *testing.T) {
			now, err := time.Parse(time.RFC3339Nano, c.now)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range duePeriods(c.last, now, c.loc, c.grace) {
				if p.Zone != c.loc.String() || !p.End.Add(c.grace).After(p.Start) || p.End.Add(c.grace).After(now) {
					t.Errorf("%s: not a due month in %s: %v", c.now, c.loc, p)
				}
				got = append(got, p.Label)
			}
			if strings.Join(got, " ") != c.want {
				t.Errorf("due at %s: %q, want %q", c.now, strings.Join(got, " "), c.want)
			}
		})
	}
}

// The scheduled close on both backends: the latest ended month at the
// first check, nothing twice (also after a restart), then the months a
// stopped serve missed, oldest first; each close logged with its invoices
// and totals, and counted.
func TestScheduledClose(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSchedEnv(t, backend, "Europe/Berlin")
		ctx := context.Background()
		e.at("2026-11-20T00:00:00Z")
		e.use("cus_1", 100, "2026-09-10T10:00:00Z")
		e.use("cus_2", 50, "2026-10-05T10:00:00Z")
		e.use("cus_2", 7, "2026-10-31T22:30:00Z") // 23:30 in Berlin: October
		e.use("cus_2", 3, "2026-10-31T23:30:00Z") // 00:30 on 1 November in Berlin
		if err := customer.AddCustomer(ctx, e.DB, customer.Customer{ID: "cus_3", RecordedAt: e.Now()}, nil, e.Config.Catalog); err != nil {
			t.Fatal(err)
		}
		inv := e.met.WatchInvoicing()
		s := e.scheduler(inv)

		// Nothing closed yet: October only (September stays for a close by hand).
		s.check(ctx)
		equal(t, "closes after the first check", e.closes(), []string{"* 2026-10 Europe/Berlin"})
		equal(t, "invoices after the first check", e.invoices(), []string{
			"2026-10 cus_2 10.57 EUR", // 57 requests at 0.01 plus the fee
			"2026-10 cus_3 10.00 EUR", // registered, no usage: the fee
		})
		s.check(ctx)
		s.check(ctx)
		equal(t, "closes after checking again", e.closes(), []string{"* 2026-10 Europe/Berlin"})

		// A restart changes nothing; November's grace is not over.
		e.Reopen()
		e.at("2026-12-03T22:59:00Z")
		e.scheduler(inv).check(ctx)
		equal(t, "closes after a restart", e.closes(), []string{"* 2026-10 Europe/Berlin"})

		// Down from December until 10 January: November and December close, in order.
		e.at("2027-01-10T00:00:00Z")
		e.use("cus_1", 200, "2026-12-24T10:00:00Z")
		e.Reopen()
		e.scheduler(inv).check(ctx)
		equal(t, "closes after catching up", e.closes(), []string{"* 2026-10 Europe/Berlin", "* 2026-11 Europe/Berlin", "* 2026-12 Europe/Berlin"})
		equal(t, "invoices after catching up", e.invoices(), []string{
			"2026-10 cus_2 10.57 EUR",
			"2026-10 cus_3 10.00 EUR",
			"2026-11 cus_2 10.03 EUR",
			"2026-11 cus_3 10.00 EUR",
			"2026-12 cus_1 12.00 EUR",
			"2026-12 cus_3 10.00 EUR",
		})
		if n := e.Count("period_closes"); n != 3 {
			t.Errorf("%d period_closes rows, want 3", n)
		}

		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
			if strings.Contains(l, `"msg":"scheduled close"`) {
				lines = append(lines, l)
			}
		}
		for i, want := range []string{
			`"level":"INFO","msg":"scheduled close","period":"2026-10","tz":"Europe/Berlin","outcome":"closed","invoices":2,"lines":1,"totals":"EUR 20.57"`,
			`"level":"INFO","msg":"scheduled close","period":"2026-11","tz":"Europe/Berlin","outcome":"closed","invoices":2,"lines":1,"totals":"EUR 20.03"`,
			`"level":"INFO","msg":"scheduled close","period":"2026-12","tz":"Europe/Berlin","outcome":"closed","invoices":2,"lines":1,"totals":"EUR 22.00"`,
		} {
			if i >= len(lines) || !strings.Contains(lines[i], want) {
				t.Errorf("log line %d lacks %s\n%s", i, want, strings.Join(lines, "\n"))
			}
		}
		if len(lines) != 3 {
			t.Errorf("%d close log lines, want 3:\n%s", len(lines), strings.Join(lines, "\n"))
		}

		dec, _ := ledger.MonthPeriod("2026-12", s.Config.Invoicing.Location)
		for _, c := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"hookledger_invoice_scheduled_closes_total", []string{"outcome", "closed"}, 3},
			{"hookledger_invoice_scheduled_closes_total", []string{"outcome", "existing"}, 0},
			{"hookledger_invoice_scheduled_closes_total", []string{"outcome", "error"}, 0},
			{"hookledger_invoice_closed_through_timestamp_seconds", nil, float64(dec.End.Unix())},
			{"hookledger_invoice_last_close_timestamp_seconds", nil, float64(e.Now().Unix())},
		} {
			if got := metric(t, e.met, c.name, c.labels...); got != c.want {
				t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
			}
		}
	})
}

// A close made by hand for all customers counts as the latest: the
// schedule carries on after it. A close by hand for one customer does not,
// and the scheduled close skips that customer.
func TestScheduledCloseAfterHandCloses(t *testing.T) {
	e := newSchedEnv(t, "", "UTC")
	ctx := context.Background()
	e.at("2026-10-20T00:00:00Z")
	e.use("cus_1", 100, "2026-09-10T10:00:00Z")
	e.use("cus_2", 100, "2026-09-10T10:00:00Z")
	sep, _ := ledger.MonthPeriod("2026-09", time.UTC)
	if _, err := invoice.Close(ctx, e.DB, invoice.CloseRequest{Period: sep, Customer: "cus_1", Meters: ledger.NewMeters(e.Config.Meters), Now: e.Clock.Now}); err != nil {
		t.Fatal(err)
	}
	inv := e.met.WatchInvoicing()
	e.scheduler(inv).check(ctx)
	equal(t, "closes", e.closes(), []string{"cus_1 2026-09 UTC", "* 2026-09 UTC"})
	equal(t, "invoices", e.invoices(), []string{"2026-09 cus_1  ", "2026-09 cus_2 11.00 EUR"})

	aug, _ := ledger.MonthPeriod("2026-08", time.UTC)
	e2 := newSchedEnv(t, "", "UTC")
	e2.at("2026-12-20T00:00:00Z")
	if _, err := invoice.Close(ctx, e2.DB, invoice.CloseRequest{Period: aug, All: true, Meters: ledger.NewMeters(e2.Config.Meters), Now: e2.Clock.Now}); err != nil {
		t.Fatal(err)
	}
	e2.scheduler(e2.met.WatchInvoicing()).check(ctx)
	equal(t, "closes after a close by hand", e2.closes(), []string{"* 2026-08 UTC", "* 2026-09 UTC", "* 2026-10 UTC", "* 2026-11 UTC"})
}

// What goes wrong is logged as an error, counted, and retried at the next
// check; nothing later closes before it; a check cut short by shutdown
// leaves nothing and counts nothing.
func TestScheduledCloseErrors(t *testing.T) {
	ctx := context.Background()

	// September was closed in UTC; the schedule is Berlin's: October in
	// Berlin overlaps it. Refused at every check, and November waits.
	e := newSchedEnv(t, "", "Europe/Berlin")
	e.at("2026-10-20T00:00:00Z")
	sep, _ := ledger.MonthPeriod("2026-09", time.UTC)
	if _, err := invoice.Close(ctx, e.DB, invoice.CloseRequest{Period: sep, All: true, Meters: ledger.NewMeters(e.Config.Meters), Now: e.Clock.Now}); err != nil {
		t.Fatal(err)
	}
	inv := e.met.WatchInvoicing()
	e.at("2026-12-20T00:00:00Z")
	e.scheduler(inv).check(ctx)
	e.scheduler(inv).check(ctx)
	equal(t, "closes", e.closes(), []string{"* 2026-09 UTC"})
	if got := metric(t, e.met, "hookledger_invoice_scheduled_closes_total", "outcome", "error"); got != 2 {
		t.Errorf("errors counted: %v, want 2", got)
	}
	out := e.logs.String()
	for _, want := range []string{`"level":"ERROR","msg":"scheduled close","period":"2026-10","tz":"Europe/Berlin","outcome":"error"`,
		"period overlaps a differently bounded closed period", "set invoicing.tz to the zone closes were made in"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, `"period":"2026-11"`) {
		t.Errorf("November was tried before October closed:\n%s", out)
	}

	// The database cannot be read: an error, counted.
	e2 := newSchedEnv(t, "", "UTC")
	db, err := schema.Open(ctx, e2.Database(), schema.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := e2.scheduler(e2.met.WatchInvoicing())
	s.DB = db
	s.check(ctx)
	if got := metric(t, e2.met, "hookledger_invoice_scheduled_closes_total", "outcome", "error"); got != 1 {
		t.Errorf("storage error counted %v times, want 1", got)
	}
	if !strings.Contains(e2.logs.String(), `"level":"ERROR","msg":"scheduled close","error":"read closed periods: `) {
		t.Errorf("storage error not logged:\n%s", e2.logs.String())
	}

	// Shutdown: the check's context is cancelled; nothing closes, nothing is counted or logged as an error.
	e3 := newSchedEnv(t, "", "UTC")
	e3.at("2026-10-20T00:00:00Z")
	e3.use("cus_1", 1, "2026-09-10T10:00:00Z")
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	e3.scheduler(e3.met.WatchInvoicing()).check(cancelled)
	if n := e3.Count("period_closes"); n != 0 {
		t.Errorf("a cancelled check closed %d periods", n)
	}
	if got := metric(t, e3.met, "hookledger_invoice_scheduled_closes_total", "outcome", "error"); got != 0 || strings.Contains(e3.logs.String(), "ERROR") {
		t.Errorf("a cancelled check counted %v errors:\n%s", got, e3.logs.String())
	}
}

// Two receivers on one PostgreSQL database check at the same moment: both
// find the period open and close it, and the close's lock on the chain head
// makes one close it and the other find it closed (Existing) — one close,
// one set of invoices.
func TestScheduledCloseRaceOnPostgres(t *testing.T) {
	e := newSchedEnv(t, "postgres", "UTC")
	ctx := context.Background()
	e.at("2026-10-20T00:00:00Z")
	e.use("cus_1", 100, "2026-09-10T10:00:00Z")
	e.use("cus_2", 100, "2026-09-11T10:00:00Z")
	open := func() *schema.DB {
		db, err := schema.Open(ctx, e.Database(), schema.Options{MustExist: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	// A third session holds the chain head's row, as a receiver's batch
	// does, until both closes wait for it.
	holder := open()
	tx, err := holder.Write.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`SELECT ledger_id FROM chain_head WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	ms := []*metrics.Metrics{metrics.New(metrics.Options{}), metrics.New(metrics.Options{})}
	var wg sync.WaitGroup
	for i := range 2 {
		s := e.scheduler(ms[i].WatchInvoicing())
		s.DB = open() // a receiver of its own
		wg.Add(1)
		go func() { defer wg.Done(); s.check(ctx) }()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	deadline := time.Now().Add(30 * time.Second)
wait:
	for e.Int(`SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) < 2 {
		select {
		case <-done:
			t.Error("the closes ran without waiting for the chain head's lock")
			break wait
		default:
		}
		if time.Now().After(deadline) {
			tx.Rollback()
			t.Fatalf("the two closes did not both wait for the chain head; closes now: %v", e.closes())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	<-done
	equal(t, "closes", e.closes(), []string{"* 2026-09 UTC"})
	equal(t, "invoices", e.invoices(), []string{"2026-09 cus_1 11.00 EUR", "2026-09 cus_2 11.00 EUR"})
	var closed, existing, failed float64
	for _, m := range ms {
		closed += metric(t, m, "hookledger_invoice_scheduled_closes_total", "outcome", "closed")
		existing += metric(t, m, "hookledger_invoice_scheduled_closes_total", "outcome", "existing")
		failed += metric(t, m, "hookledger_invoice_scheduled_closes_total", "outcome", "error")
	}
	if closed != 1 || existing != 1 || failed != 0 {
		t.Errorf("outcomes: closed %v, existing %v, error %v; want 1, 1, 0\n%s", closed, existing, failed, e.logs.String())
	}
}

// serve's background jobs include the schedule: it checks at start, with
// the real clock, so the latest month past its grace closes at once.
func TestBackgroundStartsScheduledCloses(t *testing.T) {
	e := newSchedEnv(t, "", "UTC")
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	stop, err := startBackground(context.Background(), log, e.Config, e.DB, e.Writer, e.Mapper(), "test", e.met)
	if err != nil {
		t.Fatal(err)
	}
	await.Eventually(t, 30*time.Second, "the scheduled close", func() bool { return e.Count("period_closes") > 0 })
	stop()
	now := time.Now().UTC()
	want := duePeriods(nil, now, time.UTC, config.DefaultInvoicingGrace)
	if got := e.closes(); len(got) != 1 || len(want) != 1 || got[0] != "* "+want[0].Label+" UTC" {
		t.Errorf("closes %v, want the one month due at %s: %v", got, now, want)
	}
	if got := metric(t, e.met, "hookledger_invoice_scheduled_closes_total", "outcome", "closed"); got != 1 {
		t.Errorf("closes counted: %v", got)
	}
	if !strings.Contains(e.logs.String(), `"msg":"background job","job":"invoice close monthly in UTC after 72h0m0s","every":"10m0s"`) {
		t.Errorf("job not announced:\n%s", e.logs.String())
	}
}

// A customer the scheduled close cannot invoice (its plan is not declared
// any more) does not hold up everyone else's invoices: the close invoices
// them, logs the customer and why, and counts it in
// hookledger_invoice_excluded_customers; every later check tries the
// customer again, and once the plan is declared again its invoice is made.
func TestScheduledCloseExcludesACustomerItCannotInvoice(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newSchedEnv(t, backend, "UTC")
		ctx := context.Background()
		e.at("2026-10-20T00:00:00Z")
		e.use("cus_1", 100, "2026-10-10T10:00:00Z")
		e.use("cus_2", 50, "2026-10-11T10:00:00Z")
		// cus_1 on "legacy", which the configuration does not declare (as after
		// the plan was taken out of hookledger.yml).
		if err := customer.AddCustomer(ctx, e.DB, customer.Customer{ID: "cus_1", RecordedAt: e.Now()}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if err := e.DB.RegistryTx(ctx, func(tx *schema.RegistryTx) error {
			_, err := tx.InsertPlanAssignment(ctx, schema.PlanAssignment{CustomerID: "cus_1", Plan: "legacy", EffectiveFrom: "2026-01-01", RecordedAt: e.Now().UnixMilli()})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		inv := e.met.WatchInvoicing()
		e.at("2026-11-05T00:00:00Z")
		e.scheduler(inv).check(ctx)
		equal(t, "invoices", e.invoices(), []string{"2026-10 cus_2 10.50 EUR"})
		if got := metric(t, e.met, "hookledger_invoice_excluded_customers"); got != 1 {
			t.Errorf("excluded customers = %v, want 1", got)
		}
		want := `"outcome":"excluded","customer":"cus_1","error":"customer \"cus_1\": no such plan version: plan \"legacy\" is not declared"`
		if !strings.Contains(e.logs.String(), want) {
			t.Errorf("the log lacks %s:\n%s", want, e.logs)
		}
		// legacy declared again: the next check makes cus_1's invoice.
		legacy := pricing.Plan{Name: "legacy", Currency: "EUR", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api_requests", Model: pricing.Unit, Unit: &[]pricing.Decimal{pricing.MustDecimal("0.02")}[0]}}}
		if err := legacy.Validate(); err != nil {
			t.Fatal(err)
		}
		cat, err := pricing.NewCatalog([]pricing.Plan{*e.Config.Catalog.Versions("pro")[0], legacy})
		if err != nil {
			t.Fatal(err)
		}
		e.Config.Catalog = cat
		e.scheduler(inv).check(ctx)
		equal(t, "invoices after the fix", e.invoices(), []string{"2026-10 cus_2 10.50 EUR", "2026-10 cus_1 2.00 EUR"})
		if got := metric(t, e.met, "hookledger_invoice_excluded_customers"); got != 0 {
			t.Errorf("excluded customers after the fix = %v, want 0", got)
		}
	})
}
