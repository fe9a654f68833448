package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/hookledger/hookledger/health"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/replication"
)

// Replication is what serve is asked to do with Litestream: serve's
// replication flags and litestream.yml, already resolved and checked against
// each other by the command line.
type Replication struct {
	// Config is litestream.yml, already checked against hookledger's
	// database (CheckDB), its shutdown-sync-timeout overridden by the flag;
	// nil means serve does not replicate.
	Config *replication.Config
	// AckAfterReplica answers 2xx only once the replica holds the event
	// (--ack-after-replica or durability: replica).
	AckAfterReplica bool
	// RestoreIfMissing restores a missing database from the replica before
	// serving (--restore-if-missing or litestream.yml's restore-if-db-not-exists).
	RestoreIfMissing bool
	// Takeover moves a replica that is ahead of this database aside instead of
	// refusing to start (--replica-takeover).
	Takeover bool
	// OffReason is logged when Config is nil: why serve does not replicate.
	OffReason string
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

// newReplication prepares Litestream for serve. It creates nothing and does
// not contact the replica: serve calls it before anything exists. nil, nil:
// not replicating.
func newReplication(r Replication, log *slog.Logger) (*serveReplication, error) {
	lcfg := r.Config
	if lcfg == nil {
		return nil, nil
	}
	rep, err := replication.NewReplicator(lcfg, lcfg.DB.Path)
	if err != nil {
		return nil, err
	}
	rep.Logger, rep.Takeover = log, r.Takeover
	dir := filepath.Dir(lcfg.DB.Path)
	rep.FreeSpace = func() (uint64, error) { // the WAL bound keeps half of it for Litestream
		st, err := health.StatDisk(dir)
		return st.FreeBytes, err
	}
	return &serveReplication{
		cfg: lcfg, ack: r.AckAfterReplica, log: log, rep: rep,
		restoreIfMissing: r.RestoreIfMissing || lcfg.DB.RestoreIfDBNotExists,
		down:             &rateLimitedLog{Every: replicaDownLogEvery},
	}, nil
}

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

// AdmitFunc is the writer's Admit: the replicator's WAL bound
// (Replicator.CheckWAL), whatever the durability mode, since a WAL that
// Litestream cannot capture is never checkpointed. nil when not replicating.
func (s *serveReplication) AdmitFunc() func() error {
	if s == nil {
		return nil
	}
	return s.rep.CheckWAL
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
	// Once before the first listing, which can take seconds: `replica
	// status` then knows serve runs from its first moments (what it reports,
	// Litestream's own outcome, needs no listing).
	if perr := s.rep.Publish(); perr != nil {
		s.log.Warn("cannot publish replica status", "error", perr.Error())
	}
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
