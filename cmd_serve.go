package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/health"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
)

// Flags shared by commands that find the configuration and data directory.
func configFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"HOOKLEDGER_CONFIG"},
			Usage: "configuration file (default: ./hookledger.yml if it exists, else the embedded default)"},
		&cli.StringFlag{Name: "data", EnvVars: []string{"HOOKLEDGER_DATA"},
			Usage: "data directory holding hookledger.db (default: the config's data, else ./data)"},
	}
}

// configPath is --config, else ./hookledger.yml if it exists, else "" (the
// embedded default).
func configPath(c *cli.Context) string {
	if p := c.String("config"); p != "" {
		return p
	}
	if _, err := os.Stat(config.DefaultFile); err == nil {
		return config.DefaultFile
	}
	return ""
}

// loadConfig resolves --config/--data the same way for every command.
// generated is the newly created default secret, if one was created.
func loadConfig(c *cli.Context) (cfg *config.Config, generated string, err error) {
	if path := configPath(c); path != "" {
		cfg, err = config.Load(path)
		if err != nil {
			return nil, "", err
		}
		if d := c.String("data"); d != "" {
			cfg.Data = d
		}
		return cfg, "", nil
	}
	data := c.String("data")
	if data == "" {
		data = config.DefaultData
	}
	return config.Default(data)
}

// dataDir finds the data directory without generating a default secret or
// needing any: --data, else the config file's data, else ./data.
func dataDir(c *cli.Context) (string, error) {
	if d := c.String("data"); d != "" {
		return d, nil
	}
	path := configPath(c)
	if path == "" {
		return config.DefaultData, nil
	}
	cfg, err := config.LoadSecretsOptional(path)
	if err != nil {
		return "", err
	}
	return cfg.Data, nil
}

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "receive webhooks at POST /webhooks/{provider}",
		Description: "Verifies each delivery's signature over the raw body, stores the authenticated event and its\n" +
			"usage rows in one transaction, and answers 2xx only after that transaction is durable.\n" +
			"Stops gracefully on SIGINT/SIGTERM: no new requests, in-flight batches finish, the database closes.\n" +
			"GET /healthz and /readyz on the webhook listener; Prometheus metrics at /metrics on the admin listener.\n" +
			"With a litestream.yml it replicates the database continuously (see `hookledger restore`, `replica status`).",
		Flags: append(append(append(append(configFlags(),
			&cli.StringFlag{Name: "listen", EnvVars: []string{"HOOKLEDGER_LISTEN"},
				Usage: "address for the webhook listener (default: the config's listen, else :8080)"},
		), logFlags()...), tlsFlags()...), replicationFlags()...),
		Action: serve,
	}
}

