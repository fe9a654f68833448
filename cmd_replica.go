package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/health"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/replication"
)

// defaultLitestreamFile is read when no --litestream-config is given and it
// exists, like hookledger.yml.
const defaultLitestreamFile = "litestream.yml"

func litestreamConfigFlag() cli.Flag {
	return &cli.StringFlag{Name: "litestream-config", EnvVars: []string{"HOOKLEDGER_LITESTREAM_CONFIG"},
		Usage: "Litestream replication config, in Litestream's own v0.5 format (default: ./" + defaultLitestreamFile + " if it exists)"}
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

// loadLitestream reads --litestream-config, else ./litestream.yml if it
// exists; nil when there is neither (no replication).
func loadLitestream(c *cli.Context) (*replication.Config, error) {
	path := c.String("litestream-config")
	if path == "" {
		if _, err := os.Stat(defaultLitestreamFile); err != nil {
			return nil, nil
		}
		path = defaultLitestreamFile
	}
	return replication.LoadConfig(path)
}

// requireLitestream is loadLitestream for commands that cannot do without.
func requireLitestream(c *cli.Context) (*replication.Config, error) {
	cfg, err := loadLitestream(c)
	if err == nil && cfg == nil {
		err = fmt.Errorf("no ./%s here: pass --litestream-config FILE (or set HOOKLEDGER_LITESTREAM_CONFIG)", defaultLitestreamFile)
	}
	return cfg, err
}

// Replication timing in serve.
const (
	// ackSyncTimeout bounds one replica sync in ACK-after-replica mode: past
	// it the waiting deliveries get 503 and their senders retry.
	ackSyncTimeout = 5 * time.Second
	// replicaStatusEvery is how often serve lists the replica (its status,
	// published for `replica status`); replicaStatusRetry while that fails,
	// so recovery shows soon. Listing is a LIST request on S3: not per probe.
	replicaStatusEvery = 10 * time.Second
	replicaStatusRetry = 2 * time.Second
	// replicaCheckTimeout bounds serve's first look at the replica (its
	// position, before anything is replicated). An S3 endpoint that refuses
	// connections costs the SDK's retries, about 14 s, without it; past it
	// serve starts anyway and keeps trying in the background.
	replicaCheckTimeout = 5 * time.Second
	// replicaDownLogEvery rate-limits the ERROR line while replication is down.
	replicaDownLogEvery = time.Minute
)

// serveReplication is Litestream inside serve. A nil *serveReplication means
// not replicating; every method is then a no-op.
type serveReplication struct {
	cfg              *replication.Config
	ack              bool
	restoreIfMissing bool
	log              *slog.Logger
	rep              *replication.Replicator
	down             *rateLimitedLog // "replication is down", while it is

	mu        sync.Mutex
	status    replication.Status
	statusErr error // the last listing's error

	stopWatch context.CancelFunc
	done      chan struct{}
}

// loadReplication validates serve's replication flags and litestream.yml
// against hookledger's database. It reads files but creates none and does
// not contact the replica: serve calls it before anything exists.
func loadReplication(c *cli.Context, cfg *config.Config, log *slog.Logger) (*serveReplication, error) {
	ack := c.Bool("ack-after-replica") || cfg.Durability == config.DurabilityReplica
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
				return nil, fmt.Errorf("--no-replication and %s contradict each other", f.name)
			}
		}
		return nil, nil
	}
	lcfg, err := loadLitestream(c)
	if err != nil {
		return nil, fmt.Errorf("%w (or --no-replication to serve without replicating)", err)
	}
	if lcfg == nil {
		switch {
		case ack:
			return nil, fmt.Errorf("ACK-after-replica mode (--ack-after-replica or durability: replica) needs a replica: no ./%s and no --litestream-config", defaultLitestreamFile)
		case c.Bool("restore-if-missing"):
			return nil, fmt.Errorf("--restore-if-missing needs a replica: no ./%s and no --litestream-config", defaultLitestreamFile)
		case c.Bool("replica-takeover"):
			return nil, fmt.Errorf("--replica-takeover needs a replica: no ./%s and no --litestream-config", defaultLitestreamFile)
		}
		return nil, nil
	}
	if err := lcfg.CheckDB(cfg.DBPath()); err != nil {
		return nil, fmt.Errorf("%w (set --data, or the path in %s, so they agree; or pass --no-replication to serve without replicating)", err, lcfg.File)
	}
	if c.IsSet("shutdown-sync-timeout") {
		if lcfg.ShutdownSyncTimeout = c.Duration("shutdown-sync-timeout"); lcfg.ShutdownSyncTimeout < 0 {
			return nil, errors.New("--shutdown-sync-timeout must not be negative")
		}
	}
	rep, err := replication.NewReplicator(lcfg, lcfg.DB.Path)
	if err != nil {
		return nil, err
	}
	rep.Logger, rep.Takeover = log, c.Bool("replica-takeover")
	return &serveReplication{
		cfg: lcfg, ack: ack, log: log, rep: rep,
		restoreIfMissing: c.Bool("restore-if-missing") || lcfg.DB.RestoreIfDBNotExists,
		down:             &rateLimitedLog{Every: replicaDownLogEvery},
	}, nil
}

