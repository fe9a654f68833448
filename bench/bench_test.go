package bench

import (
	"context"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/scheme"
)

const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// defaultConfig is serve's zero-config setup with a known secret.
func defaultConfig(t *testing.T) *config.Config {
	t.Helper()
	t.Setenv("HOOKLEDGER_SECRET", testSecret)
	cfg, _, err := config.Default(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runLoad plans l and runs it to the end.
func runLoad(t *testing.T, l Load) (*Plan, *Outcome) {
	t.Helper()
	p, err := l.Plan(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, out
}

func testLoad(t *testing.T, url string, events int, dup float64) Load {
	t.Helper()
	s, err := scheme.New("standard", scheme.HMACOptions{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := s.Key(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	return Load{URL: url, Scheme: s, Key: key, Events: events, Connections: 4, Dup: dup, Customers: 7, Seed: 42, RunID: "t1"}
}

// referenceServer is the no-storage receiver behind a real listener.
func referenceServer(t *testing.T) *httptest.Server {
	t.Helper()
	cfg := defaultConfig(t)
	providers, err := receiver.NewProviders(cfg.Providers)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	(&Reference{Providers: providers, Mapper: ledger.NewMapper(cfg.Usage, cfg.MeterNames())}).Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// hookledger is the real receiver on a SQLite file behind a real listener.
func hookledger(t *testing.T) (*httptest.Server, *schema.DB) {
	t.Helper()
	e := testenv.New(t, testenv.Options{RealTime: true})
	return e.HTTP, e.DB
}

func TestPlanRejectsBadLoads(t *testing.T) {
	good := testLoad(t, "http://127.0.0.1:1/webhooks/default", 10, 0.1)
	for name, tc := range map[string]struct {
		edit func(*Load)
		want string
	}{
		"no url":         {func(l *Load) { l.URL = "" }, "URL is required"},
		"no key":         {func(l *Load) { l.Key = nil }, "scheme and key"},
		"no events":      {func(l *Load) { l.Events = 0 }, "events must be at least 1"},
		"no connections": {func(l *Load) { l.Connections = 0 }, "connections must be at least 1"},
		"dup above 1":    {func(l *Load) { l.Dup = 1.5 }, "dup must be between 0 and 1"},
		"negative dup":   {func(l *Load) { l.Dup = -0.1 }, "dup must be between 0 and 1"},
		"no customers":   {func(l *Load) { l.Customers = 0 }, "customers must be at least 1"},
		"no run id":      {func(l *Load) { l.RunID = "" }, "run id is required"},
		"negative rate":  {func(l *Load) { l.Rate = -1 }, "rate must be a number of requests per second"},
		"rate NaN":       {func(l *Load) { l.Rate = math.NaN() }, "rate must be a number of requests per second"},
	} {
		t.Run(name, func(t *testing.T) {
			l := good
			tc.edit(&l)
			if _, err := l.Plan(time.Now()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPlanSignsEveryDeliveryAndPlacesDuplicates(t *testing.T) {
	l := testLoad(t, "http://127.0.0.1:1/webhooks/default", 100, 0.2)
	now := time.Now()
	p, err := l.Plan(now)
	if err != nil {
		t.Fatal(err)
	}
	if p.Requests() != 120 {
		t.Fatalf("%d deliveries, want 100 events + 20 duplicates", p.Requests())
	}
	racing, late := 0, 0
	for k, d := range p.deliveries {
		if _, _, err := l.Scheme.Verify(d.header, d.body, [][]byte{l.Key}, now, 5*time.Minute); err != nil {
			t.Fatalf("delivery %d does not verify: %v", k, err)
		}
		if id, _ := l.Scheme.Identify(d.header, d.body); id != p.Events[d.event].ID {
			t.Fatalf("delivery %d carries id %q, want %q", k, id, p.Events[d.event].ID)
		}
		switch {
		case d.dup && d.late:
			late++
			if k < 100+10 {
				t.Fatalf("late duplicate at %d, before all originals were sent", k)
			}
		case d.dup:
			racing++
			// A racing duplicate directly follows its original, so with more
			// than one connection both are in flight together.
			if prev := p.deliveries[k-1]; prev.dup || prev.event != d.event {
				t.Fatalf("racing duplicate at %d does not follow its original", k)
			}
		}
	}
	if racing != 10 || late != 10 {
		t.Fatalf("%d racing and %d late duplicates, want 10 and 10", racing, late)
	}
	// The same seed gives the same events.
	again, _ := l.Plan(now)
	for i := range p.Events {
		if p.Events[i] != again.Events[i] {
			t.Fatalf("event %d differs between plans with one seed: %+v vs %+v", i, p.Events[i], again.Events[i])
		}
	}
}

// A paced run sends its requests no faster than the rate: request k not
// before k/Rate seconds, so 60 requests at 200/s take at least 295 ms
// however fast the receiver answers, and every one is still delivered.
func TestRunAtARate(t *testing.T) {
	srv := referenceServer(t)
	l := testLoad(t, srv.URL+"/webhooks/default", 60, 0)
	l.Rate = 200
	_, out := runLoad(t, l)
	if r := out.Result; r.Status["200"] != 60 || out.Delivered != 60 {
		t.Fatalf("result %+v, want 60 deliveries answered 200", r)
	}
	if least := 59.0 / 200; out.Result.Seconds < least {
		t.Fatalf("60 requests at 200/s took %.3f s, want at least %.3f", out.Result.Seconds, least)
	}
}

func TestRunAgainstReference(t *testing.T) {
	srv := referenceServer(t)
	_, out := runLoad(t, testLoad(t, srv.URL+"/webhooks/default", 200, 0.1))
	r := out.Result
	if r.Requests != 220 || r.Events != 200 || r.Duplicates != 20 || r.Status["200"] != 220 || !r.OK() {
		t.Fatalf("result %+v", r)
	}
	if out.Delivered != 220 {
		t.Fatalf("%d deliveries answered 2xx, want 220", out.Delivered)
	}
	if r.RPS <= 0 || r.Latency.P50 <= 0 || r.Latency.P50 > r.Latency.P99 || r.Latency.P99 > r.Latency.Max {
		t.Fatalf("implausible figures %+v", r)
	}
	// 220 requests cannot cost less than a microsecond of CPU each, nor (this
	// process runs the reference server too) more than the whole run's wall
	// time on every core.
	if _, ok := processCPU(); ok {
		most := r.Seconds * 1e6 * float64(runtime.NumCPU()) / float64(r.Requests)
		if r.LoadCPUPerRequest < 1 || r.LoadCPUPerRequest > most {
			t.Errorf("load CPU %.1f µs per request, want between 1 and %.0f", r.LoadCPUPerRequest, most)
		}
	}
}

func TestReferenceRejectsLikeServe(t *testing.T) {
	srv := referenceServer(t)
	l := testLoad(t, srv.URL+"/webhooks/default", 1, 0)
	p, err := l.Plan(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d := p.deliveries[0]
	for name, tc := range map[string]struct {
		path   string
		header http.Header
		body   string
		want   int
	}{
		"unknown provider": {"/webhooks/nope", d.header, string(d.body), http.StatusNotFound},
		"wrong signature":  {"/webhooks/default", d.header, string(d.body) + " ", http.StatusUnauthorized},
		"not signed":       {"/webhooks/default", http.Header{}, string(d.body), http.StatusBadRequest}, // missing_signature, as serve answers
	} {
		t.Run(name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+tc.path, strings.NewReader(tc.body))
			req.Header = tc.header.Clone()
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	// A signed body that is not JSON is refused after the signature checks out.
	h := http.Header{}
	l.Scheme.Sign(h, []byte("not json"), l.Key, "evt_x", EventType, time.Now())
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/default", strings.NewReader("not json"))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("status %d for a signed non-JSON body, want 400", resp.StatusCode)
	}
}

func TestRunCountsTransportErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/webhooks/default"
	ln.Close() // nothing listens there now
	_, out := runLoad(t, testLoad(t, url, 5, 0))
	if out.Result.Status["error"] != 5 || out.Result.OK() || out.Result.FirstError == "" {
		t.Fatalf("result %+v, want 5 transport errors", out.Result)
	}
}

func TestVerifyFindsEveryEventExactlyOnce(t *testing.T) {
	for _, ids := range []IDs{Sequential, Random} {
		t.Run(ids.String(), func(t *testing.T) {
			srv, db := hookledger(t)
			// Other events around the run's, in the same index: verify must
			// count only the run's.
			if err := prefill(t, db, ids, 500); err != nil {
				t.Fatal(err)
			}
			l := testLoad(t, srv.URL+"/webhooks/default", 300, 0.2)
			l.Connections, l.IDs = 8, ids
			p, out := runLoad(t, l)
			if !out.Result.OK() {
				t.Fatalf("result %+v", out.Result)
			}
			rep, err := Verify(context.Background(), db, "default", p, out)
			if err != nil {
				t.Fatal(err)
			}
			want := Report{Events: 300, Acked: 300, ExactlyOnce: 300, Receipts: 300, Attempts: 360, Inserted: 300, Duplicate: 60}
			if !reflect.DeepEqual(*rep, want) {
				t.Fatalf("report %+v, want %+v", *rep, want)
			}
			// The ledger itself (hash chain, receipts against rows) is consistent too.
			lv, err := invoice.Verify(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			if pr := lv.First(); pr != nil {
				t.Fatalf("ledger verify: %v", pr)
			}
		})
	}
}

func TestVerifyReportsWhatIsWrong(t *testing.T) {
	srv, db := hookledger(t)
	p, out := runLoad(t, testLoad(t, srv.URL+"/webhooks/default", 50, 0))

	t.Run("an event that never arrived", func(t *testing.T) {
		q := *p
		q.Events = append(append([]Event(nil), p.Events...), Event{ID: EventID(p.RunID, 50), Customer: "cus_1", Quantity: 1})
		o := *out
		o.Acked = append(append([]bool(nil), out.Acked...), false)
		rep, err := Verify(context.Background(), db, "default", &q, &o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || rep.Missing != 1 || !strings.Contains(rep.Problems[0], "1 events are not in the ledger (1 of them were never acknowledged)") {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("a quantity that differs from what was sent", func(t *testing.T) {
		q := *p
		q.Events = append([]Event(nil), p.Events...)
		q.Events[3].Quantity += 1
		rep, err := Verify(context.Background(), db, "default", &q, out)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || rep.Wrong != 1 || rep.ExactlyOnce != 49 {
			t.Fatalf("report %+v", rep)
		}
		joined := strings.Join(rep.Problems, "\n")
		if !strings.Contains(joined, "1 rows differ from what was sent") || !strings.Contains(joined, "ledger total for "+q.Events[3].Customer) {
			t.Fatalf("problems %q", joined)
		}
	})
	t.Run("more acknowledged deliveries than attempt rows", func(t *testing.T) {
		o := *out
		o.Delivered = 51
		rep, err := Verify(context.Background(), db, "default", p, &o)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), "50 delivery attempts recorded for 51 deliveries answered 2xx") {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("a second usage row for one event", func(t *testing.T) {
		// metered_usage is append-only, so an extra row can be added but never
		// removed: this subtest runs last.
		e := p.Events[7]
		if _, err := db.Write.Exec(`INSERT INTO metered_usage (id, kind, provider, event_id, customer_id, meter, quantity,
			occurred_at, recorded_at, prev_hash, row_hash) SELECT COALESCE(MAX(id), 0) + 1, 'usage', 'default', ?, ?, 'other_meter', 5, 0, 0, ?, ?
			FROM metered_usage`,
			e.ID, e.Customer, []byte{0}, []byte{0}); err != nil {
			t.Fatal(err)
		}
		rep, err := Verify(context.Background(), db, "default", p, out)
		if err != nil {
			t.Fatal(err)
		}
		if rep.OK() || rep.ExtraRows != 1 || rep.Wrong != 1 {
			t.Fatalf("report %+v", rep)
		}
	})
	t.Run("a database without the schema", func(t *testing.T) {
		other, err := schema.Open(context.Background(), filepath.Join(t.TempDir(), "empty.db"), schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.Write.Exec(`DROP TABLE delivery_attempts`); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(context.Background(), other, "default", p, out); err == nil || !strings.Contains(err.Error(), "count delivery attempts") {
			t.Fatalf("error %v, want a read error naming the query", err)
		}
	})
}

func TestPrefillWritesAConsistentLedger(t *testing.T) {
	for _, ids := range []IDs{Sequential, Random} {
		t.Run(ids.String(), func(t *testing.T) { testPrefill(t, ids) })
	}
}

func testPrefill(t *testing.T, ids IDs) {
	db, err := schema.Open(context.Background(), filepath.Join(t.TempDir(), schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := prefill(t, db, ids, 250); err != nil {
		t.Fatal(err)
	}
	// check asserts 250 receipts, attempts and usage rows and their exact usage sum.
	check := func(when string) {
		t.Helper()
		for table, want := range map[string]int{"receipts": 250, "metered_usage": 250} {
			var n int
			if err := db.Read.Get(&n, "SELECT COUNT(*) FROM "+table); err != nil {
				t.Fatal(err)
			}
			if n != want {
				t.Fatalf("%s: %s has %d rows, want %d", when, table, n, want)
			}
		}
		// One attempt per event, each kept in its receipt.
		if n, err := db.CountAttempts(context.Background()); err != nil || n != 250 {
			t.Fatalf("%s: %d delivery attempts (%v), want 250", when, n, err)
		}
		var total int64
		if err := db.Read.Get(&total, "SELECT SUM(quantity) FROM metered_usage WHERE meter = 'prefill'"); err != nil {
			t.Fatal(err)
		}
		// Event i has quantity (1 + i%1000) / 1000 units: 1..250 thousandths.
		if want := int64(250*251/2) * 1000; total != want {
			t.Fatalf("%s: total quantity %d micro-units, want %d", when, total, want)
		}
	}
	check("after the prefill")
	// Every receipt is under the id PrefillEventID says.
	want := make([]string, 250)
	for i := range want {
		want[i] = PrefillEventID(ids, i)
	}
	if n, err := db.ReceiptsInRange(context.Background(), schema.EventRange{Provider: "default", IDs: want}); err != nil || n != 250 {
		t.Fatalf("%d receipts under the ids PrefillEventID gives (%v), want 250", n, err)
	}
	lv, err := invoice.Verify(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	if pr := lv.First(); pr != nil {
		t.Fatalf("ledger verify: %v", pr)
	}
	// A second prefill collides with the first: it fails at its first
	// insert (random ids go in id order) and adds nothing.
	first := PrefillEventID(ids, 0)
	if ids == Random {
		first = slices.Min(want[:10])
	}
	if err := prefill(t, db, ids, 10); err == nil || !strings.Contains(err.Error(), "insert receipt "+first+":") {
		t.Fatalf("error %v, want a duplicate-receipt failure", err)
	}
	check("after the refused second prefill")
}

func TestPercentile(t *testing.T) {
	ms := func(n ...int) []time.Duration {
		out := make([]time.Duration, len(n))
		for i, v := range n {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	sorted := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{50, 5 * time.Millisecond}, {90, 9 * time.Millisecond}, {99, 10 * time.Millisecond}, {100, 10 * time.Millisecond}, {1, time.Millisecond}} {
		if got := Percentile(sorted, tc.p); got != tc.want {
			t.Errorf("p%g = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := Percentile(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %v, want 0", got)
	}
}

// prefill prefills db with n events of provider default, through a bulk
// loader's writer.
func prefill(t *testing.T, db *schema.DB, ids IDs, n int) error {
	t.Helper()
	w := writer.New(db, nil)
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	return Prefill(context.Background(), db, w, "default", ids, n, time.Now(), nil)
}
