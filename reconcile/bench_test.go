package reconcile

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
)

// seedStripe puts n events (ids prefixed by run) into the fake API and stores
// all but every tenth through the writer, as if webhooks had delivered them.
func seedStripe(b *testing.B, e *env, run, n int) {
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		body := []byte(fmt.Sprintf(`{"id":"evt_%d_%05d","object":"event","type":"billing.meter_event","created":%d,"data":{"object":{"customer":"cus_%d","value":%d}}}`,
			run, i, testNow.Add(-time.Hour).Add(time.Duration(i)*time.Millisecond).Unix(), i%50, i%7+1))
		e.stripe.add(body)
		if i%500 == 0 {
			wg.Wait() // stay well inside the writer's queue
		}
		if i%10 == 0 {
			continue
		}
		sum := sha256.Sum256(body)
		d := &custody.Delivery{Provider: "stripe", EventID: fmt.Sprintf("evt_%d_%05d", run, i), EventType: "billing.meter_event",
			Body: body, BodySHA256: sum[:], Source: custody.SourceWebhook, HandlerVersion: "bench", ReceivedAt: testNow}
		d.Classify(e.Server.Mapper)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.Writer.Submit(context.Background(), d); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
}

// BenchmarkReconcileStripe reconciles 1,000 events (10 pages of the fake
// events API over loopback HTTP), 100 of them missing: lookups, inserts
// through the writer, a checkpoint per page.
func BenchmarkReconcileStripe(b *testing.B) {
	e := newEnv(b, envOptions{})
	const n = 1000
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		e.stripe.mu.Lock()
		e.stripe.events, e.stripe.created, e.stripe.ids = nil, nil, nil
		e.stripe.mu.Unlock()
		seedStripe(b, e, i, n)
		r := e.reconciler("stripe")
		b.StartTimer()
		rep, err := r.Run(context.Background(), Options{Since: 2 * time.Hour})
		if err != nil || rep.Inserted != n/10 || rep.Seen != n {
			b.Fatalf("err %v report %+v", err, rep)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkReconcileStripeNothingMissing is the steady state: every listed
// event is already stored, so a run is listing plus one lookup per page.
func BenchmarkReconcileStripeNothingMissing(b *testing.B) {
	e := newEnv(b, envOptions{})
	const n = 1000
	seedStripe(b, e, 0, n)
	r := e.reconciler("stripe")
	if _, err := r.Run(context.Background(), Options{Since: 2 * time.Hour}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		rep, err := r.Run(context.Background(), Options{Since: 2 * time.Hour})
		if err != nil || rep.AlreadyPresent != n {
			b.Fatalf("err %v report %+v", err, rep)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkStripeListOnly is the same-run reference for the two above: only
// listing the 10 pages over loopback HTTP and decoding them, no database.
func BenchmarkStripeListOnly(b *testing.B) {
	e := newEnv(b, envOptions{})
	const n = 1000
	seedStripe(b, e, 0, n)
	src := e.reconciler("stripe").Source
	w := Window{From: testNow.Add(-2 * time.Hour), To: testNow}
	for b.Loop() {
		seen, cursor := 0, ""
		for {
			p, err := src.List(context.Background(), w, cursor)
			if err != nil {
				b.Fatal(err)
			}
			seen += len(p.Events)
			if cursor = p.Next; cursor == "" {
				break
			}
		}
		if seen != n {
			b.Fatalf("listed %d", seen)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkPruneBodies prunes the bodies of 10,000 receipts (20 writer ops of 500).
func BenchmarkPruneBodies(b *testing.B) {
	e := newEnv(b, envOptions{})
	const n = 10000
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		e.Clock.Set(testNow.Add(time.Duration(i) * time.Hour))
		seedStripe(b, e, i, n+n/9+1) // every tenth is not stored: n stored
		b.StartTimer()
		rep, err := Prune(context.Background(), e.DB, e.Writer, Retention{Payload: time.Minute}, testNow.Add(time.Duration(i)*time.Hour+time.Hour), false)
		if err != nil || rep.BodiesPruned < n {
			b.Fatalf("err %v report %+v", err, rep)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "bodies/s")
}