// Prepare runs once the data directory is locked and before the database is
// opened: restore-if-missing, then the check that the replica is not ahead
// of the local database. A replica that cannot be read is no reason not to
// start (deliveries are taken into custody locally and replication starts
// when it can), except for a missing database that should be restored.
func (s *serveReplication) Prepare(ctx context.Context) error {
	if s == nil {
		return nil
	}
	if s.restoreIfMissing {
		if err := s.restore(ctx); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, replicaCheckTimeout)
	defer cancel()
	switch err := s.rep.Check(cctx); {
	case errors.Is(err, replication.ErrReplicaAhead):
		return err
	case err != nil:
		s.log.Error("cannot read the replica: serving anyway; deliveries are kept locally and replication starts once the replica can be read",
			"replica", s.cfg.DB.Replica.String(), "error", err.Error(), "ack_after_replica", s.ack)
	}
	return nil
}

// restore is --restore-if-missing. With a replica that cannot be read and no
// database, serve refuses to start rather than start empty: an empty
// database taking deliveries forks the ledger from the replica's history
// with no way to merge them, while the senders keep retrying until serve is
// back (systemd restarts it; each start tries the replica again).
func (s *serveReplication) restore(ctx context.Context) error {
	res, err := replication.Restore(ctx, s.cfg, replication.RestoreOptions{IfDBNotExists: true, Logger: s.log})
	switch {
	case errors.Is(err, replication.ErrNoReplica):
		// As Litestream does: a first deploy has nothing to restore yet.
		s.log.Warn("restore-if-missing: the replica holds no backup yet; starting with an empty database",
			"replica", s.cfg.DB.Replica.String())
	case err != nil:
		return fmt.Errorf("restore-if-missing: %w\n(serve does not start on an empty database while the replica may hold the ledger: "+
			"its history would fork. Start again once the replica can be read; without --restore-if-missing serve would refuse too, "+
			"once it sees the replica's data)", err)
	case res.Skipped:
		s.log.Info("restore-if-missing: the database exists; nothing restored", "db", res.Path)
	default:
		s.log.Info("restored the database from the replica", "db", res.Path, "txid", res.TXID.String(),
			"timestamp", res.Timestamp.UTC(), "replica", s.cfg.DB.Replica.String())
	}
	return nil
}

// Enabled reports whether serve replicates.
func (s *serveReplication) Enabled() bool { return s != nil }

