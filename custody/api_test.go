package custody_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// The ingest API's events go through the same writer as webhooks: these
// tests post batches to the real /v1/events handler and assert on the rows.

// thousand is a batch of 1,000 CloudEvents: 890 distinct events, 100
// repeats (the same bytes) of earlier ones and 10 that are malformed, with
// the per-customer totals the 890 should leave.
func thousand() (body []byte, totals map[string]ledger.Quantity) {
	rng := rand.New(rand.NewPCG(7, 7))
	malformed := [][]byte{
		[]byte(`"not an object"`),
		[]byte(`42`),
		[]byte(`{"specversion":"1.0","source":"app","type":"usage.recorded","data":{}}`),              // no id
		[]byte(`{"specversion":"1.0","id":"","source":"app","type":"usage.recorded"}`),                // empty id
		[]byte(`{"specversion":"1.0","id":7,"source":"app","type":"usage.recorded"}`),                 // id not a string
		[]byte(`{"specversion":"1.0","id":"m1","type":"usage.recorded"}`),                             // no source
		[]byte(`{"specversion":"0.3","id":"m2","source":"app","type":"usage.recorded"}`),              // wrong specversion
		[]byte(`{"specversion":"1.0","id":"m3","source":"app"}`),                                      // no type
		[]byte(`{"specversion":"1.0","id":"m4","source":"app","type":"usage.recorded","time":"now"}`), // bad time
		[]byte(`[{"specversion":"1.0","id":"m5","source":"app","type":"usage.recorded"}]`),            // an array
	}
	totals = map[string]ledger.Quantity{}
	var events, unique [][]byte
	for i := range 890 {
		cus, q := fmt.Sprintf("cus_%d", i%17), 1+rng.IntN(1000)
		ev := testenv.CloudEvent("app", fmt.Sprintf("evt_%04d", i), cus, "api_requests", fmt.Sprint(q))
		totals[cus] += ledger.Quantity(q) * ledger.Scale
		unique = append(unique, ev)
		events = append(events, ev)
		if i%9 == 8 && len(events) < 990 { // a repeat of an earlier event every ninth
			events = append(events, unique[rng.IntN(len(unique))])
		}
	}
	for len(events) < 990 {
		events = append(events, unique[rng.IntN(len(unique))])
	}
	for k, m := range malformed { // spread through the batch
		at := 50 + k*90
		events = append(events[:at], append([][]byte{m}, events[at:]...)...)
	}
	return testenv.Batch(events...), totals
}

