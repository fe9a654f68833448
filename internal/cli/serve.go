package cli

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/server"
)

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
				Usage: "address for the webhook listener (default: the config's listen; a config file without listen: 127.0.0.1:8080; no config file: :8080)"},
		), logFlags()...), tlsFlags()...), replicationFlags()...),
		Action: serve,
	}
}

// serve parses the flags into a server.Server, opens it, runs it until
// SIGINT or SIGTERM, and closes it (internal/server).
func serve(c *cli.Context) error {
	log, err := newLogger(c.App.ErrWriter, c.String("log-level"), c.String("log-format"))
	if err != nil {
		return err
	}
	slog.SetDefault(log) // libraries that log through slog.Default (Litestream) match

	// Nothing here creates anything: a serve that cannot start leaves no data
	// directory, database or secret behind, and prints no banner for a
	// secret it then does not use (server.Open's phases).
	if (c.String("tls-cert") == "") != (c.String("tls-key") == "") {
		return errors.New("--tls-cert and --tls-key must be given together")
	}
	cfg, err := loadServeConfig(c)
	if err != nil {
		return err
	}
	if l := c.String("listen"); l != "" {
		cfg.Listen, cfg.ListenDefaulted = l, false
	}
	repl, err := replicationOptions(c, cfg)
	if err != nil {
		return err
	}
	if c.Duration("log-summary") < 0 {
		return usageErrorf(c, "--log-summary %s: a duration, 0 for never", c.Duration("log-summary"))
	}
	s := &server.Server{
		Config:  cfg,
		TLSCert: c.String("tls-cert"), TLSKey: c.String("tls-key"),
		Replication: repl,
		Version:     build.Version, Commit: build.Commit,
		Log: log,
		// 0 turns the summary off; Server reads 0 as its default.
		LogSummary: cmp.Or(c.Duration("log-summary"), -1),
		Banner:     c.App.ErrWriter,
	}
	// The signal handler stays installed until Close has returned: a second
	// Ctrl-C during shutdown does not cut the final commits or replica sync.
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := s.Open(ctx); err != nil {
		return err
	}
	err = s.Run(ctx)
	if cerr := s.Close(); err == nil {
		err = cerr
	}
	return err
}

// tlsFlags are serve's flags for serving HTTPS directly.
func tlsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "tls-cert", EnvVars: []string{"HOOKLEDGER_TLS_CERT"},
			Usage: "serve HTTPS with this PEM certificate chain (with --tls-key); reloaded on SIGHUP. Leave unset behind a TLS-terminating proxy"},
		&cli.StringFlag{Name: "tls-key", EnvVars: []string{"HOOKLEDGER_TLS_KEY"},
			Usage: "PEM private key for --tls-cert; reloaded on SIGHUP"},
	}
}

// replicationFlags are serve's replication flags.
func replicationFlags() []cli.Flag {
	return []cli.Flag{
		litestreamConfigFlag(),
		&cli.BoolFlag{Name: "no-replication", EnvVars: []string{"HOOKLEDGER_NO_REPLICATION"},
			Usage: "do not replicate, even when ./" + defaultLitestreamFile + " exists (e.g. serving another --data from a directory that has one)"},
		&cli.BoolFlag{Name: "restore-if-missing", EnvVars: []string{"HOOKLEDGER_RESTORE_IF_MISSING"},
			Usage: "when the database does not exist, restore it from the replica before accepting traffic (a new machine); serve does not start while that replica cannot be read"},
		&cli.BoolFlag{Name: "ack-after-replica", EnvVars: []string{"HOOKLEDGER_ACK_AFTER_REPLICA"},
			Usage: "answer 2xx only once the replica holds the event (same as durability: replica in the config); the replica being down then means 503s"},
		&cli.BoolFlag{Name: "replica-takeover", EnvVars: []string{"HOOKLEDGER_REPLICA_TAKEOVER"},
			Usage: "when the replica holds later transactions than this database, move the replica's files aside (kept whole, beside it) and replicate this database as its new history, instead of refusing to start"},
		&cli.DurationFlag{Name: "shutdown-sync-timeout", EnvVars: []string{"HOOKLEDGER_SHUTDOWN_SYNC_TIMEOUT"},
			Usage: "bound on the final replica sync at shutdown", DefaultText: "litestream.yml's shutdown-sync-timeout, else 10s"},
	}
}