// Open starts Litestream on the open, migrated database, or keeps trying in
// the background while the replica cannot be read. Call it before the
// writer opens, and Close after the database has closed.
func (s *serveReplication) Open(ctx context.Context) error {
	if s == nil {
		return nil
	}
	if err := s.rep.Open(ctx); err != nil {
		return err
	}
	watchCtx, stopWatch := context.WithCancel(context.Background())
	s.stopWatch, s.done = stopWatch, make(chan struct{})
	go s.watch(watchCtx)
	s.log.Info("replicating", "db", s.cfg.DB.Path, "replica", s.cfg.DB.Replica.String(), "started", s.rep.Healthy() == nil,
		"ack_after_replica", s.ack, "sync_interval", s.cfg.DB.Replica.SyncInterval.String(), "config", s.cfg.File)
	return nil
}

// AckFunc is the writer's Replicate in ACK-after-replica mode, else nil.
func (s *serveReplication) AckFunc() func(context.Context) error {
	if s == nil || !s.ack {
		return nil
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, ackSyncTimeout)
		defer cancel()
		return s.rep.Sync(ctx)
	}
}

// Register adds the replication metrics and, in ACK-after-replica mode, the
// "replication" readiness check: there a dead replica means every delivery
// gets 503, so the instance is not ready. In the default mode deliveries are
// still taken into custody locally, so a dead replica is an alert (metrics,
// `replica status`, the logs), not a reason to refuse traffic.
func (s *serveReplication) Register(ready *health.Checker, met *metrics.Metrics) {
	if s == nil {
		return
	}
	if s.ack {
		ready.Add("replication", s.check)
	} else {
		ready.AddAdvisory("replication", s.check) // shown, but the instance stays ready
	}
	met.SetReplicationStatus(func() (time.Duration, time.Time, bool) {
		s.mu.Lock()
		st := s.status
		s.mu.Unlock()
		return st.LagTime, st.LastSyncAt, s.check(context.Background()) == nil
	})
}

