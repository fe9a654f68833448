package forward_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"

	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
)

// round is one round of healthy answers at the current limit.
func round(a *forward.Adaptive, latency time.Duration) {
	for range a.Limit() {
		a.Answer(time.Now(), true, true, latency)
	}
}

func TestAdaptiveGrowsWhileWorkWaits(t *testing.T) {
	a := forward.NewAdaptive(4, 64)
	if a.Limit() != 4 {
		t.Fatalf("starts at %d, want the floor 4", a.Limit())
	}
	// Nothing waits for a slot: healthy answers leave the limit alone.
	for range 100 {
		a.Answer(time.Now(), false, true, 65*time.Millisecond)
	}
	if a.Limit() != 4 {
		t.Fatalf("grew to %d with no work waiting", a.Limit())
	}
	// Slow start: each round doubles it, up to the ceiling and no further.
	for _, want := range []int{8, 16, 32, 64, 64} {
		round(a, 65*time.Millisecond)
		if a.Limit() != want {
			t.Fatalf("after a round: %d, want %d", a.Limit(), want)
		}
	}
}

func TestAdaptiveHalvesOncePerRound(t *testing.T) {
	a := forward.NewAdaptive(4, 64)
	for range 3 {
		round(a, 65*time.Millisecond)
	}
	if a.Limit() != 32 {
		t.Fatalf("limit %d, want 32", a.Limit())
	}
	before := time.Now()
	a.Answer(before, true, false, 0) // a 429, a 5xx, a timeout: all the same here
	if a.Limit() != 16 {
		t.Fatalf("after a failure: %d, want 16", a.Limit())
	}
	// The rest of the round was sent at 32: their failures do not cut again.
	for range 10 {
		a.Answer(before, true, false, 0)
	}
	if a.Limit() != 16 {
		t.Fatalf("failures sent before the cut cut again: %d, want 16", a.Limit())
	}
	// After a cut it grows by one a round, not doubling.
	round(a, 65*time.Millisecond)
	if a.Limit() != 17 {
		t.Fatalf("a round after the cut: %d, want 17", a.Limit())
	}
	// Failures sent after the cut cut again, never below the floor.
	for range 10 {
		a.Answer(time.Now().Add(time.Second), true, false, 0)
	}
	if a.Limit() != 4 {
		t.Fatalf("after many failures: %d, want the floor 4", a.Limit())
	}
}

// A 2xx that took more than twice the typical latency holds the limit.
func TestAdaptiveHoldsOnSlowAnswers(t *testing.T) {
	a := forward.NewAdaptive(4, 64)
	round(a, 50*time.Millisecond)
	if a.Limit() != 8 {
		t.Fatalf("limit %d, want 8", a.Limit())
	}
	for range 3 {
		a.Answer(time.Now(), true, true, 500*time.Millisecond)
	}
	if a.Limit() != 8 {
		t.Fatalf("slow answers grew the limit to %d", a.Limit())
	}
	a.Answer(time.Now(), true, true, 60*time.Millisecond)
	if a.Limit() != 9 {
		t.Fatalf("a typical answer after the slow ones: %d, want 9", a.Limit())
	}
}

// max_concurrency equal to concurrency (or below it, as a destination
// built without defaults has it) is a fixed limit.
func TestAdaptiveFixed(t *testing.T) {
	for _, c := range []struct{ floor, ceiling int }{{8, 8}, {4, 0}} {
		a := forward.NewAdaptive(c.floor, c.ceiling)
		round(a, time.Millisecond)
		a.Answer(time.Now(), true, false, 0)
		if a.Limit() != c.floor {
			t.Errorf("forward.NewAdaptive(%d, %d): limit %d, want %d", c.floor, c.ceiling, a.Limit(), c.floor)
		}
	}
}

