package custody_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// freeTier is a plan "free" limiting api_requests to 100 a month (hard),
// alerting at 80% and 100%, the default plan, and a destination for alerts.
func freeTier(t testing.TB) (func(*config.Config), func(*custody.Writer)) {
	t.Helper()
	plans := []pricing.Plan{{Name: "free", Currency: "USD", EffectiveFrom: "2026-01-01",
		Limits: []pricing.Limit{{Meter: "api_requests", Limit: pricing.MustDecimal("100"), Alerts: []string{"80%", "100%"}}}}}
	catalog := testenv.Catalog(t, plans)
	edit := func(c *config.Config) {
		c.Plans, c.Catalog, c.Customers.DefaultPlan = plans, catalog, "free"
		c.Destinations = []config.Destination{{Name: "app", URL: "http://127.0.0.1:1/hooks",
			Events: config.Events{Types: []string{entitle.AlertEventType}}}}
	}
	writer := func(w *custody.Writer) { w.Limits = entitle.NewPolicy(catalog, "free") }
	return edit, writer
}

func newLimitedEnv(t testing.TB, backend string) *env {
	t.Helper()
	edit, writer := freeTier(t)
	e := newEnvWithWriter(t, backend, writer, edit)
	if built, err := e.Writer.BuildUsageState(t.Context(), "UTC"); err != nil || !built {
		t.Fatalf("build usage state: %v %v", built, err)
	}
	return e
}

type crossingRow struct {
	Threshold string `db:"threshold"`
	Used      string `db:"used"`
	RowID     int64  `db:"row_id"`
	ReceiptID int64  `db:"receipt_id"`
}

func crossings(t *testing.T, e *env) []crossingRow {
	t.Helper()
	var cs []crossingRow
	if err := e.DB.Read.Select(&cs, `SELECT threshold, used, row_id, receipt_id FROM threshold_crossings ORDER BY row_id`); err != nil {
		t.Fatal(err)
	}
	return cs
}

func checker(e *env) *entitle.Checker {
	return &entitle.Checker{DB: e.DB, Policy: entitle.NewPolicy(e.Config.Catalog, "free"), Now: e.Now}
}

