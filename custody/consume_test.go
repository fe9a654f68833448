package custody_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/receiver"
)

// consume posts one consume with key and returns the status and answer.
func consume(t *testing.T, e *env, key, customer, meter, body string) (int, receiver.ConsumeReply, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.HTTP.URL+"/v1/entitlements/"+customer+"/"+meter+"/consume", strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, receiver.ConsumeReply{}, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r receiver.ConsumeReply
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &r); err != nil {
			t.Errorf("a consume's answer does not decode: %v\n%s", err, b)
		}
	}
	return resp.StatusCode, r, string(b)
}

// 32 concurrent consumers make 300 attempts of 1 against a hard limit of
// 100: exactly 100 are allowed, each with its usage row; every refused one
// records no row (its receipt says it was refused); the usage state is the
// ledger's 100.
func TestConsumeNeverOvershoots(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newLimitedEnv(t, backend)
		key, _ := e.CreateKey("app", 0, 0)
		work := make(chan int, 300)
		for i := range 300 {
			work <- i
		}
		close(work)
		var mu sync.Mutex
		allowed := map[string]bool{}
		var wg sync.WaitGroup
		for range 32 {
			wg.Go(func() {
				for i := range work {
					id := fmt.Sprintf("c%03d", i)
					code, r, body := consume(t, e, key, "cus_1", "api_requests", `{"id":"`+id+`","quantity":"1"}`)
					if code != 200 {
						t.Errorf("%s: %d %s", id, code, body)
						continue
					}
					mu.Lock()
					allowed[id] = r.Allowed
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		n := 0
		for _, ok := range allowed {
			if ok {
				n++
			}
		}
		if n != 100 {
			t.Errorf("%d consumes allowed, want exactly 100", n)
		}
		if rows := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE customer_id = 'cus_1'`); rows != 100 {
			t.Errorf("%d usage rows, want 100", rows)
		}
		if refused := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_type = ? AND status = 'ignored'`, ledger.ConsumeRefusedType); refused != 200 {
			t.Errorf("%d refused receipts, want 200", refused)
		}
		// Each allowed consume is the row of its own receipt.
		for id, ok := range allowed {
			rows := e.Int(`SELECT COUNT(*) FROM metered_usage u JOIN receipts r ON r.provider = u.provider AND r.event_id = u.event_id
				WHERE r.event_id = ?`, "consume#"+id)
			if ok != (rows == 1) {
				t.Errorf("%s: allowed %v, %d rows", id, ok, rows)
			}
		}
		checkStateMatchesLedger(t, e)
	})
}

// consumeEnv is the free tier's hard limit of 100 on api_requests, the
// meter declared (one not declared is refused), the usage state built, and
// an API key to consume with.
func consumeEnv(t *testing.T) (*env, string) {
	t.Helper()
	edit, writer := freeTier(t)
	e := newEnvWithWriter(t, "sqlite", writer, edit, func(c *config.Config) {
		c.Meters = []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum}}
	})
	if built, err := e.Writer.BuildUsageState(t.Context(), "UTC"); err != nil || !built {
		t.Fatalf("build usage state: %v %v", built, err)
	}
	key, _ := e.CreateKey("app", 0, 0)
	return e, key
}

