package server

import (
	"context"
	"log/slog"
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
func startRelay(ctx context.Context, log *slog.Logger, cfg *config.Config, db *schema.DB, w *custody.Writer,
	met *metrics.Metrics, version string) (*forward.Relay, error) {
	if len(cfg.Destinations) == 0 {
		return nil, nil
	}
	fm := met.WatchForward(db, forward.Names(cfg.Destinations), log)
	r := &forward.Relay{
		DB: db, Writer: w, Destinations: cfg.Destinations, Log: log, Now: time.Now,
		UserAgent: "hookledger/" + version,
		Observe:   func(a forward.Attempt) { fm.ObserveAttempt(a.Destination, a.Outcome, a.Latency) },
		// On SQLite serve holds the data directory's lock: no other relay
		// runs on this database, so the claims a killed serve left are
		// released now. On PostgreSQL other receivers' relays share it, and
		// a dead relay's claims come back when their lease runs out.
		Sole: !db.Postgres(),
	}
	if err := r.Open(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// forwardRoutes mounts the forwarding views and the pull feed on the admin
// listener.
func forwardRoutes(adm *admin.Server, cfg *config.Config, db *schema.DB, w *custody.Writer, relay *forward.Relay) {
	f := &admin.Forward{DB: db, Writer: w, Destinations: forward.Names(cfg.Destinations), Now: time.Now}
	if relay != nil {
		f.Kick = relay.Kick
	}
	f.Routes(adm.Mux)
}