// 32 senders push one customer across 80% and 100% of its limit, every
// event sent twice by different senders: each threshold fires exactly once,
// with the ledger row that crossed it, and its alert is a receipt of
// provider hookledger with one outbox message.
func TestThresholdsFireOnceUnderConcurrentSenders(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newLimitedEnv(t, backend)
		sendTwiceConcurrently(t, e, 150, "1")
		cs := crossings(t, e)
		// Every row is 1: the row that crossed 80% is the 80th of the
		// customer's rows, whatever order the senders' rows got.
		want := []crossingRow{{"80%", "80", nthRow(e, "cus_1", 80), 0}, {"100%", "100", nthRow(e, "cus_1", 100), 0}}
		if len(cs) != 2 {
			t.Fatalf("crossings = %+v, want 80%% and 100%% once each", cs)
		}
		for i := range want {
			if cs[i].Threshold != want[i].Threshold || cs[i].Used != want[i].Used || cs[i].RowID != want[i].RowID {
				t.Errorf("crossing %d = %+v, want %+v", i, cs[i], want[i])
			}
			var alert entitle.Alert
			var body []byte
			if err := e.DB.Read.Get(&body, `SELECT body FROM receipts WHERE id = ? AND provider = 'hookledger' AND source = 'alert'
				AND event_type = 'usage.threshold_crossed' AND status = 'ignored'`, cs[i].ReceiptID); err != nil {
				t.Fatalf("alert receipt %d: %v", cs[i].ReceiptID, err)
			}
			if err := json.Unmarshal(body, &alert); err != nil {
				t.Fatal(err)
			}
			if alert.Customer != "cus_1" || alert.Meter != "api_requests" || alert.Threshold != want[i].Threshold ||
				alert.Row.ID != want[i].RowID || alert.Used.String() != want[i].Used || alert.Period.Label != "2026-11" {
				t.Errorf("alert %d = %s", i, body)
			}
		}
		if n := e.Int(`SELECT COUNT(*) FROM outbox o JOIN receipts r ON r.id = o.receipt_id WHERE r.provider = 'hookledger' AND o.destination = 'app'`); n != 2 {
			t.Errorf("%d outbox messages for alerts, want 2", n)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE provider = 'hookledger'`); n != 2 {
			t.Errorf("%d alert receipts, want 2", n)
		}
		ent, err := checker(e).Check(t.Context(), "cus_1", "api_requests")
		if err != nil || ent.Used.String() != "150" || ent.Allowed || ent.Remaining.String() != "0" {
			t.Errorf("entitlement = %+v %v, want 150 used, not allowed, 0 remaining", ent, err)
		}
		checkStateMatchesLedger(t, e)
	})
}

// The entitlement answer turns from allowed to not allowed at exactly the
// limit (hard), and used is the ledger's sum at each answer.
func TestEntitlementFlipsAtExactlyTheLimit(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newLimitedEnv(t, backend)
		c := checker(e)
		if r := e.Send("big", testenv.UsageBody("cus_2", "api_requests", "99.5")); r.Code != 200 {
			t.Fatal(r.Code)
		}
		ent, err := c.Check(t.Context(), "cus_2", "api_requests")
		if err != nil || !ent.Allowed || ent.Used.String() != "99.5" || ent.Remaining.String() != "0.5" || ent.Limit.String() != "100" {
			t.Fatalf("at 99.5: %+v %v", ent, err)
		}
		if r := e.Send("last", testenv.UsageBody("cus_2", "api_requests", "0.5")); r.Code != 200 {
			t.Fatal(r.Code)
		}
		ent, err = c.Check(t.Context(), "cus_2", "api_requests")
		if err != nil || ent.Allowed || ent.Used.String() != "100" || ent.Remaining.String() != "0" {
			t.Fatalf("at 100: %+v %v", ent, err)
		}
		// Another customer, another meter: no usage, no limit on the meter.
		ent, err = c.Check(t.Context(), "cus_3", "storage")
		if err != nil || !ent.Allowed || ent.Limit != nil || ent.Used.Sign() != 0 {
			t.Fatalf("unlimited: %+v %v", ent, err)
		}
	})
}

// An adjustment that takes usage back below a threshold that fired, and
// usage that then crosses it again, do not fire it again in the period; the
// next month re-arms it.
func TestThresholdDoesNotRefireAfterFallingBelow(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newLimitedEnv(t, backend)
		if r := e.Send("a", testenv.UsageBody("cus_1", "api_requests", "85")); r.Code != 200 {
			t.Fatal(r.Code)
		}
		adjust(t, e, "cus_1", "-30", "event:default/a")
		if r := e.Send("b", testenv.UsageBody("cus_1", "api_requests", "30")); r.Code != 200 {
			t.Fatal(r.Code)
		}
		cs := crossings(t, e)
		if len(cs) != 1 || cs[0].Threshold != "80%" || cs[0].Used != "85" {
			t.Fatalf("crossings = %+v, want 80%% once, at 85", cs)
		}
		// December: the same customer crosses 80% again, and it fires.
		dec := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":90,"occurred_at":"2026-12-02T10:00:00Z"}}`)
		if r := e.Send("c", dec); r.Code != 200 {
			t.Fatal(r.Code)
		}
		if cs := crossings(t, e); len(cs) != 2 || cs[1].Threshold != "80%" || cs[1].Used != "90" {
			t.Fatalf("crossings = %+v, want 80%% again in December", cs)
		}
		checkStateMatchesLedger(t, e)
	})
}

// A failed event replayed after its mapping is fixed crosses the threshold,
// and the replay fires it.
func TestReplayThatCrossesFires(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newLimitedEnv(t, backend)
		if r := e.Send("a", testenv.UsageBody("cus_1", "api_requests", "70")); r.Code != 200 {
			t.Fatal(r.Code)
		}
		bad := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":"lots","count":20,"occurred_at":"2026-11-29T10:00:00Z"}}`)
		if r := e.Send("b", bad); r.Code != 200 || r.Body.Status != custody.StatusFailed {
			t.Fatalf("got %d %+v, want a failed event", r.Code, r.Body)
		}
		fixed := ledger.NewMapper([]ledger.Mapping{{Type: "usage.recorded", Customer: ledger.Field{Path: "data.customer"},
			Meter: ledger.Field{Path: "data.meter"}, Quantity: ledger.Field{Path: "data.count"}, OccurredAt: ledger.Field{Path: "data.occurred_at"}}}, nil)
		rep, err := custody.ReplayReceipts(t.Context(), e.DB, e.Writer, fixed, "test+fixed", custody.ReplayFilter{Provider: "default", Status: custody.StatusFailed})
		if err != nil || rep.Applied != 1 {
			t.Fatalf("replay: %+v %v", rep, err)
		}
		row := int64(e.Int(`SELECT id FROM metered_usage WHERE event_id = 'b'`))
		if cs := crossings(t, e); len(cs) != 1 || cs[0].Threshold != "80%" || cs[0].RowID != row || cs[0].Used != "90" {
			t.Fatalf("crossings = %+v, want 80%% by the replayed row %d", cs, row)
		}
	})
}

