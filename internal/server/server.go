// Package server is `hookledger serve` as a type: Open takes the data
// directory, binds the listeners and starts everything in one order; Run
// serves until its context ends; Close stops everything in one explicit order
// (see Close). Its parts have their own files: background.go (periodic
// reconcile, prune and credit expiry), invoicing.go (scheduled invoice
// closes), replication.go (Litestream), tls.go (the certificate and its
// reload on SIGHUP), headlog.go (chain-head anchors), logging.go
// (rate-limited storage and replication errors).
package server

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/console"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/durable"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/health"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
)

// Operating thresholds.
const (
	// minFreeDisk: below this much free space /readyz reports the disk check
	// failing, before SQLite starts failing commits.
	minFreeDisk = 64 << 20
	// DefaultShutdownTimeout bounds how long Close waits for in-flight
	// requests (and so for their batches) before closing their connections.
	DefaultShutdownTimeout = 30 * time.Second
)

// Server is one running `hookledger serve`. Set the exported fields, then
// Open, Run and Close; a Server is used once.
type Server struct {
	// Config is the resolved configuration. A default secret still to be
	// generated is kept in memory (config.DefaultUnsaved) until Open has
	// validated everything else: a serve that cannot start leaves nothing.
	Config *config.Config
	// TLSCert and TLSKey, when set, serve HTTPS with this PEM pair,
	// reloaded on SIGHUP. Both or neither.
	TLSCert, TLSKey string
	// Replication is Litestream's configuration; the zero value replicates
	// nothing.
	Replication Replication
	// Version and Commit identify the binary (metrics, receipts' handler version).
	Version, Commit string
	// Log is the process logger. Default slog.Default().
	Log *slog.Logger
	// Banner receives the one-time notice of a generated default secret
	// (the terminal, not the log). Default os.Stderr.
	Banner io.Writer
	// ShutdownTimeout bounds the wait for in-flight requests in Close.
	// Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
	// LogSummary is how often the deliveries are logged, one line per
	// provider (summary.go); each delivery's own line is at debug.
	// Default DefaultLogSummary; negative: never.
	LogSummary time.Duration

	// Set by Open, in its order; Close undoes them in its own.
	certs          *certReloader
	repl           *serveReplication
	providers      map[string]*receiver.Provider
	adm            *admin.Server
	lock           *schema.DirLock
	ln, aln        net.Listener // webhook and admin (nil unless admin tokens) listeners
	db             *schema.DB
	stopHeadLog    func()
	stopSummary    func()
	writer         *custody.Writer
	relay          *forward.Relay // nil without destinations
	stopBackground func()
	servers        []*http.Server
	listeners      []net.Listener // servers[i] serves listeners[i]
	opened         bool
}

// Open starts serve in three phases, so that a serve that cannot start
// fails as early as possible and leaves nothing behind:
//
//  1. validate everything, creating nothing: TLS files, replication,
//     providers, the admin listener's tokens;
//  2. take the data directory (if it exists) and bind the listeners: a
//     second serve on this directory, a port in use or an address that
//     cannot be bound fail here;
//  3. side effects, in order: the data directory and its lock, the
//     generated secret, restore-if-missing, the database, replication, the
//     writer, the background jobs, the HTTP servers.
//
// ctx ends the background work (jobs, certificate reload, replication
// checks); on an error Open closes what it had opened, as Close does.
func (s *Server) Open(ctx context.Context) (err error) {
	if s.Log == nil {
		s.Log = slog.Default()
	}
	if s.Banner == nil {
		s.Banner = os.Stderr
	}
	if s.ShutdownTimeout == 0 {
		s.ShutdownTimeout = DefaultShutdownTimeout
	}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	if err := s.validate(); err != nil {
		return err
	}
	if err := s.bind(); err != nil {
		return err
	}
	return s.start(ctx)
}

// validate is phase 1: it reads files but creates none and contacts nothing.
func (s *Server) validate() (err error) {
	if s.TLSCert != "" || s.TLSKey != "" {
		if s.certs, err = newCertReloader(s.TLSCert, s.TLSKey); err != nil {
			return err
		}
	}
	if s.repl, err = newReplication(s.Replication, s.Log); err != nil { // litestream.yml, incl. its database path
		return err
	}
	if s.providers, err = receiver.NewProviders(s.Config.Providers); err != nil {
		return err
	}
	// admin.New refuses a non-loopback listener without a token, or with one
	// shorter than admin.MinTokenLength or only whitespace.
	s.adm, err = admin.New(s.Config.Admin.Listen, s.Config.AdminTokens())
	return err
}

