package forward_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// Two secrets, as during a rotation.
const (
	oldSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	newSecret = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"
)

// app is a destination: it records every request and answers as its
// handler says (default 204).
type app struct {
	t    *testing.T
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []received
	// answer, when set, answers instead of 204; it may block.
	answer atomic.Pointer[func(w http.ResponseWriter, r *http.Request)]
}

type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newApp(t *testing.T) *app {
	a := &app{t: t}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.reqs = append(a.reqs, received{header: r.Header.Clone(), body: body, at: time.Now()})
		a.mu.Unlock()
		if f := a.answer.Load(); f != nil {
			(*f)(w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *app) set(f func(w http.ResponseWriter, r *http.Request)) { a.answer.Store(&f) }
func (a *app) ok()                                                { a.answer.Store(nil) }

func (a *app) received() []received {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]received(nil), a.reqs...)
}

// byEvent is how many requests carried each event id, and the webhook-ids
// each event came with.
func (a *app) byEvent() (count map[string]int, ids map[string]map[string]bool) {
	count, ids = map[string]int{}, map[string]map[string]bool{}
	for _, r := range a.received() {
		ev := r.header.Get(forward.HeaderEventID)
		count[ev]++
		if ids[ev] == nil {
			ids[ev] = map[string]bool{}
		}
		ids[ev][r.header.Get("Webhook-Id")] = true
	}
	return count, ids
}

// destination is a config destination for url with test-sized timings.
func destination(name, url string, secrets ...string) config.Destination {
	d := config.Destination{Name: name, URL: url, MaxAttempts: 50, Concurrency: 4}
	for _, s := range secrets {
		d.Secrets = append(d.Secrets, config.Secret{Value: s})
	}
	d.Timeout.Duration = 300 * time.Millisecond
	d.MaxAge.Duration = time.Hour
	d.Backoff.Duration = 20 * time.Millisecond
	d.MaxBackoff.Duration = 100 * time.Millisecond
	return d
}

// env is a write path with destinations and a running relay, on the real clock.
func env(t *testing.T, dests ...config.Destination) (*testenv.Env, *forward.Relay) {
	t.Helper()
	e := testenv.New(t, testenv.Options{RealTime: true, Edits: []func(*config.Config){func(c *config.Config) {
		c.Destinations = dests
	}}})
	r := &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: dests, Log: slog.New(slog.DiscardHandler), Poll: 50 * time.Millisecond, Sole: true}
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close) // before the Env closes the writer (cleanups run last first)
	return e, r
}

func outboxCount(e *testenv.Env, status string) int {
	return e.Int(`SELECT COUNT(*) FROM outbox WHERE status = ?`, status)
}