// The state a restart finds equals a recomputation from the ledger, and the
// writer keeps it current from there (not built again).
func TestUsageStateAfterRestartEqualsRecomputation(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newLimitedEnv(t, backend)
		for i, q := range []string{"1", "2.5", "1000000000000", "7"} {
			if r := e.Send(fmt.Sprintf("e%d", i), testenv.UsageBody(fmt.Sprintf("cus_%d", i%2), "api_requests", q)); r.Code != 200 {
				t.Fatal(r.Code)
			}
		}
		e.Reopen()
		if built, err := e.Writer.BuildUsageState(t.Context(), "UTC"); err != nil || built {
			t.Fatalf("built again after a restart: %v %v", built, err)
		}
		if r := e.Send("e9", testenv.UsageBody("cus_1", "api_requests", "3")); r.Code != 200 {
			t.Fatal(r.Code)
		}
		checkStateMatchesLedger(t, e)
		// Another zone: built again, from the ledger, with months there.
		if built, err := e.Writer.BuildUsageState(t.Context(), "Pacific/Kiritimati"); err != nil || !built {
			t.Fatalf("zone change: %v %v", built, err)
		}
		checkStateMatchesLedger(t, e)
	})
}

// checkStateMatchesLedger compares usage_state with the ledger's sums, and
// runs verify's check of the same.
func checkStateMatchesLedger(t *testing.T, e *env) {
	t.Helper()
	z, ok, err := e.DB.StateZone(t.Context())
	if err != nil || !ok {
		t.Fatalf("state zone: %v %v", ok, err)
	}
	loc, _ := ledger.LoadZone(z.Zone)
	want, err := ledger.SumUsageState(t.Context(), e.DB, loc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.DB.UsageStates(t.Context(), "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Errorf("%d usage state rows, the ledger has %d months", len(got), len(want))
	}
	for _, s := range got {
		w := want[ledger.StateKey{Customer: s.Customer, Meter: s.Meter, PeriodStart: s.PeriodStart}]
		if w == nil || w.Used.String() != s.Used || w.LastRowID != s.LastRowID {
			t.Errorf("usage state %+v, ledger %+v", s, w)
		}
	}
	rep, err := invoice.Verify(t.Context(), e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.First(); p != nil {
		t.Errorf("verify: %v", p)
	}
	for _, c := range rep.Checks {
		if c.Name == "usage state" && c.Checked != int64(len(got)) {
			t.Errorf("verify's usage state: %+v", c)
		}
	}
}

func adjust(t *testing.T, e *env, customer, quantity, ref string) {
	t.Helper()
	adjustWith(t, e.Writer, customer, quantity, ref)
}

// adjustWith appends an adjustment of api_requests through w.
func adjustWith(t *testing.T, w *custody.Writer, customer, quantity, ref string) {
	t.Helper()
	q, err := ledger.ParseRowQuantity(quantity)
	if err != nil {
		t.Fatal(err)
	}
	a := ledger.Adjustment{Customer: customer, Meter: "api_requests", Quantity: q, Reason: "test", Ref: ref}
	if err := a.Validate(nil); err != nil {
		t.Fatal(err)
	}
	err = w.Submit(t.Context(), custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		r, err := a.Row(ctx, tx.Refs(), tx.Now())
		if err != nil {
			return err
		}
		return tx.Append(ctx, r)
	}))
	if err != nil {
		t.Fatal(err)
	}
}