func TestAPIBatchOfAThousand(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		key, _ := e.CreateKey("app", 0, 0)
		body, totals := thousand()
		r := e.PostEvents(key, ingest.MediaCloudEventBatch, body)
		if r.Code != http.StatusOK {
			t.Fatalf("got %d %s", r.Code, r.Raw)
		}
		want := map[string]int{"applied": 890, "duplicate": 100, "rejected": 10}
		if fmt.Sprint(r.Reply.Counts) != fmt.Sprint(want) || len(r.Reply.Results) != 1000 {
			t.Fatalf("counts %v (%d results), want %v", r.Reply.Counts, len(r.Reply.Results), want)
		}
		for i, res := range r.Reply.Results {
			if res.Index != i {
				t.Fatalf("result %d has index %d: results must be in request order", i, res.Index)
			}
			if res.Outcome == "rejected" && (res.Reason == "" || res.Error == "") {
				t.Errorf("result %d: rejected without a reason: %+v", i, res)
			}
		}
		if got := e.Rows(); got != [3]int{890, 990, 890} {
			t.Fatalf("receipts, attempts, usage = %v, want [890 990 890]", got)
		}
		if got := e.Totals(); fmt.Sprint(got) != fmt.Sprint(totals) {
			t.Fatalf("totals %v, want %v", got, totals)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE source = 'api' AND provider = 'api:app'`); n != 890 {
			t.Errorf("%d receipts with source api under api:app, want 890", n)
		}

		// The same batch again: every stored event is a duplicate, nothing added.
		r = e.PostEvents(key, ingest.MediaCloudEventBatch, body)
		if want := map[string]int{"duplicate": 990, "rejected": 10}; r.Code != 200 || fmt.Sprint(r.Reply.Counts) != fmt.Sprint(want) {
			t.Fatalf("again: %d %v, want 200 %v", r.Code, r.Reply.Counts, want)
		}
		if got := e.Rows(); got != [3]int{890, 1980, 890} {
			t.Fatalf("again: receipts, attempts, usage = %v, want [890 1980 890]", got)
		}
		if got := e.Totals(); fmt.Sprint(got) != fmt.Sprint(totals) {
			t.Fatalf("again: totals %v, want %v", got, totals)
		}
	})
}

func TestAPIConcurrentOverlappingBatches(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		key, _ := e.CreateKey("app", 0, 0)
		const clients, batches, size, pool = 32, 4, 100, 3000
		events := make([][]byte, pool)
		totals := map[string]ledger.Quantity{}
		for i := range events {
			cus := fmt.Sprintf("cus_%d", i%23)
			events[i] = testenv.CloudEvent("app", fmt.Sprintf("evt_%05d", i), cus, "api_requests", fmt.Sprint(i%50+1))
		}
		sent := make([]bool, pool)
		var mu sync.Mutex
		var wg sync.WaitGroup
		counts := map[string]int{}
		for c := range clients {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(c), 1))
				for range batches {
					var b [][]byte
					var ids []int
					for range size {
						i := rng.IntN(pool) // ids repeat within and across clients
						b, ids = append(b, events[i]), append(ids, i)
					}
					r := testenv.PostEvents(testenv.Go(t), e.HTTP.URL, key, ingest.MediaCloudEventBatch, testenv.Batch(b...))
					if r.Code != 200 {
						t.Errorf("client %d: %d %s", c, r.Code, r.Raw)
						return
					}
					mu.Lock()
					for o, n := range r.Reply.Counts {
						counts[o] += n
					}
					for _, i := range ids {
						sent[i] = true
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		unique := 0
		for i, s := range sent {
			if s {
				unique++
				totals[fmt.Sprintf("cus_%d", i%23)] += ledger.Quantity(i%50+1) * ledger.Scale
			}
		}
		if counts["applied"] != unique || counts["applied"]+counts["duplicate"] != clients*batches*size {
			t.Fatalf("outcomes %v: want %d applied and %d in all", counts, unique, clients*batches*size)
		}
		if got := e.Rows(); got != [3]int{unique, clients * batches * size, unique} {
			t.Fatalf("receipts, attempts, usage = %v, want [%d %d %d]", got, unique, clients*batches*size, unique)
		}
		if n := e.Int(`SELECT COUNT(*) FROM (SELECT event_id FROM metered_usage GROUP BY event_id HAVING COUNT(*) > 1) AS d`); n != 0 {
			t.Fatalf("%d events have more than one usage row", n)
		}
		if got := e.Totals(); fmt.Sprint(got) != fmt.Sprint(totals) {
			t.Fatalf("totals %v, want %v", got, totals)
		}
	})
}

func TestAPIFailureBeforeCommitStoresNothingAndRetryAppliesOnce(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		var mu sync.Mutex
		fail := func(*custody.Delivery) bool { return false }
		e := newEnvWithWriter(t, backend, func(w *custody.Writer) {
			w.SetTestHook(func(d *custody.Delivery) error {
				mu.Lock()
				defer mu.Unlock()
				if fail(d) {
					return errors.New("injected: disk on fire")
				}
				return nil
			})
		})
		key, _ := e.CreateKey("app", 0, 0)
		var events [][]byte
		for i := range 50 {
			events = append(events, testenv.CloudEvent("app", fmt.Sprintf("evt_%02d", i), "cus_1", "api_requests", "2"))
		}
		body := testenv.Batch(events...)
		setFail := func(f func(*custody.Delivery) bool) { mu.Lock(); fail = f; mu.Unlock() }

		// Every delivery fails before commit: 503, nothing stored.
		setFail(func(*custody.Delivery) bool { return true })
		r := e.PostEvents(key, ingest.MediaCloudEventBatch, body)
		if r.Code != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "" || r.Reply.Counts["not_stored"] != 50 {
			t.Fatalf("got %d %v (Retry-After %q), want 503 with 50 not_stored", r.Code, r.Reply.Counts, r.Header.Get("Retry-After"))
		}
		if got := e.Rows(); got != [3]int{0, 0, 0} {
			t.Fatalf("after the failure: receipts, attempts, usage = %v, want nothing", got)
		}

		// One event fails alone (the savepoint pass): 503, the other 49 stored.
		setFail(func(d *custody.Delivery) bool { return d.EventID == ingest.EventID("app", "evt_07") })
		if r := e.PostEvents(key, ingest.MediaCloudEventBatch, body); r.Code != 503 || r.Reply.Counts["applied"] != 49 || r.Reply.Counts["not_stored"] != 1 {
			t.Fatalf("one failing: got %d %v, want 503 with 49 applied, 1 not_stored", r.Code, r.Reply.Counts)
		}
		if got := e.Rows(); got != [3]int{49, 49, 49} {
			t.Fatalf("one failing: receipts, attempts, usage = %v, want [49 49 49]", got)
		}

		// The client retries the whole batch: the missing event is applied once,
		// the stored ones are duplicates.
		setFail(func(*custody.Delivery) bool { return false })
		if r := e.PostEvents(key, ingest.MediaCloudEventBatch, body); r.Code != 200 || r.Reply.Counts["applied"] != 1 || r.Reply.Counts["duplicate"] != 49 {
			t.Fatalf("retry: got %d %v", r.Code, r.Reply.Counts)
		}
		if got := e.Rows(); got != [3]int{50, 99, 50} {
			t.Fatalf("after the retry: receipts, attempts, usage = %v, want [50 99 50]", got)
		}
		if got := e.Totals()["cus_1"]; got != 100*ledger.Scale {
			t.Fatalf("total %s, want 100", got)
		}
	})
}

func TestAPIScopeSourceAndIDAreUnambiguous(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		key, _ := e.CreateKey("default", 0, 0) // the same name as the configured webhook provider
		pairs := [][2]string{{"a#b", "c"}, {"a", "b#c"}, {"a%23b", "c"}, {"a%b", "c"}, {"a", "%23"}, {"", "x"}}
		var events [][]byte
		for i, p := range pairs {
			events = append(events, testenv.CloudEvent(p[0], p[1], fmt.Sprintf("cus_%d", i), "api_requests", "1"))
		}
		r := e.PostEvents(key, ingest.MediaCloudEventBatch, testenv.Batch(events...))
		// An empty source is no source: CloudEvents require one.
		if r.Code != 200 || r.Reply.Counts["applied"] != 5 || r.Reply.Results[5].Reason != ingest.RejectNoSource {
			t.Fatalf("got %d %v %+v", r.Code, r.Reply.Counts, r.Reply.Results)
		}
		seen := map[string]bool{}
		for i, res := range r.Reply.Results[:5] {
			src, id, ok := ingest.SplitEventID(res.EventID)
			if !ok || src != pairs[i][0] || id != pairs[i][1] || seen[res.EventID] {
				t.Errorf("pair %q -> event_id %q -> (%q, %q, %v)", pairs[i], res.EventID, src, id, ok)
			}
			seen[res.EventID] = true
		}
		// The webhook provider "default" and the key "default" never share a key.
		if got := e.Send("a%23b#c", testenv.UsageBody("cus_w", "api_requests", "1")); got.Code != 200 || got.Body.Duplicate {
			t.Fatalf("webhook with the same event id: %+v", got)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE provider = 'api:default'`); n != 5 {
			t.Errorf("%d receipts under api:default, want 5", n)
		}
		if got := e.Rows(); got != [3]int{6, 6, 6} {
			t.Errorf("receipts, attempts, usage = %v, want [6 6 6]", got)
		}
	})
}