// check is the replica's health from what is already known: the last
// replica operation's outcome (live), and the last periodic listing, which is
// what notices a replica that died while nothing was written.
func (s *serveReplication) check(context.Context) error {
	if err := s.rep.Healthy(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statusErr
}

// watch lists the replica periodically and publishes the result for
// `replica status` in other processes.
func (s *serveReplication) watch(stop context.Context) {
	defer close(s.done)
	for {
		ctx, cancel := context.WithTimeout(stop, ackSyncTimeout)
		st, err := s.rep.Status(ctx)
		cancel()
		if stop.Err() != nil {
			return // shutting down: a cancelled listing says nothing about the replica
		}
		s.mu.Lock()
		s.status, s.statusErr = st, err
		s.mu.Unlock()
		s.report(s.check(stop))
		if perr := s.rep.Publish(); perr != nil {
			s.log.Warn("cannot publish replica status", "error", perr.Error())
		}
		next := replicaStatusEvery
		if err != nil {
			next = replicaStatusRetry
		}
		select {
		case <-stop.Done():
			return
		case <-time.After(next):
		}
	}
}

// report logs replication going down at ERROR, then at most once per
// replicaDownLogEvery while it stays down, and its recovery at INFO.
func (s *serveReplication) report(err error) {
	if err == nil {
		if n, since, was := s.down.Recover(); was {
			s.log.Info("replication recovered", "down_for", time.Since(since).Round(time.Second).String(), "errors", n)
		}
		return
	}
	if n, since, ok := s.down.Allow(); ok {
		msg := "replication is down: deliveries are stored locally but not replicated"
		if s.ack {
			msg = "replication is down: deliveries are stored locally and answered 503 until the replica holds them"
		}
		s.log.Error(msg, "replica", s.cfg.DB.Replica.String(), "error", err.Error(),
			"down_since", since.UTC().Format(time.RFC3339), "failed_checks_since_last_line", n)
	}
}

// Close stops replication with a final sync bounded by the shutdown sync
// timeout. The application's database must be closed already.
func (s *serveReplication) Close() {
	if s == nil || s.stopWatch == nil {
		return
	}
	s.stopWatch() // a listing of a hung replica must not delay shutdown
	<-s.done
	if err := s.rep.Healthy(); errors.Is(err, replication.ErrNotStarted) {
		s.log.Error("stopping before replication could start: the replica lacks this run's deliveries (they are in the local database, and the next start replicates them)",
			"error", err.Error())
	}
	begin := time.Now()
	if err := s.rep.Close(context.Background()); err != nil {
		s.log.Error("final replica sync failed: the replica may lack the last commits (they are in the local database)",
			"error", err.Error(), "timeout", s.rep.ShutdownSyncTimeout.String())
		return
	}
	s.log.Info("replication stopped", "final_sync", time.Since(begin).Round(time.Millisecond).String())
}

func replicaCommand() *cli.Command {
	return &cli.Command{
		Name:  "replica",
		Usage: "inspect the Litestream replica",
		Subcommands: []*cli.Command{{
			Name:  "status",
			Usage: "local and replica positions, lag, last successful sync and last error",
			Description: "Reads the database's Litestream sidecar and lists the replica; works whether or not serve is\n" +
				"running (a running serve publishes its last sync and last error every few seconds). Reads only.\n" +
				"Exits 3 when the replica is missing, holds no backup, cannot be read, or is behind by more than\n" +
				"--max-lag (the status is still printed, with the problem); 1 when there is no database or no\n" +
				"litestream.yml; 0 when the replica is healthy. For cron and monitoring.",
			Flags: []cli.Flag{
				litestreamConfigFlag(),
				&cli.DurationFlag{Name: "max-lag", Value: time.Minute, EnvVars: []string{"HOOKLEDGER_MAX_LAG"},
					Usage: "a replica behind by more than this (the age of the oldest change not yet replicated) is a problem"},
				formatFlag(),
			},
			Action: replicaStatus,
		}},
	}
}

// replicaStatusJSON is the --format json shape: stable snake_case names,
// TXIDs as the hex Litestream prints, lag in seconds.
type replicaStatusJSON struct {
	Database    string     `json:"database"`
	Replica     string     `json:"replica"`
	LocalTXID   string     `json:"local_txid"`
	ReplicaTXID string     `json:"replica_txid"`
	InSync      bool       `json:"in_sync"`
	LagBytes    int64      `json:"lag_bytes"`
	LagSeconds  float64    `json:"lag_seconds"`
	LastSyncAt  *time.Time `json:"last_sync_at"`
	LastError   string     `json:"last_error"`
	LastErrorAt *time.Time `json:"last_error_at"`
	ReportedAt  *time.Time `json:"reported_at"` // when a running serve last published last_sync_at/last_error
	// Problem is why the command exits 3: the replica is missing, empty,
	// unreadable or behind by more than max_lag_seconds; "" when healthy.
	Problem       string  `json:"problem"`
	MaxLagSeconds float64 `json:"max_lag_seconds"`
	Error         string  `json:"error,omitempty"`
}

func replicaStatus(c *cli.Context) error {
	format := c.String("format")
	cfg, err := requireLitestream(c)
	if err != nil {
		return err
	}
	maxLag := c.Duration("max-lag")
	if maxLag < 0 {
		return usageErrorf(c, "--max-lag: must not be negative")
	}
	if _, err := os.Stat(cfg.DB.Path); err != nil {
		return fmt.Errorf("no database at %s (the database in %s): nothing is replicated from here; run `hookledger serve` or `hookledger restore`", cfg.DB.Path, cfg.File)
	}
	st, readErr := replication.ReadStatus(c.Context, cfg)
	v := replicaStatusJSON{
		Database: st.DBPath, Replica: st.Replica, LocalTXID: st.LocalTXID.String(), ReplicaTXID: st.ReplicaTXID.String(),
		InSync: st.InSync, LagBytes: st.LagBytes, LagSeconds: st.LagTime.Seconds(), LastError: st.LastError,
		LastSyncAt: timeOrNil(st.LastSyncAt), LastErrorAt: timeOrNil(st.LastErrorAt), ReportedAt: timeOrNil(st.ReportedAt),
		MaxLagSeconds: maxLag.Seconds(),
	}
	if readErr != nil {
		v.Error = readErr.Error()
	}
	v.Problem = replicaProblem(cfg, st, readErr, maxLag)
	now := time.Now()
	when := func(t *time.Time) string {
		if t == nil {
			return "never"
		}
		return t.Format(time.RFC3339) + " (" + now.Sub(*t).Round(time.Second).String() + " ago)"
	}
	lastErr := "none"
	if st.LastError != "" {
		lastErr = st.LastError + " at " + when(v.LastErrorAt)
	}
	if st.ReportedAt.IsZero() {
		lastErr = "unknown (serve is not running here)"
	} else {
		lastErr += ", reported by serve " + now.Sub(st.ReportedAt).Round(time.Second).String() + " ago"
	}
	rows := [][2]string{
		{"database", v.Database},
		{"replica", v.Replica},
		{"local txid", v.LocalTXID},
		{"replica txid", v.ReplicaTXID},
		{"in sync", map[bool]string{true: "yes", false: "no"}[v.InSync]},
		{"lag", fmt.Sprintf("%d bytes, %s", v.LagBytes, st.LagTime.Round(time.Millisecond))},
		{"last sync", when(v.LastSyncAt)},
		{"last error", lastErr},
	}
	if readErr != nil {
		rows = append(rows, [2]string{"replica error", readErr.Error()})
	}
	if v.Problem != "" {
		rows = append(rows, [2]string{"problem", v.Problem})
	}
	switch format {
	case "json":
		err = writeRecords(c.App.Writer, format, nil, nil, v)
	case "csv":
		// The JSON fields, as numbers and RFC 3339 times, for scripts.
		stamp := func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return t.Format(time.RFC3339Nano)
		}
		header := []string{"database", "replica", "local_txid", "replica_txid", "in_sync", "lag_bytes", "lag_seconds",
			"last_sync_at", "last_error", "last_error_at", "reported_at", "problem", "max_lag_seconds", "error"}
		values := []string{v.Database, v.Replica, v.LocalTXID, v.ReplicaTXID, strconv.FormatBool(v.InSync),
			strconv.FormatInt(v.LagBytes, 10), strconv.FormatFloat(v.LagSeconds, 'f', -1, 64), stamp(v.LastSyncAt), v.LastError,
			stamp(v.LastErrorAt), stamp(v.ReportedAt), v.Problem, strconv.FormatFloat(v.MaxLagSeconds, 'f', -1, 64), v.Error}
		err = writeRecords(c.App.Writer, format, header, [][]string{values}, v)
	default:
		tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
		}
		err = tw.Flush()
	}
	if err != nil {
		return err
	}
	if v.Problem != "" {
		return problem(fmt.Errorf("replica status: %s", v.Problem))
	}
	return nil
}

// replicaProblem is why the replica cannot be relied on, or "".
func replicaProblem(cfg *replication.Config, st replication.Status, readErr error, maxLag time.Duration) string {
	rc := cfg.DB.Replica
	switch {
	case readErr != nil:
		return "cannot read the replica: " + readErr.Error()
	case rc.Type == "file" && !dirExists(rc.Path):
		return fmt.Sprintf("the replica directory %s does not exist (has serve replicated with %s?)", rc.Path, cfg.File)
	case st.ReplicaTXID == 0:
		return "the replica holds no backup yet"
	case !st.InSync && st.LagTime > maxLag:
		return fmt.Sprintf("the replica is behind by %s (more than --max-lag %s): %d bytes not replicated",
			st.LagTime.Round(time.Second), maxLag, st.LagBytes)
	}
	return ""
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