// GET /v1/entitlements on the API's listener: a key is required (401
// without one, nothing read), bad names are 400, and the answers are the
// checker's, one meter or several.
func TestEntitlementsOverHTTP(t *testing.T) {
	e := newLimitedEnv(t, "sqlite")
	if r := e.Send("a", testenv.UsageBody("cus_1", "api_requests", "100")); r.Code != 200 {
		t.Fatal(r.Code)
	}
	key, _ := e.CreateKey("app", 0, 0)
	get := func(path, key string) (int, string) { t.Helper(); return getWithKey(t, e, path, key) }
	for _, c := range []struct {
		path, key string
		code      int
		has       string
	}{
		{"/v1/entitlements/cus_1/api_requests", "", 401, `"reason":"missing_key"`},
		{"/v1/entitlements/cus_1/api_requests", "hl_not-a-key", 401, `"reason":"unknown_key"`},
		{"/v1/entitlements/cus_1/api_requests", key, 200, `"limit":"100","kind":"hard","used":"100","remaining":"0","allowed":false`},
		{"/v1/entitlements/cus_1?meter=api_requests&meter=other", key, 200, `{"entitlements":[{"customer":"cus_1","meter":"api_requests"`},
		{"/v1/entitlements/cus_1", key, 400, `"reason":"bad_request"`},
		{"/v1/entitlements/cus_1/%00", key, 400, `"reason":"bad_request"`},
	} {
		code, body := get(c.path, c.key)
		if code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("GET %s: %d %s, want %d with %s", c.path, code, body, c.code, c.has)
		}
	}
}

// BenchmarkEntitlementCheck answers checks, in parallel, over 1,000
// customers with usage and 1,000 plan assignments, on the read pool.
func BenchmarkEntitlementCheck(b *testing.B) {
	e := newLimitedEnv(b, "sqlite")
	for i := range 1000 {
		if r := e.Send(fmt.Sprintf("e%d", i), testenv.UsageBody(fmt.Sprintf("cus_%d", i), "api_requests", "1")); r.Code != 200 {
			b.Fatal(r.Code)
		}
		e.DB.Write.MustExec(`INSERT INTO plan_assignments (customer_id, plan, effective_from, recorded_at, note) VALUES (?, 'free', '2026-01-01', 0, '')`, fmt.Sprintf("cus_%d", i))
	}
	c := checker(e)
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if _, err := c.Check(context.Background(), fmt.Sprintf("cus_%d", i%1000), "api_requests"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// getWithKey GETs path on e's ingest listener with API key key ("" for
// none) and returns the status code and the body.
func getWithKey(t *testing.T, e *env, path, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.HTTP.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// sendTwiceConcurrently sends events usage events evt_0 … of quantity q for
// cus_1's api_requests, each twice, from 32 concurrent senders.
func sendTwiceConcurrently(t *testing.T, e *env, events int, q string) {
	t.Helper()
	work := make(chan int, 2*events)
	for i := range events {
		work <- i
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range work {
				if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", q)); r.Code != 200 {
					t.Errorf("evt_%d: %d", i, r.Code)
				}
			}
		})
	}
	wg.Wait()
}

// nthRow is the id of customer's nth ledger row (from 1).
func nthRow(e *env, customer string, n int) int64 {
	return int64(e.Int(`SELECT id FROM metered_usage WHERE customer_id = ? ORDER BY id LIMIT 1 OFFSET ?`, customer, n-1))
}

// The writer keeps the usage state it read from one batch to the next; a
// commit of another connection (a command's own writer, in another process)
// makes it read the state again rather than add to what it kept.
func TestUsageStateCacheSeesAnotherWriter(t *testing.T) {
	e := newLimitedEnv(t, "sqlite")
	if r := e.Send("a", testenv.UsageBody("cus_1", "api_requests", "10")); r.Code != 200 {
		t.Fatal(r.Code)
	}
	other, err := schema.Open(t.Context(), filepath.Join(e.Dir, schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	w := custody.NewWriter(other)
	if err := w.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	adjustWith(t, w, "cus_1", "5", "row:1")
	w.Close()
	if r := e.Send("b", testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
		t.Fatal(r.Code)
	}
	ent, err := checker(e).Check(t.Context(), "cus_1", "api_requests")
	if err != nil || ent.Used.String() != "16" {
		t.Fatalf("used %v (%v); want 16: 10, the other writer's 5, then 1", ent.Used, err)
	}
	checkStateMatchesLedger(t, e)
}