func TestAPIGenericEventsAndMappingsOnTheScope(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(c *config.Config) {
			c.Usage = append(c.Usage, ledger.Mapping{Provider: "api:jobs", Type: "job.finished",
				Customer: ledger.Field{Path: "data.account"}, Meter: ledger.Field{Value: "job_seconds"}, Quantity: ledger.Field{Path: "data.seconds"}})
		})
		jobs, _ := e.CreateKey("jobs", 0, 0)
		other, _ := e.CreateKey("other", 0, 0)
		generic := testenv.Batch(
			[]byte(`{"id":"g1","type":"usage.recorded","data":{"customer":"cus_a","meter":"api_requests","quantity":3,"occurred_at":"2026-11-28T09:00:00Z"}}`),
			[]byte(`{"id":"g2","type":"usage.recorded","subject":"cus_b","time":"2026-11-27T09:00:00Z","data":{"meter":"api_requests","quantity":"1.5"}}`),
			[]byte(`{"id":"g3","type":"job.finished","data":{"account":"cus_a","seconds":60}}`),
			[]byte(`{"id":"g4","type":"usage.recorded","data":{"meter":"api_requests","quantity":1}}`), // no customer: failed, kept
		)
		r := e.PostEvents(jobs, ingest.MediaGeneric, generic)
		if want := map[string]int{"applied": 3, "failed": 1}; r.Code != 200 || fmt.Sprint(r.Reply.Counts) != fmt.Sprint(want) {
			t.Fatalf("jobs: %d %s", r.Code, r.Raw)
		}
		if r.Reply.Results[0].EventID != "jobs#g1" || r.Reply.Results[3].Error == "" {
			t.Errorf("results %+v: a generic event's source is the key's name; a failed one says why", r.Reply.Results)
		}
		// Under another key the job mapping does not select: the same type is ignored.
		r = e.PostEvents(other, ingest.MediaGeneric, testenv.Batch([]byte(`{"id":"g3","type":"job.finished","data":{"account":"cus_a","seconds":60}}`)))
		if r.Code != 200 || r.Reply.Results[0].Outcome != "ignored" {
			t.Fatalf("other: %d %s", r.Code, r.Raw)
		}
		if got := e.Totals(); got["cus_a"] != 63*ledger.Scale || got["cus_b"] != 1_500_000 {
			t.Fatalf("totals %v", got)
		}
		// subject and time fill what the mapping's paths do not find.
		if n := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE event_id = 'jobs#g2' AND customer_id = 'cus_b' AND occurred_at = ?`,
			int64(1795770000000)); n != 1 {
			t.Errorf("g2's row does not have subject as customer and time as occurred_at")
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE status = 'failed' AND provider = 'api:jobs'`); n != 1 {
			t.Errorf("%d failed receipts, want 1 (kept for replay)", n)
		}
	})
}