// bind is phase 2. A data directory that exists is locked before binding,
// so a second serve with the same config is told who holds the directory
// rather than that the port is taken.
func (s *Server) bind() (err error) {
	cfg := s.Config
	if fi, err := os.Stat(cfg.Data); err == nil && fi.IsDir() {
		if s.lock, err = schema.LockDir(cfg.Data); err != nil {
			return err
		}
	}
	// The webhook listener (receiver/listener.go): connection cap, framing
	// check, TLS.
	lopts := receiver.ListenOptions{MaxConnections: cfg.Limits.MaxConnections}
	if s.certs != nil {
		lopts.TLS = s.certs.config()
	}
	if s.ln, err = receiver.Listen(cfg.Listen, lopts); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if len(s.adm.Tokens) > 0 {
		if s.aln, err = net.Listen("tcp", s.adm.Listen); err != nil {
			return fmt.Errorf("admin listen: %w", err)
		}
	}
	return nil
}

// start is phase 3.
func (s *Server) start(ctx context.Context) error {
	cfg, log := s.Config, s.Log
	if s.lock == nil {
		if err := durable.MkdirAll(cfg.Data, 0o700); err != nil {
			return fmt.Errorf("create data directory: %w", err)
		}
		var err error
		if s.lock, err = schema.LockDir(cfg.Data); err != nil {
			return err
		}
	}
	generated, err := cfg.SaveSecret()
	if err != nil {
		return err
	}
	if generated != "" {
		// Zero-config first start only: deploy/ always configures secrets, so
		// no generated secret reaches a journal.
		fmt.Fprintf(s.Banner, "\nGenerated a signing secret for provider \"default\" (shown once; kept in %s):\n\n    %s\n\n"+
			"Send with:  HOOKLEDGER_SECRET='%s' hookledger send --customer cus_1 --meter api_requests --quantity 3\n\n",
			cfg.Data+string(os.PathSeparator)+config.SecretFile, generated, generated)
	}

	// Replication (replication.go): restore-if-missing, then refuse a
	// replica that is ahead of the local database.
	if err := s.repl.Prepare(ctx); err != nil {
		return err
	}
	s.db, err = schema.Open(ctx, cfg.DBPath(), schema.Options{
		NoAutoCheckpoint: s.repl.Enabled(), // Litestream checkpoints
		Standby:          cfg.Postgres() && cfg.Durability == config.DurabilityReplica,
	})
	if err != nil {
		return err
	}
	if err := s.repl.Open(ctx); err != nil {
		return err
	}
	// A plan version that priced a closed invoice is frozen: a configuration
	// that edited one is refused before anything is received or closed
	// (invoice/frozen.go); the commands that price refuse it too.
	if err := invoice.CheckFrozenPrices(ctx, s.db, cfg.Catalog); err != nil {
		return err
	}
	// The chain head as anchors, now, every headLogInterval and once more
	// after the writer has closed (Close): the last line covers the last batch.
	s.stopHeadLog = startHeadLog(ctx, log, s.db)
	mapper := ledger.NewMapper(cfg.Usage, cfg.MeterNames())
	names := append(providerNames(s.providers), receiver.APIProvider) // the ingest API's events (ingest.go)
	met := metrics.New(metrics.Options{Providers: names, Version: s.Version, Commit: s.Commit})
	storageErrs := newStorageErrorLog(log, met)
	w := writer.New(s.db, cfg) // every product hook: outbox routes, Stripe pushes and reports, alerts
	// Before Open: the writer goroutine reads these. The relay (forward.go)
	// yields while the writer group-commits (busy), and is kicked after
	// every commit that wrote outbox rows, so a new message leaves at once;
	// it starts after the writer, hence the atomic.
	busy := &busyWriter{}
	w.AfterBatch = func(size int, d time.Duration) {
		met.ObserveBatch(size, d)
		storageErrs.Committed()
		busy.committed(size)
	}
	var kick atomic.Pointer[forward.Relay]
	w.AfterOutbox = func() {
		if r := kick.Load(); r != nil {
			r.Kick()
		}
	}
	w.OnStorageError = storageErrs.Observe
	w.Replicate = s.repl.AckFunc() // ACK-after-replica mode; nil replies after COMMIT
	w.Admit = s.repl.AdmitFunc()   // the WAL bound while Litestream cannot capture it; nil when not replicating
	limits := w.Limits
	if err := w.Open(ctx); err != nil {
		return err
	}
	s.writer = w
	// The usage state behind entitlement checks, built from the ledger
	// before the first request when it never was or its zone changed
	// (entitlements.go).
	if err := buildUsageState(ctx, log, cfg, s.db, w); err != nil {
		return err
	}
	// The forwarding relay (forward.go): after the writer, which it submits
	// to; before the HTTP servers. Close stops it after HTTP drains and
	// before the writer closes.
	relay, err := startRelay(ctx, log, cfg, s.db, w, busy.busy, met, s.Version)
	if err != nil {
		return err
	}
	s.relay = relay
	kick.Store(relay)

	tally := console.NewTally(time.Now()) // the console's rejected and duplicate counts (console.go)
	summary := &deliverySummary{}
	every := cmp.Or(s.LogSummary, DefaultLogSummary)
	s.stopSummary = startSummary(log, summary, every)
	// Entitlement checks (the ingest API's), the admin API's customer usage
	// and the console's customer page answer from one Checker.
	checker := &entitle.Checker{DB: s.db, Policy: limits}
	srv := &receiver.Server{
		Providers:      s.providers,
		Mapper:         mapper,
		Custody:        w,
		HandlerVersion: custody.HandlerVersion(s.Version, mapper),
		Log:            log,
		Now:            time.Now,
		Observe: func(o receiver.Observation) {
			met.ObserveDelivery(o.Provider, o.Outcome, o.Reason, o.Latency)
			tally.Observe(o.Outcome, time.Now())
			summary.Observe(o)
		},
		// Bounded input (receiver/body.go): in-flight body budget and body
		// deadline; the listener (bind) caps connections, checks framing and
		// does the TLS, so the HTTP server serves it with Serve.
		Budget:       receiver.NewBodyBudget(cfg.Limits.BodyBudget),
		BodyTimeout:  cfg.Limits.BodyTimeout.Duration,
		API:          ingestAPI(cfg, s.db, w),
		Entitlements: checker,
	}
	met.WatchWriterQueue(w.Depth, w.QueueSize)
	met.WatchDatabase(s.db, log)
	met.WatchDisk(func() (uint64, uint64, error) {
		st, err := health.StatDisk(cfg.Data)
		return st.FreeBytes, st.TotalBytes, err
	})
	// Readiness: components add their own checks (e.g. "replication").
	ready := health.New(log)
	ready.Add("database", health.Writable(w))
	ready.Add("migrations", health.Migrated(s.db))
	ready.Add("disk", health.Disk(cfg.Data, minFreeDisk))
	s.repl.Register(ready, met) // "replication" check (advisory unless ACK-after-replica); metrics
	// Periodic reconcile, prune, credit expiry and scheduled closes
	// (background.go, invoicing.go): Close stops them before the writer.
	if s.stopBackground, err = startBackground(ctx, log, cfg, s.db, w, mapper, srv.HandlerVersion, met); err != nil {
		return err
	}
	mux := http.NewServeMux()
	srv.Routes(mux)
	ready.Routes(mux) // GET /healthz, GET /readyz
	if s.certs != nil {
		met.SetTLSCertificate(s.certs.cert.Load().Leaf.NotAfter)
		logCert(log, "serving HTTPS", s.certs.cert.Load())
	}
	watchSIGHUP(ctx, log, s.certs, met)
	s.servers, s.listeners = []*http.Server{receiver.NewHTTPServer(mux, log)}, []net.Listener{s.ln}

	s.adm.Mux.Handle("GET /v1/usage", admin.Usage(s.db, ledger.NewMeters(cfg.Meters)))
	s.adm.Mux.Handle("GET /v1/voids", admin.Voids(s.db))
	s.adm.Mux.Handle("GET /metrics", met.Handler())
	s.adm.Mux.Handle("GET /readyz", ready.DetailHandler()) // with each failing check's error
	forwardRoutes(s.adm, cfg, s.db, w, s.relay)            // forward status/list/retry/pause and GET /v1/events (forward.go)
	// Customers, plans, invoice previews and credits. Their registry writes
	// and the preview's rolled-back close take the write connection between
	// the writer's batches, as the CLI's take the write lock; a credit grant
	// is an operation of the writer (custody.GrantCredit).
	(&admin.Customers{DB: s.db, Catalog: cfg.Catalog, DefaultPlan: cfg.Customers.DefaultPlan, Meters: ledger.NewMeters(cfg.Meters),
		Zone: cfg.Invoicing.Location, Now: time.Now, Entitlements: checker, Writer: w}).Routes(s.adm.Mux)
	// The web console, GET /ui/ (console.go).
	if err := s.mountConsole(tally, checker); err != nil {
		return err
	}
	if s.aln != nil {
		s.servers, s.listeners = append(s.servers, s.adm.HTTPServer()), append(s.listeners, s.aln)
		log.Info("admin API", "addr", s.aln.Addr().String())
		if len(admin.WeakTokens(s.adm.Tokens)) > 0 { // refused by admin.New off loopback
			log.Warn("an admin token is shorter than 16 characters; use a long random one (openssl rand -hex 32)")
		}
	} else {
		log.Info("admin API disabled: set HOOKLEDGER_ADMIN_TOKEN or admin.tokens to enable it")
	}
	if !s.repl.Enabled() {
		log.Info("not replicating", "reason", s.Replication.OffReason)
	}
	s.opened = true
	return nil
}