// The forwarded signature verifies with the Standard Webhooks (Svix) library,
// for each secret of a rotation, and the headers name the event.
func TestForwardedSignatureVerifiesWithSvix(t *testing.T) {
	a := newApp(t)
	e, _ := env(t, destination("app", a.srv.URL, oldSecret, newSecret))
	body := testenv.UsageBody("cus_1", "api_requests", "3")
	if r := e.Send("evt_sig", body); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 5*time.Second, "the event was not forwarded", func() bool { return len(a.received()) == 1 })
	got := a.received()[0]
	if string(got.body) != string(body) {
		t.Errorf("forwarded body %q, want the raw body %q", got.body, body)
	}
	for _, secret := range []string{oldSecret, newSecret} {
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(got.body, got.header); err != nil {
			t.Errorf("svix verify with %s…: %v", secret[:10], err)
		}
	}
	wh, _ := svix.NewWebhook("whsec_" + "dGhpcyBpcyBub3QgdGhlIHNlY3JldCBhdCBhbGw=")
	if err := wh.Verify(got.body, got.header); err == nil {
		t.Error("a secret the destination does not have verified the signature")
	}
	for h, want := range map[string]string{forward.HeaderProvider: "default", forward.HeaderEventID: "evt_sig",
		forward.HeaderEventType: "usage.recorded", "Webhook-Id": custody.MessageID("default", "evt_sig", "app")} {
		if v := got.header.Get(h); v != want {
			t.Errorf("%s = %q, want %q", h, v, want)
		}
	}
	await.Eventually(t, 5*time.Second, "the message is not delivered", func() bool { return outboxCount(e, "delivered") == 1 })
	if n := e.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE status_code = 204`); n != 1 {
		t.Errorf("%d attempts recorded with 204, want 1", n)
	}
}

// A duplicate delivery adds no outbox row; a failed mapping and an ignored
// event are forwarded too; events a destination does not select are not.
func TestOutboxRowsPerNewReceipt(t *testing.T) {
	a, b := newApp(t), newApp(t)
	all := destination("all", a.srv.URL, oldSecret)
	usageOnly := destination("usage", b.srv.URL, oldSecret)
	usageOnly.Events.Types = []string{"usage.*"}
	e, _ := env(t, all, usageOnly)

	good := testenv.UsageBody("cus_1", "api_requests", "3")
	bad := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":"lots"}}`)
	other := []byte(`{"type":"invoice.paid","data":{}}`)
	for _, c := range []struct {
		id   string
		body []byte
	}{{"evt_good", good}, {"evt_good", good}, {"evt_bad", bad}, {"evt_other", other}} {
		if r := e.Send(c.id, c.body); r.Code != 200 {
			t.Fatalf("send %s: %d", c.id, r.Code)
		}
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE status = 'failed'`); n != 1 {
		t.Fatalf("%d failed receipts, want 1", n)
	}
	// all: 3 events (no second row for the duplicate); usage: evt_good and evt_bad.
	for dest, want := range map[string]int{"all": 3, "usage": 2} {
		if n := e.Int(`SELECT COUNT(*) FROM outbox WHERE destination = ?`, dest); n != want {
			t.Errorf("%s: %d outbox rows, want %d", dest, n, want)
		}
	}
	if n := e.Int(`SELECT COUNT(*) FROM outbox o JOIN receipts r ON r.id = o.receipt_id WHERE r.event_id = 'evt_good'`); n != 2 {
		t.Errorf("evt_good: %d outbox rows, want 2 (one per destination; the duplicate adds none)", n)
	}
	await.Eventually(t, 5*time.Second, "not everything was delivered", func() bool { return outboxCount(e, "delivered") == 5 })
	count, _ := a.byEvent()
	if count["evt_bad"] != 1 || count["evt_other"] != 1 || count["evt_good"] != 1 {
		t.Errorf("destination all received %v, want each event once", count)
	}
	count, _ = b.byEvent()
	if count["evt_other"] != 0 || count["evt_bad"] != 1 {
		t.Errorf("destination usage received %v: want the failed usage event and not invoice.paid", count)
	}
}

// A destination that is down for a while (connection refused, 500, 429 with
// Retry-After, a hang past the timeout) accumulates a backlog that drains
// when it recovers; nothing is dead before max_attempts; every attempt is
// recorded; a dead message comes back with forward retry and is delivered
// once.
func TestOutageBacklogDrains(t *testing.T) {
	a := newApp(t)
	// A port that refuses connections: listen, note the address, close.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String()
	ln.Close()

	d := destination("app", refused, oldSecret)
	e, relay := env(t, d)
	const n = 20
	send := func(from int) {
		for i := from; i < from+n/4; i++ {
			if r := e.Send(evtID(i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
				t.Fatalf("send: %d", r.Code)
			}
		}
	}
	attempts := func() int { return e.Int(`SELECT COUNT(*) FROM outbox_attempts`) }
	// 1. Connection refused: the destination backs off; one probe at a time.
	send(0)
	await.Eventually(t, 5*time.Second, "no refused attempt recorded", func() bool {
		return e.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE status_code = 0 AND error LIKE '%refused%'`) >= 2
	})
	relay.Close()

	// The same relay configuration, now pointed at the app, which fails in
	// three ways before it recovers.
	d.URL = a.srv.URL
	relay = &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: []config.Destination{d}, Log: slog.New(slog.DiscardHandler),
		Poll: 50 * time.Millisecond, Sole: true}
	var retryAfterSeen atomic.Int64
	a.set(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError)
		io.WriteString(w, "boom")
	})
	if err := relay.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	send(n / 4)
	await.Eventually(t, 5*time.Second, "no 500 recorded", func() bool {
		return e.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE status_code = 500 AND response = ?`, []byte("boom")) >= 2
	})
	a.set(func(w http.ResponseWriter, r *http.Request) {
		retryAfterSeen.Store(time.Now().UnixMilli())
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	send(n / 2)
	await.Eventually(t, 5*time.Second, "no 429 recorded", func() bool {
		return e.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE status_code = 429`) >= 1
	})
	// Retry-After: 1 holds the whole destination back about a second, not
	// the 20-100 ms backoff.
	first429 := attempts()
	time.Sleep(500 * time.Millisecond)
	if got := attempts(); got > first429+1 {
		t.Errorf("%d attempts within 500ms of a Retry-After: 1, want at most one more", got-first429)
	}
	release := make(chan struct{})
	a.set(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(2 * time.Second): // well past the 300ms timeout
		}
		w.WriteHeader(http.StatusNoContent)
	})
	send(3 * n / 4)
	await.Eventually(t, 5*time.Second, "no timeout recorded", func() bool {
		return e.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE error LIKE 'timeout%'`) >= 1
	})
	if dead := outboxCount(e, "dead"); dead != 0 {
		t.Fatalf("%d dead messages before max_attempts", dead)
	}
	if pending := outboxCount(e, "pending"); pending != n {
		t.Fatalf("backlog %d, want %d", pending, n)
	}
	// Recovery: the backlog drains, each event at least once, under one id.
	close(release)
	a.ok()
	await.Eventually(t, 10*time.Second, "the backlog did not drain", func() bool { return outboxCount(e, "delivered") == n })
	count, ids := a.byEvent()
	for i := range n {
		if count[evtID(i)] == 0 || len(ids[evtID(i)]) != 1 {
			t.Errorf("%s: %d requests under %d webhook-ids, want ≥1 under 1", evtID(i), count[evtID(i)], len(ids[evtID(i)]))
		}
	}
	// Every attempt is recorded: the rows' attempt counts add up to the
	// attempts table, and each message has at least its delivering attempt.
	if sum := e.Int(`SELECT SUM(attempts) FROM outbox`); sum != attempts() {
		t.Errorf("messages count %d attempts, the attempts table holds %d", sum, attempts())
	}
	if n := e.Int(`SELECT COUNT(*) FROM outbox o WHERE NOT EXISTS (SELECT 1 FROM outbox_attempts a WHERE a.outbox_id = o.id AND a.status_code = 204)`); n != 0 {
		t.Errorf("%d delivered messages without their 2xx attempt", n)
	}
	if st, err := e.DB.DestinationState(context.Background(), "app"); err != nil || st.Failures != 0 || st.BackoffUntil != 0 {
		t.Errorf("after recovery the destination state is %+v (%v), want no failures and no backoff", st, err)
	}
}

// After max_attempts a message is dead and stays; forward retry brings it
// back, and it is delivered once.
func TestDeadMessageRetried(t *testing.T) {
	a := newApp(t)
	a.set(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	d := destination("app", a.srv.URL, oldSecret)
	d.MaxAttempts = 3
	e, relay := env(t, d)
	if r := e.Send("evt_dead", testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	await.Eventually(t, 5*time.Second, "the message did not die", func() bool { return outboxCount(e, "dead") == 1 })
	if n := e.Int(`SELECT attempts FROM outbox`); n != 3 {
		t.Errorf("dead after %d attempts, want max_attempts = 3", n)
	}
	time.Sleep(300 * time.Millisecond)
	if got := len(a.received()); got != 3 {
		t.Errorf("%d requests for a dead message, want 3 (no attempt after dead)", got)
	}
	a.ok()
	msgs, err := forward.List(context.Background(), e.DB, schema.OutboxFilter{Destination: "app", Status: "dead"}, nil)
	if err != nil || len(msgs) != 1 || msgs[0].LastStatus != 502 || msgs[0].LastError != "HTTP 502" {
		t.Fatalf("dead list: %+v %v", msgs, err)
	}
	n, err := forward.Retry(context.Background(), e.Writer, schema.OutboxRetry{MessageID: msgs[0].MessageID}, time.Now())
	if err != nil || n != 1 {
		t.Fatalf("retry: %d %v", n, err)
	}
	relay.Kick()
	await.Eventually(t, 5*time.Second, "the retried message was not delivered", func() bool { return outboxCount(e, "delivered") == 1 })
	time.Sleep(200 * time.Millisecond)
	if got := a.received(); len(got) != 4 || got[3].header.Get("Webhook-Id") != msgs[0].MessageID {
		t.Errorf("%d requests, want 3 failed and 1 delivered under the same webhook-id", len(got))
	}
	if _, err := forward.Retry(context.Background(), e.Writer, schema.OutboxRetry{MessageID: msgs[0].MessageID}, time.Now()); err == nil {
		t.Error("retry of a delivered message succeeded")
	}
	if _, err := forward.Retry(context.Background(), e.Writer, schema.OutboxRetry{MessageID: "msg_nope"}, time.Now()); err == nil {
		t.Error("retry of an unknown message succeeded")
	}
}

// A message older than max_age is dead after its next failure, not before.
func TestMaxAge(t *testing.T) {
	a := newApp(t)
	a.set(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	d := destination("app", a.srv.URL, oldSecret)
	d.MaxAge.Duration = 400 * time.Millisecond
	e, _ := env(t, d)
	e.Send("evt_age", testenv.UsageBody("cus_1", "api_requests", "1"))
	await.Eventually(t, 5*time.Second, "the message did not die of age", func() bool { return outboxCount(e, "dead") == 1 })
	var created, last int64
	if err := e.DB.Read.QueryRow(`SELECT pending_since, last_attempt_at FROM outbox`).Scan(&created, &last); err != nil {
		t.Fatal(err)
	}
	if last-created < 400 {
		t.Errorf("dead %d ms after it became pending, before max_age (400ms)", last-created)
	}
}

// A paused destination is not attempted and keeps its messages; resumed,
// it delivers them.
func TestPauseResume(t *testing.T) {
	a := newApp(t)
	e, relay := env(t, destination("app", a.srv.URL, oldSecret))
	ctx := context.Background()
	if err := forward.SetPaused(ctx, e.Writer, "app", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.Send(evtID(i), testenv.UsageBody("cus_1", "api_requests", "1"))
	}
	time.Sleep(300 * time.Millisecond)
	if got := len(a.received()); got != 0 || outboxCount(e, "pending") != 5 {
		t.Fatalf("paused: %d requests, %d pending; want 0 and 5", got, outboxCount(e, "pending"))
	}
	st, err := forward.Status(ctx, e.DB, []string{"app"}, nil, time.Now())
	if err != nil || len(st) != 1 || !st[0].Paused || st[0].Pending != 5 || st[0].OldestPendingAge <= 0 {
		t.Errorf("status: %+v %v", st, err)
	}
	if err := forward.SetPaused(ctx, e.Writer, "app", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	relay.Kick()
	await.Eventually(t, 5*time.Second, "not delivered after resume", func() bool { return outboxCount(e, "delivered") == 5 })
	if err := forward.CheckDestination(ctx, e.DB, []string{"app"}, "nope"); err == nil {
		t.Error("an unknown destination passed the check")
	}
}

// A destination that hangs delays neither ingest nor another destination.
func TestSlowDestinationIsolated(t *testing.T) {
	slow, fast := newApp(t), newApp(t)
	block := make(chan struct{})
	defer close(block)
	slow.set(func(w http.ResponseWriter, r *http.Request) { <-block })
	sd := destination("slow", slow.srv.URL, oldSecret)
	sd.Timeout.Duration = 5 * time.Second
	e, _ := env(t, sd, destination("fast", fast.srv.URL, oldSecret))
	const n = 40
	var worst time.Duration
	for i := range n {
		start := time.Now()
		if r := e.Send(evtID(i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
		worst = max(worst, time.Since(start))
	}
	if worst > 2*time.Second {
		t.Errorf("the slowest webhook took %s while a destination hangs", worst)
	}
	await.Eventually(t, 3*time.Second, "the fast destination was held up by the slow one", func() bool {
		return e.Int(`SELECT COUNT(*) FROM outbox WHERE destination = 'fast' AND status = 'delivered'`) == n
	})
	if n := e.Int(`SELECT COUNT(*) FROM outbox WHERE destination = 'slow' AND status = 'delivered'`); n != 0 {
		t.Errorf("%d delivered to the hanging destination", n)
	}
}

func evtID(i int) string { return "evt_" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// While the receiver is busy, messages wait, up to YieldFor; then they go
// however busy it is, and at once when it is not.
func TestRelayYieldsToABusyReceiver(t *testing.T) {
	a := newApp(t)
	dests := []config.Destination{destination("app", a.srv.URL, oldSecret)}
	e := testenv.New(t, testenv.Options{RealTime: true, Edits: []func(*config.Config){func(c *config.Config) { c.Destinations = dests }}})
	var busy atomic.Bool
	busy.Store(true)
	relay := &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: dests, Log: slog.New(slog.DiscardHandler),
		Poll: 50 * time.Millisecond, Linger: 20 * time.Millisecond, Sole: true, Busy: busy.Load, YieldFor: 700 * time.Millisecond}
	if err := relay.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	start := time.Now()
	e.Send(evtID(1), testenv.UsageBody("cus_1", "api_requests", "1"))
	await.Eventually(t, 5*time.Second, "not delivered while busy", func() bool { return len(a.received()) == 1 })
	if waited := a.received()[0].at.Sub(start); waited < 600*time.Millisecond {
		t.Errorf("delivered %v after the event while the receiver was busy, want about YieldFor (700ms)", waited)
	}
	busy.Store(false)
	start = time.Now()
	e.Send(evtID(2), testenv.UsageBody("cus_1", "api_requests", "1"))
	await.Eventually(t, 5*time.Second, "not delivered when idle", func() bool { return len(a.received()) == 2 })
	if waited := a.received()[1].at.Sub(start); waited > 500*time.Millisecond {
		t.Errorf("delivered %v after the event with the receiver idle, want at once", waited)
	}
}