func TestAPIBatchWaitsForRoomAndIsAdmittedWhole(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		release := make(chan struct{})
		var once sync.Once
		e := newEnvWithWriter(t, backend, func(w *custody.Writer) {
			w.QueueSize, w.MaxBatch, w.QueueWait = 200, 10, 200*time.Millisecond
			w.SetTestHook(func(*custody.Delivery) error {
				once.Do(func() { <-release }) // the writer stalls on the first event
				return nil
			})
		})
		key, _ := e.CreateKey("app", 0, 0)
		batch := func(from, n int) []byte {
			var events [][]byte
			for i := from; i < from+n; i++ {
				events = append(events, testenv.CloudEvent("app", fmt.Sprintf("evt_%03d", i), "cus_1", "api_requests", "1"))
			}
			return testenv.Batch(events...)
		}
		first := make(chan testenv.EventsResponse)
		go func() {
			defer close(first) // a failed post: the zero response, which the test refuses
			first <- testenv.PostEvents(testenv.Go(t), e.HTTP.URL, key, ingest.MediaCloudEventBatch, batch(0, 150))
		}()
		// The first batch is admitted and queued behind the stalled writer.
		await.Eventually(t, 10*time.Second, "the first batch queued", func() bool { return e.Writer.Depth() >= 140 })
		// 150 of the 200 places are taken: a batch of 100 waits QueueWait for
		// room, then is refused whole: nothing of it is queued or stored.
		r := e.PostEvents(key, ingest.MediaCloudEventBatch, batch(150, 100))
		if r.Code != http.StatusServiceUnavailable || r.Reply.Counts["not_stored"] != 100 || r.Header.Get("Retry-After") == "" {
			t.Fatalf("second: got %d %v, want 503 with 100 not_stored", r.Code, r.Reply.Counts)
		}
		// A batch larger than the whole queue can never be admitted.
		if r := e.PostEvents(key, ingest.MediaCloudEventBatch, batch(300, 201)); r.Code != 503 || r.Reply.Counts["not_stored"] != 201 {
			t.Fatalf("201 events for a queue of 200: got %d %v", r.Code, r.Reply.Counts)
		}
		close(release)
		if r := <-first; r.Code != 200 || r.Reply.Counts["applied"] != 150 {
			t.Fatalf("first: got %d %v", r.Code, r.Reply.Counts)
		}
		if got := e.Rows(); got != [3]int{150, 150, 150} {
			t.Fatalf("receipts, attempts, usage = %v, want [150 150 150]: the refused batch stored nothing", got)
		}
		// With room, the refused batch's retry goes in whole; a waiting batch
		// is admitted as soon as room comes.
		if r := e.PostEvents(key, ingest.MediaCloudEventBatch, batch(150, 100)); r.Code != 200 || r.Reply.Counts["applied"] != 100 {
			t.Fatalf("retry: got %d %v", r.Code, r.Reply.Counts)
		}
		if got := e.Totals()["cus_1"]; got != 250*ledger.Scale {
			t.Fatalf("total %s, want 250", got)
		}
	})
}