// replicationOptions resolves serve's replication flags and litestream.yml
// and checks them against each other and against hookledger's database. It
// reads files but creates none and does not contact the replica.
func replicationOptions(c *cli.Context, cfg *config.Config) (server.Replication, error) {
	ack := c.Bool("ack-after-replica") || cfg.Durability == config.DurabilityReplica
	off := server.Replication{OffReason: replicationOffReason(c)}
	if cfg.Postgres() {
		// PostgreSQL replicates itself; ACK-after-replica waits for its
		// synchronous standby instead (schema.Options.Standby).
		for _, f := range []struct {
			set  bool
			name string
		}{{c.Bool("restore-if-missing"), "--restore-if-missing"}, {c.Bool("replica-takeover"), "--replica-takeover"}} {
			if f.set {
				return off, fmt.Errorf("%s is for Litestream's replica of a SQLite database; the database is PostgreSQL (docs/postgres.md: backups)", f.name)
			}
		}
		if ack {
			cfg.Durability = config.DurabilityReplica
		}
		off.OffReason = "the database is PostgreSQL, which replicates itself (Litestream is for SQLite)"
		return off, nil
	}
	if c.Bool("no-replication") {
		for _, f := range []struct {
			set  bool
			name string
		}{
			{ack, "ACK-after-replica mode (--ack-after-replica or durability: replica)"},
			{c.Bool("restore-if-missing"), "--restore-if-missing"},
			{c.Bool("replica-takeover"), "--replica-takeover"},
		} {
			if f.set {
				return off, fmt.Errorf("--no-replication and %s contradict each other", f.name)
			}
		}
		return off, nil
	}
	lcfg, err := loadLitestream(c)
	if err != nil {
		return off, fmt.Errorf("%w (or --no-replication to serve without replicating)", err)
	}
	if lcfg == nil {
		switch {
		case ack:
			return off, fmt.Errorf("ACK-after-replica mode (--ack-after-replica or durability: replica) needs a replica: no ./%s and no --litestream-config", defaultLitestreamFile)
		case c.Bool("restore-if-missing"):
			return off, fmt.Errorf("--restore-if-missing needs a replica: no ./%s and no --litestream-config", defaultLitestreamFile)
		case c.Bool("replica-takeover"):
			return off, fmt.Errorf("--replica-takeover needs a replica: no ./%s and no --litestream-config", defaultLitestreamFile)
		}
		return off, nil
	}
	if err := lcfg.CheckDB(cfg.DBPath()); err != nil {
		return off, fmt.Errorf("%w (set --data, or the path in %s, so they agree; or pass --no-replication to serve without replicating)", err, lcfg.File)
	}
	if c.IsSet("shutdown-sync-timeout") {
		if lcfg.ShutdownSyncTimeout = c.Duration("shutdown-sync-timeout"); lcfg.ShutdownSyncTimeout < 0 {
			return off, errors.New("--shutdown-sync-timeout must not be negative")
		}
	}
	return server.Replication{
		Config:           lcfg,
		AckAfterReplica:  ack,
		RestoreIfMissing: c.Bool("restore-if-missing"),
		Takeover:         c.Bool("replica-takeover"),
	}, nil
}

func replicationOffReason(c *cli.Context) string {
	if c.Bool("no-replication") {
		return "--no-replication"
	}
	return "no ./" + defaultLitestreamFile + " and no --litestream-config"
}
