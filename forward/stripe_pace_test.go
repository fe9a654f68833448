package forward_test

import (
	"fmt"
	"math/big"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

// Stream mode keeps up: 21 customers sending 50 events a second each to a
// Stripe answering in 150 ms reach it in calls that grow with the
// customers, not the events (one meter event per customer and meter per
// interval: its rows joined one open push until the relay claimed it),
// soon after the last event; Stripe's totals are the ledger's (no row
// joined a push after its claim read it), and no identifier is sent twice.
// Before, one call per event at one call at a time per customer drained
// about 6 events a second per customer.
func TestStripeStreamKeepsUpWithManyCustomers(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	fake.Latency = 150 * time.Millisecond
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1", func(c *config.Config) {
		// Stripe's defaults (config resolves them; this configuration is
		// built in code): the interval and the pairs at once.
		c.Stripe.Interval.Duration = config.DefaultStripeInterval
		c.Stripe.Concurrency = config.DefaultStripeConcurrency
	})
	const customers, events = 21, 2600
	start := time.Now()
	var wg sync.WaitGroup
	for c := range customers {
		wg.Go(func() {
			tick := time.NewTicker(20 * time.Millisecond) // 50 events a second
			defer tick.Stop()
			for i := c; i < events; i += customers {
				if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody(fmt.Sprintf("cus_%02d", c), "api_requests", "1")); r.Code != 200 {
					t.Errorf("send evt_%d: %d", i, r.Code)
					return
				}
				<-tick.C
			}
		})
	}
	wg.Wait()
	sent := time.Now()
	await.Eventually(t, 20*time.Second, "every push delivered within 20 s of the last event", func() bool {
		return rowsPushed(e, "delivered") == events
	})
	t.Logf("%d events sent in %s, all at Stripe %s after the last, in %d calls",
		events, sent.Sub(start).Round(time.Millisecond), time.Since(sent).Round(time.Millisecond), len(fake.Snapshot()))
	fake.Mu.Lock()
	calls, seen := fake.Calls, append([]string(nil), fake.Seen...)
	fake.Mu.Unlock()
	if calls > 400 {
		t.Errorf("%d calls to Stripe for %d events, want at most 400", calls, events)
	}
	once := map[string]bool{}
	for _, id := range seen {
		if once[id] {
			t.Errorf("identifier %s sent twice", id)
		}
		once[id] = true
	}
	totals := fake.Totals()
	for c := range customers {
		want := int64(events / customers)
		if c < events%customers {
			want++
		}
		if got := totals[[2]string{fmt.Sprintf("cus_%02d", c), "api_requests"}]; got == nil || got.Cmp(big.NewInt(want)) != 0 {
			t.Errorf("Stripe holds %v for cus_%02d, want the ledger's %d", got, c, want)
		}
	}
}
