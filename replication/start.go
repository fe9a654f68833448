package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/cenkalti/backoff/v5"

	"github.com/hookledger/hookledger/durable"
)

// Check compares the local database's replication position (LocalTXID) with
// the newest TXID the replica holds, before anything is replicated. It
// returns an *AheadError (ErrReplicaAhead) when the replica is ahead, unless
// Takeover is set: then it moves the replica aside first (takeover.go). Any
// other error means the replica could not be read. The database need not
// exist yet: a missing one has no history, so a replica with data is ahead
// of it.
//
// Litestream itself only logs "detected database behind replica" and goes
// on, so this check must run before Litestream first touches the replica:
// Open does not start Litestream until it has passed.
func (r *Replicator) Check(ctx context.Context) error {
	err := r.check(ctx)
	r.mu.Lock()
	r.tried, r.checked = true, err == nil
	if err != nil {
		r.pending = err
	}
	r.mu.Unlock()
	return err
}

func (r *Replicator) check(ctx context.Context) error {
	local, restored, err := LocalTXID(r.path)
	if err != nil {
		return err
	}
	where := r.cfg.DB.Replica.String()
	if r.cfg.DB.Replica.Type == "file" {
		// Litestream would create the directory without syncing its
		// parent: a replica on this machine's disks must not vanish at a
		// power cut with what it was acknowledged for. A directory that
		// cannot be made is a replica that cannot be reached (retried).
		if err := durable.MkdirAll(r.cfg.DB.Replica.Path, 0o700); err != nil {
			return r.client.record(fmt.Errorf("replica %s: %w", where, err))
		}
	}
	if err := r.client.Init(ctx); err != nil {
		return r.client.record(fmt.Errorf("replica %s: %w", where, err))
	}
	remote, err := replicaTXID(ctx, r.client)
	if err != nil {
		return fmt.Errorf("list replica %s: %w", where, err)
	}
	if remote <= local {
		return nil
	}
	if !r.Takeover {
		return &AheadError{DBPath: r.path, Replica: where, LocalTXID: local, Restored: restored, ReplicaTXID: remote}
	}
	archive, err := r.takeover(ctx, r.client.ReplicaClient)
	if err != nil {
		return err
	}
	r.Takeover = false // done: the replica location now starts from this database
	r.Logger.Warn("replica takeover: moved the replica's files aside, whole; replicating this database as a new history",
		"archive", archive, "replica", where, "db", r.path, "local_txid", local.String(), "replica_txid", remote.String())
	return nil
}

// Open starts replicating the database, which must exist (open and migrate
// it first). Open returns an error only for a local problem or, when Check
// has not run yet, for a replica that is ahead (ErrReplicaAhead). A replica
// that cannot be reached does not stop Open: it returns, and attempts go on
// in the background with exponential backoff until replication starts or
// Close is called. Meanwhile commits stay local (the WAL keeps them until
// Litestream copies it), Sync and Healthy return ErrNotStarted, and Status
// says why.
func (r *Replicator) Open(ctx context.Context) error {
	r.mu.Lock()
	if r.opened {
		r.mu.Unlock()
		return errors.New("replicator already open")
	}
	if _, err := os.Stat(r.path); err != nil {
		r.mu.Unlock()
		return fmt.Errorf("replicate %s: the database must exist before replication starts: %w", r.path, err)
	}
	r.opened = true
	tried := r.tried
	r.mu.Unlock()
	if !tried {
		if err := r.Check(ctx); errors.Is(err, ErrReplicaAhead) {
			return err
		}
	}
	r.mu.RLock()
	checked := r.checked
	r.mu.RUnlock()
	if checked {
		if err := r.start(ctx); err == nil {
			return nil
		}
	}
	retryCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r.mu.Lock()
	r.stopRetry, r.retryDone = stop, make(chan struct{})
	r.mu.Unlock()
	go r.retry(retryCtx)
	return nil
}

// retry attempts Check (until it passes) and start until replication runs.
func (r *Replicator) retry(ctx context.Context) {
	defer close(r.retryDone)
	b := &backoff.ExponentialBackOff{
		InitialInterval:     r.RetryInterval,
		RandomizationFactor: backoff.DefaultRandomizationFactor,
		Multiplier:          2,
		MaxInterval:         r.MaxRetryInterval,
	}
	attempt := func() (struct{}, error) {
		actx, cancel := context.WithTimeout(ctx, r.AttemptTimeout)
		defer cancel()
		r.mu.RLock()
		checked := r.checked
		r.mu.RUnlock()
		if !checked {
			if err := r.Check(actx); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, r.start(actx)
	}
	// MaxElapsedTime 0: never give up (v5's default stops after 15 min).
	_, _ = backoff.Retry(ctx, attempt, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0))
}

// start opens Litestream on the database and cuts the first LTX file, so a
// broken sidecar or a replica that cannot be read fails here rather than in
// a background goroutine. It does not wait for the replica's copy: call Sync.
func (r *Replicator) start(ctx context.Context) error {
	c := r.cfg
	db := litestream.NewDB(r.path)
	db.MonitorInterval = 0 // hookledger runs the cuts (capture.go)
	db.CheckpointInterval = c.DB.CheckpointInterval
	db.BusyTimeout = c.DB.BusyTimeout
	db.Replica = litestream.NewReplicaWithClient(db, r.client)
	db.Replica.SyncInterval = c.DB.Replica.SyncInterval
	if fc, ok := r.client.ReplicaClient.(*file.ReplicaClient); ok {
		fc.Replica = db.Replica // lets it create replica dirs with the database dir's mode
	}

	// Levels as the stock CLI builds them: L0 raw, then one per interval.
	levels := litestream.CompactionLevels{{Level: 0}}
	for i, d := range c.Levels {
		levels = append(levels, &litestream.CompactionLevel{Level: i + 1, Interval: d})
	}
	store := litestream.NewStore([]*litestream.DB{db}, levels)
	store.Logger = r.Logger.With("system", "litestream")
	// NewStore copies its defaults into the DB; the setters re-propagate.
	store.SnapshotInterval = c.SnapshotInterval
	store.SnapshotRetention = c.SnapshotRetention
	store.SetL0Retention(c.L0Retention)
	store.SetShutdownSyncTimeout(r.ShutdownSyncTimeout)
	store.SetRetentionEnabled(c.RetentionEnabled)
	// Every Litestream line carries system=litestream, so an operator (and the
	// docs' runner) can tell them from hookledger's own.
	db.SetLogger(r.Logger.With("system", "litestream", "db", filepath.Base(r.path)))

	fail := func(err error) error {
		err = r.client.record(err)
		r.mu.Lock()
		r.pending = err
		r.mu.Unlock()
		return err
	}
	if err := store.Open(ctx); err != nil {
		_ = store.Close(context.WithoutCancel(ctx))
		return fail(fmt.Errorf("start litestream: %w", err))
	}
	if err := db.Sync(ctx); err != nil {
		// Not initialised, Litestream's Close has nothing to flush: prompt.
		_ = store.Close(context.WithoutCancel(ctx))
		return fail(fmt.Errorf("first litestream sync of %s: %w", r.path, err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		_ = store.Close(context.WithoutCancel(ctx))
		return ErrClosed
	}
	r.db, r.store, r.pending = db, store, nil
	r.recordCut(nil)
	r.startCapture(db)
	return nil
}