// acquire lets out Limit requests, blocks the next until one is released
// (and a healthy answer while it waits grows the limit), and gives up when
// its context ends.
func TestAdaptiveAcquire(t *testing.T) {
	a := forward.NewAdaptive(2, 3)
	ctx := context.Background()
	for range 2 {
		if err := a.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan error, 1)
	go func() { got <- a.Acquire(ctx) }()
	await.Eventually(t, 5*time.Second, "acquire waiting at the limit", a.Waiting)
	select {
	case err := <-got:
		t.Fatalf("acquire returned %v past the limit", err)
	default:
	}
	a.Release(time.Now(), true, true, 10*time.Millisecond) // healthy, with work waiting: 3
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if a.Limit() != 3 || a.InFlight() != 2 {
		t.Fatalf("limit %d, in flight %d; want 3 and 2", a.Limit(), a.InFlight())
	}
	if err := a.Acquire(ctx); err != nil { // the third slot
		t.Fatal(err)
	}
	// A request the relay abandoned (no outcome) frees its slot, nothing more.
	a.Release(time.Now(), false, false, 0)
	if a.Limit() != 3 || a.InFlight() != 2 {
		t.Fatalf("after an abandoned request: limit %d, in flight %d; want 3 and 2", a.Limit(), a.InFlight())
	}
	if err := a.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	stop := errors.New("relay closing")
	cctx, cancel := context.WithCancelCause(ctx)
	go func() { got <- a.Acquire(cctx) }()
	await.Eventually(t, 5*time.Second, "acquire waiting at the ceiling", a.Waiting)
	cancel(stop)
	if err := <-got; !errors.Is(err, stop) {
		t.Fatalf("acquire after its context ended: %v, want %v", err, stop)
	}
	if a.InFlight() != 3 {
		t.Fatalf("in flight %d after a canceled acquire, want 3", a.InFlight())
	}
}

// slowApp answers after latency, counting the requests in flight at once;
// with throttle set it answers every other request 429.
type slowApp struct {
	srv                 *httptest.Server
	latency             time.Duration
	inFlight, maxFlight atomic.Int64
	throttle            atomic.Bool
	n, ok               atomic.Int64
}

func newSlowApp(t *testing.T, latency time.Duration) *slowApp {
	a := &slowApp{latency: latency}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := a.inFlight.Add(1)
		defer a.inFlight.Add(-1)
		for m := a.maxFlight.Load(); now > m && !a.maxFlight.CompareAndSwap(m, now); m = a.maxFlight.Load() {
		}
		time.Sleep(a.latency) // the application's work
		if a.throttle.Load() && a.n.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		a.ok.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// limits records what the relay reports of a destination's limit.
type limits struct {
	mu   sync.Mutex
	seen []int
}

func (l *limits) observe(_ string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, n)
}

func (l *limits) first() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[0]
}

func (l *limits) last() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[len(l.seen)-1]
}

func (l *limits) highest() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Max(l.seen)
}

// relayAfter sends n events to e, then opens a relay on them, so the relay
// finds a backlog.
func relayAfter(t *testing.T, e *testenv.Env, n int, d config.Destination, l *limits) {
	t.Helper()
	for i := range n {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	r := &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: []config.Destination{d}, Log: slog.New(slog.DiscardHandler),
		Poll: 50 * time.Millisecond, Sole: true, ObserveLimit: l.observe}
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
}