// Run serves on the bound listeners until ctx ends or a server fails, and
// returns that failure. Call Close afterwards.
func (s *Server) Run(ctx context.Context) error {
	if s.Config.ListenDefaulted {
		s.Log.Info("listening on loopback only: " + s.Config.SourceName() + " has no listen; set listen: \":8080\" (or --listen, HOOKLEDGER_LISTEN) to accept webhooks from other hosts")
	}
	s.Log.Info("serving", "addr", s.ln.Addr().String(), "tls", s.certs != nil, "db", s.db.Path,
		"providers", providerNames(s.providers), "config", s.Config.SourceName())
	return serveHTTP(ctx, s.servers, s.listeners)
}

// Close stops serve in this order, each step for the reason given; after a
// failed Open it undoes what Open had done, in the same order.
//
//  1. Stop accepting and drain HTTP: Shutdown waits (up to ShutdownTimeout)
//     for in-flight handlers, and each handler waits for its batch to
//     commit, so every acknowledged event is durable before the writer
//     closes.
//  2. Stop the background jobs (reconcile, prune, credit expiry, scheduled
//     invoice closes): reconcile, prune and expiry submit to the writer, so
//     they stop before it; a close in progress is cancelled and rolls back
//     (the next start closes that period), so none holds the write
//     connection when the writer and the database close.
//     2a. Stop the forwarding relay: it submits its claims and outcomes to the
//     writer, so it stops before it. Requests in flight are abandoned and
//     their messages released (due again, no attempt counted); outcomes
//     already known are recorded. A slow destination cannot hold shutdown
//     past its own timeout. Nothing is lost: anything not recorded is
//     attempted again after the restart (at least once).
//  3. Close the writer: it commits everything already queued (and, in
//     ACK-after-replica mode, waits for those replies).
//  4. Log the chain head a last time: after the writer, so the line covers
//     the last batch.
//  5. Close the database.
//  6. Close replication, with its final sync (bounded by the shutdown sync
//     timeout): Litestream requires the application's database closed first.
//  7. Close the listeners (already closed by Shutdown after a Run; not
//     after a failed Open) and release the data directory last, so no other
//     serve takes it while this one still holds anything in it.
//
// The error is the HTTP drain's; the other steps log their own failures.
func (s *Server) Close() error {
	var err error
	if s.opened {
		err = shutdownHTTP(s.Log, s.servers, s.ShutdownTimeout)
		s.opened = false
	}
	if s.stopSummary != nil {
		s.stopSummary() // the last, partial interval: no delivery comes after the drain
		s.stopSummary = nil
	}
	if s.stopBackground != nil {
		s.stopBackground()
		s.stopBackground = nil
	}
	if s.relay != nil {
		s.relay.Close()
		s.relay = nil
	}
	if s.writer != nil {
		if cerr := s.writer.Close(); cerr != nil {
			s.Log.Error("close writer", "error", cerr.Error())
		}
		s.writer = nil
	}
	if s.stopHeadLog != nil {
		s.stopHeadLog()
		s.stopHeadLog = nil
	}
	if s.db != nil {
		if cerr := s.db.Close(); cerr != nil {
			s.Log.Error("close database", "error", cerr.Error())
		}
		s.db = nil
	}
	s.repl.Close()
	s.repl = nil
	for _, l := range []net.Listener{s.aln, s.ln} {
		if l != nil {
			l.Close()
		}
	}
	s.aln, s.ln = nil, nil
	if s.lock != nil {
		s.lock.Unlock()
		s.lock = nil
	}
	return err
}

func providerNames(providers map[string]*receiver.Provider) []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