func serve(c *cli.Context) error {
	log, err := newLogger(c.App.ErrWriter, c.String("log-level"), c.String("log-format"))
	if err != nil {
		return err
	}
	slog.SetDefault(log) // libraries that log through slog.Default (Litestream) match

	// 1. Validate everything, creating nothing: a serve that cannot start
	// leaves no data directory, database or secret behind, and prints no
	// banner for a secret it then does not use.
	var certs *certReloader
	if c.String("tls-cert") != "" || c.String("tls-key") != "" {
		if certs, err = newCertReloader(c.String("tls-cert"), c.String("tls-key")); err != nil {
			return err
		}
	}
	cfg, err := loadServeConfig(c)
	if err != nil {
		return err
	}
	if l := c.String("listen"); l != "" {
		cfg.Listen = l
	}
	repl, err := loadReplication(c, cfg, log) // litestream.yml, incl. its database path
	if err != nil {
		return err
	}
	providers, err := receiver.NewProviders(cfg.Providers)
	if err != nil {
		return err
	}
	adm, err := admin.New(cfg.Admin.Listen, cfg.AdminTokens())
	if err != nil {
		return err
	}
	// admin.New refuses a non-loopback listener without a token, or with one
	// shorter than admin.MinTokenLength or only whitespace.

	// 2. Take the data directory and bind the listeners: a second serve on
	// this directory, a port in use or an address that cannot be bound fail
	// here. A data directory that exists is locked before binding, so a
	// second serve with the same config is told who holds the directory
	// rather than that the port is taken.
	var lock *schema.DirLock
	if fi, err := os.Stat(cfg.Data); err == nil && fi.IsDir() {
		if lock, err = schema.LockDir(cfg.Data); err != nil {
			return err
		}
		defer lock.Unlock()
	}
	// The webhook listener (receiver/listener.go): connection cap, framing
	// check, TLS.
	lopts := receiver.ListenOptions{MaxConnections: cfg.Limits.MaxConnections}
	if certs != nil {
		lopts.TLS = certs.config()
	}
	ln, err := receiver.Listen(cfg.Listen, lopts)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer ln.Close() // on a failed start; Shutdown closes it otherwise
	var aln net.Listener
	if len(adm.Tokens) > 0 {
		if aln, err = net.Listen("tcp", adm.Listen); err != nil {
			return fmt.Errorf("admin listen: %w", err)
		}
		defer aln.Close()
	}

	// 3. Side effects, in order: the data directory and its lock, the
	// generated secret, restore-if-missing, the database.
	if lock == nil {
		if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
			return fmt.Errorf("create data directory: %w", err)
		}
		if lock, err = schema.LockDir(cfg.Data); err != nil {
			return err
		}
		defer lock.Unlock()
	}
	generated, err := cfg.SaveSecret()
	if err != nil {
		return err
	}
	if generated != "" {
		// Zero-config first start only: deploy/ always configures secrets, so
		// no generated secret reaches a journal.
		fmt.Fprintf(c.App.ErrWriter, "\nGenerated a signing secret for provider \"default\" (shown once; kept in %s):\n\n    %s\n\n"+
			"Send with:  HOOKLEDGER_SECRET='%s' hookledger send --customer cus_1 --meter api_requests --quantity 3\n\n",
			cfg.Data+string(os.PathSeparator)+config.SecretFile, generated, generated)
	}

	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Replication (cmd_replica.go): restore-if-missing, then refuse a replica
	// that is ahead of the local database. Close is deferred before
	// db.Close, so the final replica sync runs after the database has closed.
	if err := repl.Prepare(ctx); err != nil {
		return err
	}
	defer repl.Close()
	db, err := schema.Open(ctx, cfg.DBPath(), schema.Options{NoAutoCheckpoint: repl.Enabled()}) // Litestream checkpoints
	if err != nil {
		return err
	}
	defer db.Close()
	if err := repl.Open(ctx); err != nil {
		return err
	}
	// The chain head as anchors, now, every headLogInterval and once more
	// after the writer has closed (deferred before writer.Close, so it runs
	// after it): the last line covers the last batch.
	stopHeadLog := startHeadLog(ctx, log, db)
	defer stopHeadLog()
	mapper := ledger.NewMapper(cfg.Usage, cfg.MeterNames())
	names := providerNames(providers)
	met := metrics.New(metrics.Options{Providers: names, Version: version, Commit: commit})
	storageErrs := newStorageErrorLog(log, met)
	writer := receiver.NewWriter(db)
	// Before Open: the writer goroutine reads these.
	writer.AfterBatch = func(size int, d time.Duration) { met.ObserveBatch(size, d); storageErrs.Committed() }
	writer.OnStorageError = storageErrs.Observe
	writer.Replicate = repl.AckFunc() // ACK-after-replica mode; nil replies after COMMIT
	if err := writer.Open(ctx); err != nil {
		return err
	}
	defer writer.Close()

	srv := &receiver.Server{
		Providers:      providers,
		Mapper:         mapper,
		Writer:         writer,
		HandlerVersion: "hookledger/" + version + "+" + mapper.Version(),
		Log:            log,
		Now:            time.Now,
		Observe: func(o receiver.Observation) {
			met.ObserveDelivery(o.Provider, o.Outcome, o.Reason, o.Latency)
		},
	}
	met.WatchWriterQueue(writer.Depth, writer.QueueSize)
	met.WatchDatabase(db, log)
	met.WatchDisk(func() (uint64, uint64, error) {
		st, err := health.StatDisk(cfg.Data)
		return st.FreeBytes, st.TotalBytes, err
	})
	// Readiness: components add their own checks (e.g. "replication").
	ready := health.New(log)
	ready.Add("database", health.Writable(writer))
	ready.Add("migrations", health.Migrated(db))
	ready.Add("disk", health.Disk(cfg.Data, minFreeDisk))
	repl.Register(ready, met) // "replication" check (advisory unless ACK-after-replica); metrics
	// Periodic reconcile and prune (cmd_reconcile.go); deferred after
	// writer.Close, so it runs first: the jobs submit to the writer.
	stopBackground, err := startBackground(ctx, log, cfg, db, writer, mapper, srv.HandlerVersion, met)
	if err != nil {
		return err
	}
	defer stopBackground()
	mux := http.NewServeMux()
	srv.Routes(mux)
	ready.Routes(mux) // GET /healthz, GET /readyz
	// Bounded input (receiver/body.go): in-flight body budget and body
	// deadline; the listener (above) caps connections, checks framing and
	// does the TLS, so hs serves it with Serve.
	srv.Budget, srv.BodyTimeout = receiver.NewBodyBudget(cfg.Limits.BodyBudget), cfg.Limits.BodyTimeout.Duration
	hs := receiver.NewHTTPServer(mux, log)
	if certs != nil {
		met.SetTLSCertificate(certs.cert.Load().Leaf.NotAfter)
		logCert(log, "serving HTTPS", certs.cert.Load())
	}
	watchSIGHUP(ctx, log, certs, met)
	servers := []*http.Server{hs}
	listeners := []net.Listener{ln}

	adm.Mux.Handle("GET /v1/usage", admin.Usage(db, ledger.NewMeters(cfg.Meters)))
	adm.Mux.Handle("GET /metrics", met.Handler())
	adm.Mux.Handle("GET /readyz", ready.DetailHandler()) // with each failing check's error
	if aln != nil {
		servers, listeners = append(servers, adm.HTTPServer()), append(listeners, aln)
		log.Info("admin API", "addr", aln.Addr().String())
		if len(admin.WeakTokens(adm.Tokens)) > 0 { // refused by admin.New off loopback
			log.Warn("an admin token is shorter than 16 characters; use a long random one (openssl rand -hex 32)")
		}
	} else {
		log.Info("admin API disabled: set HOOKLEDGER_ADMIN_TOKEN or admin.tokens to enable it")
	}
	if !repl.Enabled() {
		log.Info("not replicating", "reason", replicationOffReason(c))
	}

	log.Info("serving", "addr", ln.Addr().String(), "tls", certs != nil, "db", db.Path, "providers", names, "config", cfgSource(cfg))
	return runServers(ctx, log, servers, listeners)
}

