package server

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/schema"
)

// forwardYield is how long the relay holds messages back while serve is busy
// taking webhooks (docs/forwarding.md).
const forwardYield = 2 * time.Second

// busyWriter tells whether the writer is near its capacity: the batches it
// committed lately held busyBatch items or more on average (a moving
// average, each batch weighing busyWeight), and it committed one within
// busyWindow. Group commit forms batches only when requests arrive faster
// than one commit, so the mean batch says how far the writer is from
// keeping up one request at a time. Measured on a 2-core VM
// (BENCHMARKS.md, "Forwarding keeps up"): 1,000 webhooks/s, a sixth of what
// serve takes, committed 93% of its batches alone, mean 1.13, yet a batch
// of several came every few milliseconds, which the signal used to count as
// busy (the relay then held every message 5 s); webhooks as fast as 32
// connections send them committed batches of 13 on average. The writer's
// queue depth flickers to zero after every batch it takes, so it is not
// the signal.
type busyWriter struct {
	now  func() time.Time // default time.Now
	mu   sync.Mutex
	mean float64 // moving average of batch sizes
	last time.Time
}

const (
	busyWindow = 200 * time.Millisecond
	busyBatch  = 4
	busyWeight = 1.0 / 8
)

func (b *busyWriter) clock() time.Time {
	if b.now != nil {
		return b.now()
	}
	return time.Now()
}

func (b *busyWriter) committed(size int) {
	now := b.clock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.Sub(b.last) >= busyWindow {
		b.mean = 1 // idle since: the next burst starts from a lone commit
	}
	b.mean += busyWeight * (float64(size) - b.mean)
	b.last = now
}

func (b *busyWriter) busy() bool {
	now := b.clock()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mean >= busyBatch && now.Sub(b.last) < busyWindow
}

// startRelay starts the forwarding relay for the configured destinations
// (nil when there are none) and registers its metrics. It runs after the
// writer opens, since it submits its claims and outcomes to it, and Close
// stops it before the writer closes.
func startRelay(ctx context.Context, log *slog.Logger, cfg *config.Config, db *schema.DB, w *custody.Writer,
	busy func() bool, met *metrics.Metrics, version string) (*forward.Relay, error) {
	if len(cfg.Destinations) == 0 && cfg.Stripe == nil {
		return nil, nil
	}
	fm := met.WatchForward(db, forward.Names(cfg.OutboxDestinations()), log)
	r := &forward.Relay{
		DB: db, Writer: w, Destinations: cfg.Destinations, Log: log, Now: time.Now,
		UserAgent: "hookledger/" + version,
		// Webhooks first: while serve is busy taking them, messages wait
		// up to forwardYield (forward.Relay.Busy).
		Busy:         busy,
		YieldFor:     forwardYield,
		Observe:      func(a forward.Attempt) { fm.ObserveAttempt(a.Destination, a.Outcome, a.Latency) },
		ObserveLimit: fm.SetConcurrencyLimit,
		// On SQLite serve holds the data directory's lock: no other relay
		// runs on this database, so the claims a killed serve left are
		// released now. On PostgreSQL other receivers' relays share it, and
		// a dead relay's claims come back when their lease runs out.
		Sole: !db.Postgres(),
		// Stripe pushes (docs/stripe.md) go through the same relay.
		Stripe: cfg.Stripe, Pushes: db,
	}
	if err := r.Open(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// forwardRoutes mounts the forwarding views and the pull feed on the admin
// listener.
func forwardRoutes(adm *admin.Server, cfg *config.Config, db *schema.DB, w *custody.Writer, relay *forward.Relay) {
	f := &admin.Forward{DB: db, Writer: w, Destinations: forward.Names(cfg.OutboxDestinations()), Secrets: forward.Secrets(cfg), Now: time.Now}
	if relay != nil {
		f.Kick = relay.Kick
	}
	f.Routes(adm.Mux)
}
