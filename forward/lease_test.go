package forward_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// dying is a receiver's writer that can die: once dead, nothing it is given
// is written, as for a process killed after its claim committed.
type dying struct {
	w    forward.Submitter
	dead atomic.Bool
}

func (d *dying) Submit(ctx context.Context, op custody.Op) error {
	if d.dead.Load() {
		return errors.New("the receiver died")
	}
	return d.w.Submit(ctx, op)
}

// receivers is two receivers on one PostgreSQL database, on one controlled
// clock: the Env's (its writer takes the webhooks) and a second writer of
// its own, as a second serve would have.
func receivers(t *testing.T, d config.Destination) (*testenv.Env, *custody.Writer) {
	t.Helper()
	e := testenv.New(t, testenv.Options{Backend: "postgres", Edits: []func(*config.Config){func(c *config.Config) {
		c.Destinations = []config.Destination{d}
	}}})
	db, err := schema.Open(context.Background(), e.Database(), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	w := custody.NewWriter(db)
	w.Now = e.Clock.Now
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return e, w
}

func startRelay(t *testing.T, e *testenv.Env, w forward.Submitter, d config.Destination) *forward.Relay {
	t.Helper()
	r := &forward.Relay{DB: e.DB, Writer: w, Destinations: []config.Destination{d}, Log: slog.New(slog.DiscardHandler),
		Poll: 20 * time.Millisecond, Now: e.Clock.Now}
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}

// The claims of a receiver that died mid-batch come back to the other
// receivers within one lease, which follows the destination's timeout
// (2 × timeout + 5 s), however large the batch was: receiver A's relay claims
// every message and dies before it records anything; receiver B's relay
// leaves them alone while the lease runs, and delivers each once after it.
func TestDeadReceiversClaimsReturnWithinLease(t *testing.T) {
	appA, appB := newApp(t), newApp(t)
	d := destination("app", appA.srv.URL, oldSecret)
	d.Timeout.Duration, d.Concurrency = time.Second, 1 // a batch of 5 takes 5 timeouts
	lease := 2*d.Timeout.Duration + 5*time.Second
	e, w := receivers(t, d)
	const n = 5
	for i := range n {
		if r := e.Send(evtID(i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}

	a := &dying{w: e.Writer}
	appA.set(func(w http.ResponseWriter, r *http.Request) {
		a.dead.Store(true) // the claim committed; the receiver dies mid-attempt
		<-r.Context().Done()
	})
	startRelay(t, e, a, d)
	await.Eventually(t, 10*time.Second, "receiver A made no attempt", func() bool { return len(appA.received()) > 0 })
	if got := e.Int(`SELECT COUNT(*) FROM outbox WHERE status = 'pending' AND next_attempt_at > ?`, e.Now().UnixMilli()); got != n {
		t.Fatalf("%d messages claimed by receiver A, want %d", got, n)
	}

	dB := d
	dB.URL = appB.srv.URL
	startRelay(t, e, w, dB)
	e.Clock.Add(lease - time.Second)
	time.Sleep(300 * time.Millisecond) // B looks at the outbox many times
	if got := len(appB.received()); got != 0 {
		t.Fatalf("receiver B sent %d messages while A's lease ran", got)
	}
	e.Clock.Add(time.Second + time.Millisecond)
	await.Eventually(t, 20*time.Second, "receiver B did not deliver the dead receiver's messages after its lease", func() bool {
		return outboxCount(e, "delivered") == n
	})
	count, _ := appB.byEvent()
	for i := range n {
		if count[evtID(i)] != 1 {
			t.Errorf("%s reached receiver B's app %d times, want once", evtID(i), count[evtID(i)])
		}
	}
}

// A relay whose batch takes longer than a lease renews it while it works:
// another receiver's relay does not take its messages, and each is delivered
// once.
func TestLiveRelayRenewsItsLease(t *testing.T) {
	appA, appB := newApp(t), newApp(t)
	d := destination("app", appA.srv.URL, oldSecret)
	d.Timeout.Duration, d.Concurrency = time.Minute, 1
	lease := 2*d.Timeout.Duration + 5*time.Second
	e, w := receivers(t, d)
	const n = 3
	for i := range n {
		if r := e.Send(evtID(i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // the app's server waits for its requests
	appA.set(func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.WriteHeader(http.StatusNoContent)
	})
	startRelay(t, e, e.Writer, d)
	await.Eventually(t, 10*time.Second, "receiver A made no attempt", func() bool { return len(appA.received()) == 1 })
	dB := d
	dB.URL = appB.srv.URL
	startRelay(t, e, w, dB)

	// Three leases pass on the clock, a third of one at a time; A renews
	// each time (the rows show it) and B takes nothing.
	for range 9 {
		e.Clock.Add(lease / 3)
		want := e.Now().Add(lease).UnixMilli()
		await.Eventually(t, 10*time.Second, "receiver A did not renew its lease", func() bool {
			return e.Int(`SELECT COUNT(*) FROM outbox WHERE status = 'pending' AND next_attempt_at = ?`, want) == n
		})
	}
	time.Sleep(100 * time.Millisecond)
	once.Do(func() { close(release) })
	await.Eventually(t, 10*time.Second, "receiver A's batch was not delivered", func() bool { return outboxCount(e, "delivered") == n })
	if got := len(appB.received()); got != 0 {
		t.Errorf("receiver B sent %d of the messages receiver A held", got)
	}
	if count, _ := appA.byEvent(); len(count) != n || count[evtID(0)] != 1 || count[evtID(n-1)] != 1 {
		t.Errorf("receiver A's app got %v, want each event once", count)
	}
}