// A consume answers the used total and what remains; a repeat of its id
// answers what the first did and writes nothing, allowed or refused; bad
// requests are refused whole, with their reason, and write nothing.
func TestConsumeAnswers(t *testing.T) {
	e, key := consumeEnv(t)
	code, r, body := consume(t, e, key, "cus_1", "api_requests", `{"id":"first","quantity":"60"}`)
	if code != 200 || !r.Allowed || r.Duplicate || r.Used != "60" || r.Limit != "100" || r.Remaining != "40" || r.Kind != "hard" {
		t.Fatalf("first: %d %s", code, body)
	}
	code, r, body = consume(t, e, key, "cus_1", "api_requests", `{"id":"second","quantity":"41"}`)
	if code != 200 || r.Allowed || r.Used != "60" || r.Remaining != "40" {
		t.Errorf("41 more past 100: %d %s, want refused at 60 used", code, body)
	}
	receipts := e.Count("receipts")
	for _, c := range []struct {
		id, quantity string
		allowed      bool
	}{{"first", "60", true}, {"second", "41", false}, {"first", "5", true}} {
		code, r, body := consume(t, e, key, "cus_1", "api_requests", fmt.Sprintf(`{"id":%q,"quantity":%q}`, c.id, c.quantity))
		if code != 200 || !r.Duplicate || r.Allowed != c.allowed || r.Used != "60" {
			t.Errorf("repeat of %s: %d %s, want the first's answer (allowed %v)", c.id, code, body, c.allowed)
		}
	}
	// The id is one consume of one customer and meter: used for another
	// customer, it is refused whole.
	if code, _, body := consume(t, e, key, "cus_2", "api_requests", `{"id":"first","quantity":"60"}`); code != 409 ||
		!strings.Contains(body, `"reason":"id_conflict"`) || !strings.Contains(body, "cus_1/api_requests") {
		t.Errorf("first's id for cus_2: %d %s, want 409 naming cus_1/api_requests", code, body)
	}
	if n := e.Count("receipts"); n != receipts {
		t.Errorf("repeats stored %d receipts, want none", n-receipts)
	}
	if rows := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE customer_id = 'cus_2'`); rows != 0 {
		t.Errorf("%d rows for cus_2, want none", rows)
	}
	code, r, body = consume(t, e, key, "cus_1", "api_requests", `{"id":"third","quantity":"40"}`)
	if code != 200 || !r.Allowed || r.Used != "100" || r.Remaining != "0" {
		t.Errorf("exactly to the limit: %d %s, want allowed, 100 used", code, body)
	}
	before := e.Count("receipts")
	for _, c := range []struct {
		key, path, body string
		code            int
		reason          string
	}{
		{"", "cus_1/api_requests", `{"id":"x","quantity":"1"}`, 401, "missing_key"},
		{"hl_not-a-key", "cus_1/api_requests", `{"id":"x","quantity":"1"}`, 401, "unknown_key"},
		{key, "cus_1/api_requests", `{"quantity":"1"}`, 400, "no_id"},
		{key, "cus_1/api_requests", `{"id":"x","quantity":"0"}`, 400, "bad_request"},
		{key, "cus_1/api_requests", `{"id":"x","quantity":"-1"}`, 400, "bad_request"},
		{key, "cus_1/api_requests", `{"id":"x","quantity":"0.0000001"}`, 400, "bad_request"},
		{key, "cus_1/api_requests", `{"id":"x","quantity":"1","time":"yesterday"}`, 400, "bad_time"},
		{key, "cus_1/api_requests", `{"id":"x","quantity":"1","extra":true}`, 400, "bad_request"},
		{key, "cus_1/api_requests", `not json`, 400, "bad_request"},
		{key, "cus_1/unknown_meter", `{"id":"x","quantity":"1"}`, 400, "bad_request"},
	} {
		parts := strings.SplitN(c.path, "/", 2)
		code, _, body := consume(t, e, c.key, parts[0], parts[1], c.body)
		if code != c.code || !strings.Contains(body, `"reason":"`+c.reason+`"`) {
			t.Errorf("%s %s: %d %s, want %d %s", c.path, c.body, code, body, c.code, c.reason)
		}
	}
	if n := e.Count("receipts"); n != before {
		t.Errorf("refused requests stored %d receipts, want none", n-before)
	}
}

// BenchmarkConsumeAt1000PerSecond sends consumes at 1,000 a second (over
// 1,000 customers, each far from its limit) for b.N seconds to the
// in-process handler over real HTTP, and reports the answers' p50 and p99.
//
//	go test ./custody -run '^$' -bench ConsumeAt1000 -benchtime 5x
func BenchmarkConsumeAt1000PerSecond(b *testing.B) {
	e := newLimitedEnv(b, "sqlite")
	key, _ := e.CreateKey("bench", 0, 0)
	const rate = 1000
	var mu sync.Mutex
	var lat []time.Duration
	tick := time.NewTicker(time.Second / rate)
	defer tick.Stop()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	b.ResetTimer()
	for i := range b.N * rate {
		<-tick.C
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			req, _ := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/entitlements/cus_%d/api_requests/consume", e.HTTP.URL, i%1000),
				strings.NewReader(fmt.Sprintf(`{"id":"b%d","quantity":"1"}`, i)))
			req.Header.Set("Authorization", "Bearer "+key)
			start := time.Now()
			resp, err := http.DefaultClient.Do(req)
			d := time.Since(start)
			if err != nil {
				b.Errorf("consume %d: %v", i, err)
				return
			}
			if resp.StatusCode != 200 {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				b.Errorf("consume %d: %d %s", i, resp.StatusCode, body)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			mu.Lock()
			lat = append(lat, d)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
	if rows := e.Int(`SELECT COUNT(*) FROM metered_usage`); rows != len(lat) {
		b.Errorf("%d rows for %d allowed consumes", rows, len(lat))
	}
}

// The writer keeps what the limit check read (plan assignments,
// overrides) from one batch to the next; an override written in the same
// process, on the writer's own connection where SQLite's data_version does
// not see it, still reaches the next consume: 60 of 100 used, the limit
// lowered to 70, 20 more is refused.
func TestConsumeSeesAnOverrideWrittenBetweenBatches(t *testing.T) {
	e, key := consumeEnv(t)
	if code, r, body := consume(t, e, key, "cus_1", "api_requests", `{"id":"first","quantity":"60"}`); code != 200 || !r.Allowed || r.Limit != "100" {
		t.Fatalf("first: %d %s", code, body)
	}
	if _, err := entitle.SetOverride(t.Context(), e.DB, entitle.Override{Customer: "cus_1", Meter: "api_requests",
		Limit: testenv.Total("70"), Kind: pricing.LimitHard, EffectiveFrom: "2026-01-01", RecordedAt: e.Now()},
		ledger.NewMeters([]ledger.Meter{{Name: "api_requests", Aggregation: ledger.AggSum}})); err != nil {
		t.Fatal(err)
	}
	code, r, body := consume(t, e, key, "cus_1", "api_requests", `{"id":"second","quantity":"20"}`)
	if code != 200 || r.Allowed || r.Limit != "70" || r.Used != "60" {
		t.Fatalf("20 more under an override of 70: %d %s, want refused at 60 of 70", code, body)
	}
	if n := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE customer_id = 'cus_1'`); n != 1 {
		t.Fatalf("%d ledger rows, want the first consume's only", n)
	}
}
