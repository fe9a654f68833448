package forward_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
)

// An application that fails its first 50 requests (a long outage) is probed
// at most a minute apart on the clock, one message per probe, however long
// the messages' own backoff has grown; delivery resumes within a minute of
// its recovery and the backlog follows at once. The probes sent before a
// message was due do not use up its attempts, and each message keeps its
// own backoff.
func TestRecoveryFollowsTheApplication(t *testing.T) {
	a := newApp(t)
	a.set(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) })
	d := destination("app", a.srv.URL, oldSecret)
	d.Timeout.Duration = 10 * time.Second
	d.Backoff.Duration, d.MaxBackoff.Duration = config.DefaultForwardBackoff, config.DefaultForwardMaxBackoff
	d.MaxAttempts, d.MaxAge.Duration = config.DefaultForwardMaxAttempts, config.DefaultForwardMaxAge
	lease := 2*d.Timeout.Duration + 5*time.Second
	e := testenv.New(t, testenv.Options{Edits: []func(*config.Config){func(c *config.Config) { c.Destinations = []config.Destination{d} }}})
	const n = 2
	for i := range n {
		if r := e.Send(evtID(i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	relay := &forward.Relay{DB: e.DB, Writer: e.Writer, Destinations: []config.Destination{d}, Log: slog.New(slog.DiscardHandler),
		Poll: 20 * time.Millisecond, Now: e.Clock.Now, Sole: true}
	if err := relay.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(relay.Close)
	ctx := context.Background()

	// The first batch sends every due message; after it fails, one
	// message per probe.
	const failures = 50
	var recovered time.Time
	for i := n; i <= failures; i++ {
		await.Eventually(t, 10*time.Second, "the probe the schedule says was not made", func() bool {
			return e.Int(`SELECT COUNT(*) FROM outbox_attempts`) == i
		})
		if got := len(a.received()); got != i {
			t.Fatalf("%d requests for %d recorded attempts: want one message per probe", got, i)
		}
		st, err := e.DB.DestinationState(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		// The next attempt is the destination's next probe, or the first
		// message's own retry if that comes within a minute of the last
		// attempt.
		last := time.UnixMilli(int64(e.Int(`SELECT MAX(attempted_at) FROM outbox_attempts`)))
		next := time.UnixMilli(st.BackoffUntil)
		if due := time.UnixMilli(int64(e.Int(`SELECT MIN(next_attempt_at) FROM outbox WHERE status = 'pending'`))); due.After(next) &&
			!due.After(last.Add(time.Minute)) {
			next = due
		}
		if wait := next.Sub(last); wait > time.Minute {
			t.Fatalf("after %d failed probes the next comes %s later, want at most a minute", i, wait)
		}
		if i == failures {
			a.ok() // the application is back right after its last failure
			recovered = e.Now()

			// Until now every message kept its own backoff: its next
			// attempt is at least half its exponential delay after its
			// last counted attempt, the probes sent early did not move it
			// and did not count, and none is dead.
			probes := e.Int(`SELECT COUNT(*) FROM outbox_attempts WHERE error LIKE 'probe: %'`)
			if probes == 0 {
				t.Error("no probe was sent before its message was due")
			}
			if sum := e.Int(`SELECT SUM(attempts) FROM outbox`); sum+probes != failures {
				t.Errorf("messages count %d attempts and %d probes, want %d attempts recorded", sum, probes, failures)
			}
			if dead := outboxCount(e, "dead"); dead != 0 {
				t.Errorf("%d messages dead after %d probes, want none before max_attempts of their own", dead, failures)
			}
			var msgs []struct {
				ID       int64 `db:"id"`
				Attempts int   `db:"attempts"`
				Next     int64 `db:"next_attempt_at"`
				Counted  int64 `db:"counted"`
			}
			if err := e.DB.Read.Select(&msgs, `SELECT o.id, o.attempts, o.next_attempt_at,
				(SELECT MAX(a.attempted_at) FROM outbox_attempts a WHERE a.outbox_id = o.id AND a.error NOT LIKE 'probe: %') AS counted
				FROM outbox o`); err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				own := min(d.Backoff.Duration<<(m.Attempts-1), d.MaxBackoff.Duration) / 2
				if got := time.Duration(m.Next-m.Counted) * time.Millisecond; got < own {
					t.Errorf("message %d: next attempt %s after its attempt %d, want its own backoff (at least %s)", m.ID, got, m.Attempts, own)
				}
			}
		}
		e.Clock.Set(next)
	}

	await.Eventually(t, 10*time.Second, "nothing delivered after the application recovered", func() bool { return outboxCount(e, "delivered") >= 1 })
	first := time.UnixMilli(int64(e.Int(`SELECT MIN(delivered_at) FROM outbox WHERE status = 'delivered'`)))
	if late := first.Sub(recovered); late > time.Minute {
		t.Errorf("first delivery %s after the application recovered, want within a minute", late)
	}
	// The rest of the backlog is due within two leases of that delivery,
	// not after the backoff its messages built during the outage.
	// (The forwarder may deliver the last pending message between a count
	// and this query, so none pending reads as zero.)
	if last := e.Int(`SELECT COALESCE(MAX(next_attempt_at), 0) FROM outbox WHERE status = 'pending'`); last > 0 {
		due := time.UnixMilli(int64(last))
		if wait := due.Sub(first); wait > 2*lease {
			t.Errorf("the backlog waits %s after the first delivery, want at most %s", wait, 2*lease)
		}
		e.Clock.Set(due)
	}
	await.Eventually(t, 10*time.Second, "the backlog did not drain", func() bool { return outboxCount(e, "delivered") == n })
	if st, err := e.DB.DestinationState(ctx, "app"); err != nil || st.Failures != 0 || st.BackoffUntil != 0 {
		t.Errorf("after recovery the destination state is %+v (%v), want no failures and no backoff", st, err)
	}
}