// With a backlog and healthy answers the relay raises a destination's
// requests in flight from concurrency towards max_concurrency, never past
// it; answers of 429 bring it back to concurrency.
func TestRelayAdaptsConcurrency(t *testing.T) {
	a := newSlowApp(t, 20*time.Millisecond)
	d := destination("app", a.srv.URL, oldSecret)
	d.Concurrency, d.MaxConcurrency = 2, 16
	e := testenv.New(t, testenv.Options{RealTime: true, Edits: []func(*config.Config){func(c *config.Config) {
		c.Destinations = []config.Destination{d}
	}}})
	var l limits
	relayAfter(t, e, 300, d, &l)
	await.Eventually(t, 30*time.Second, "the backlog delivered", func() bool { return outboxCount(e, "delivered") == 300 })
	if m := a.maxFlight.Load(); m <= 2 || m > 16 {
		t.Errorf("at most %d requests in flight, want more than concurrency (2) and at most max_concurrency (16)", m)
	}
	if h := l.highest(); h <= 2 || h > 16 {
		t.Errorf("the highest limit reported %d, want from 3 to 16", h)
	}
	if first := l.first(); first != 2 {
		t.Errorf("the relay opened at limit %d, want concurrency (2)", first)
	}

	a.throttle.Store(true)
	for i := range 100 {
		if r := e.Send(fmt.Sprintf("evt_throttled_%d", i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	await.Eventually(t, 30*time.Second, "the limit back at concurrency after 429s", func() bool { return l.last() == 2 })
	a.throttle.Store(false)
	await.Eventually(t, 30*time.Second, "everything delivered after the 429s", func() bool { return outboxCount(e, "delivered") == 400 })
}

// rate_limit still caps: a destination held to 50 requests/s never has
// work waiting for a slot, so its limit stays at concurrency.
func TestRateLimitCapsAdaptiveConcurrency(t *testing.T) {
	a := newSlowApp(t, 20*time.Millisecond)
	d := destination("app", a.srv.URL, oldSecret)
	d.Concurrency, d.MaxConcurrency = 2, 16
	d.RateLimit = &config.RateLimit{PerSecond: 50, Burst: 1}
	e := testenv.New(t, testenv.Options{RealTime: true, Edits: []func(*config.Config){func(c *config.Config) {
		c.Destinations = []config.Destination{d}
	}}})
	var l limits
	relayAfter(t, e, 30, d, &l)
	await.Eventually(t, 30*time.Second, "the backlog delivered", func() bool { return outboxCount(e, "delivered") == 30 })
	if h := l.highest(); h != 2 {
		t.Errorf("the limit reached %d under a rate limit of 50/s, want concurrency (2)", h)
	}
	if m := a.maxFlight.Load(); m > 2 {
		t.Errorf("%d requests in flight under a rate limit of 50/s with 20 ms answers, want at most 2", m)
	}
}

// A relay closed while its batch waits for a slot releases every message
// of the batch, the one in flight and those never sent: no attempt is
// recorded, and the next relay delivers them all.
func TestCloseWhileWaitingForASlot(t *testing.T) {
	unblock := make(chan struct{})
	var arrived atomic.Int64
	a := newApp(t)
	a.set(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-unblock:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusNoContent)
	})
	t.Cleanup(func() { close(unblock) })
	d := destination("app", a.srv.URL, oldSecret)
	d.Timeout.Duration = time.Minute
	d.Concurrency, d.MaxConcurrency = 1, 1
	e := testenv.New(t, testenv.Options{RealTime: true, Edits: []func(*config.Config){func(c *config.Config) {
		c.Destinations = []config.Destination{d}
	}}})
	for i := range 3 {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	open := func() *forward.Relay {
		r := &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: []config.Destination{d}, Log: slog.New(slog.DiscardHandler),
			Poll: 50 * time.Millisecond, Sole: true}
		if err := r.Open(context.Background()); err != nil {
			t.Fatal(err)
		}
		return r
	}
	r := open()
	await.Eventually(t, 10*time.Second, "the first request in flight, the others waiting for its slot", func() bool { return arrived.Load() == 1 })
	r.Close()
	if n := e.Int(`SELECT COUNT(*) FROM outbox_attempts`); n != 0 {
		t.Errorf("%d attempts recorded after a close, want none", n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM outbox WHERE status = 'pending' AND attempts = 0 AND next_attempt_at <= ?`, time.Now().UnixMilli()); n != 3 {
		t.Errorf("%d messages pending and due with no attempt after the close, want 3", n)
	}
	a.ok()
	r = open()
	t.Cleanup(r.Close)
	await.Eventually(t, 10*time.Second, "all three delivered by the next relay", func() bool { return outboxCount(e, "delivered") == 3 })
}
