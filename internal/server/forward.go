package server

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/schema"
)

// startRelay starts the forwarding relay for the configured destinations
// (nil when there are none) and registers its metrics. It runs after the
// writer opens, since it submits its claims and outcomes to it, and Close
// stops it before the writer closes.
// forwardYield is how long the relay holds messages back while serve is busy
// taking webhooks (docs/forwarding.md).
const forwardYield = 5 * time.Second

// busyWriter tells whether the writer is near its capacity: it committed a
// batch of several items within the last busyWindow. A lone request
// commits alone, so light traffic never counts as busy (and forwarding is
// not delayed); group commit forms batches only when requests arrive faster
// than one commit, which is the load a relay should yield to. The writer's
// queue depth flickers to zero after every batch it takes, so it is not the
// signal.
type busyWriter struct{ lastMulti atomic.Int64 } // unix ns

const busyWindow = 200 * time.Millisecond

func (b *busyWriter) committed(size int) {
	if size > 1 {
		b.lastMulti.Store(time.Now().UnixNano())
	}
}

func (b *busyWriter) busy() bool {
	return time.Since(time.Unix(0, b.lastMulti.Load())) < busyWindow
}

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
		Busy:     busy,
		YieldFor: forwardYield,
		Observe:  func(a forward.Attempt) { fm.ObserveAttempt(a.Destination, a.Outcome, a.Latency) },
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