// loadServeConfig is loadConfig without side effects: a default secret that
// must be generated is kept in memory until cfg.SaveSecret.
func loadServeConfig(c *cli.Context) (*config.Config, error) {
	if configPath(c) != "" {
		cfg, _, err := loadConfig(c)
		return cfg, err
	}
	data := c.String("data")
	if data == "" {
		data = config.DefaultData
	}
	return config.DefaultUnsaved(data)
}

func replicationOffReason(c *cli.Context) string {
	if c.Bool("no-replication") {
		return "--no-replication"
	}
	return "no ./" + defaultLitestreamFile + " and no --litestream-config"
}

// runServers serves until ctx ends or one server fails, then shuts all down.
// Shutdown waits for in-flight handlers, and each handler waits for its batch
// to commit, so every acknowledged event is durable before the writer closes.
func runServers(ctx context.Context, log *slog.Logger, servers []*http.Server, listeners []net.Listener) error {
	errc := make(chan error, len(servers))
	for i, hs := range servers {
		go func() {
			if hs.TLSConfig != nil {
				errc <- hs.ServeTLS(listeners[i], "", "") // the certificate comes from TLSConfig
				return
			}
			errc <- hs.Serve(listeners[i])
		}()
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, hs := range servers {
		if serr := hs.Shutdown(sctx); serr != nil && err == nil {
			err = fmt.Errorf("shutdown: %w", serr)
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Operating thresholds.
const (
	// minFreeDisk: below this much free space /readyz reports the disk check
	// failing, before SQLite starts failing commits.
	minFreeDisk = 64 << 20
)

func providerNames(providers map[string]*receiver.Provider) []string {
	names := make([]string, 0, len(providers))
	for n := range providers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

func cfgSource(cfg *config.Config) string {
	if cfg.Source == "" {
		return "embedded default"
	}
	return cfg.Source
}