func TestAPIFailedEventIsReplayedWithItsSubjectAndTime(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(c *config.Config) {
			c.Usage = append(c.Usage, ledger.Mapping{Type: "seat.added", Customer: ledger.Field{Path: "data.account"},
				Meter: ledger.Field{Value: "seats"}, Quantity: ledger.Field{Path: "data.count"}})
		})
		key, _ := e.CreateKey("app", 0, 0)
		ev := []byte(`{"specversion":"1.0","id":"s1","source":"app","type":"seat.added","subject":"cus_7","time":"2026-11-20T00:00:00Z","data":{"seats":4}}`)
		if r := e.PostEvents(key, ingest.MediaCloudEventBatch, testenv.Batch(ev)); r.Code != 200 || r.Reply.Results[0].Outcome != "failed" {
			t.Fatalf("got %d %s, want the event failed (data.count is missing)", r.Code, r.Raw)
		}
		// The mapping is fixed (quantity from data.seats) and the event replayed:
		// subject and time still fill in customer and occurred_at.
		fixed := ledger.NewMapper([]ledger.Mapping{{Type: "seat.added", Meter: ledger.Field{Value: "seats"},
			Customer: ledger.Field{Path: "data.account"}, Quantity: ledger.Field{Path: "data.seats"}}}, nil)
		rep, err := custody.ReplayReceipts(t.Context(), e.DB, e.Writer, fixed, "test+fixed",
			custody.ReplayFilter{Provider: "api:app", Status: custody.StatusFailed})
		if err != nil || rep.Applied != 1 {
			t.Fatalf("replay: %+v %v", rep, err)
		}
		if n := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE event_id = 'app#s1' AND customer_id = 'cus_7' AND quantity = 4000000
			AND occurred_at = ?`, time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC).UnixMilli()); n != 1 {
			t.Fatal("the replayed row does not have the subject as customer and the time as occurred_at")
		}
	})
}

func TestAPIBatchWaitsForTheReplica(t *testing.T) {
	f := newFakeReplica()
	e := replicaEnv(t, f)
	key, _ := e.CreateKey("app", 0, 0)
	var events [][]byte
	for i := range 20 {
		events = append(events, testenv.CloudEvent("app", fmt.Sprintf("evt_%02d", i), "cus_1", "api_requests", "1"))
	}
	got := make(chan testenv.EventsResponse, 1)
	go func() {
		defer close(got)
		got <- testenv.PostEvents(testenv.Go(t), e.HTTP.URL, key, ingest.MediaCloudEventBatch, testenv.Batch(events...))
	}()
	select {
	case <-f.started: // committed locally, waiting for the replica
	case <-time.After(10 * time.Second):
		t.Fatal("the batch never reached the replica stage")
	}
	select {
	case r := <-got:
		t.Fatalf("answered %d before the replica held the batch", r.Code)
	case <-time.After(100 * time.Millisecond):
	}
	f.open()
	if r := <-got; r.Code != 200 || r.Reply.Counts["applied"] != 20 {
		t.Fatalf("after the replica: %d %v", r.Code, r.Reply.Counts)
	}
}
