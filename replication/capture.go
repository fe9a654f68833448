package replication

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/benbjohnson/litestream"
)

// ErrWALFull is CheckWAL's error: Litestream cannot capture the WAL, and the
// WAL has grown as far as it may meanwhile.
var ErrWALFull = errors.New("the WAL is full")

// DefaultMaxWALGrowth is Replicator.MaxWALGrowth's default.
const DefaultMaxWALGrowth = 64 << 20

// Capture: hookledger, not Litestream's own monitor, runs Litestream's cut
// of the WAL into LTX files (DB.Sync), once per monitor interval.
//
// Litestream's monitor, after a failed cut, backs off up to 5 minutes and
// only logs the failure. A cut fails when the data disk is full, because its
// LTX file is staged beside the database; and Litestream checkpoints only
// after a cut, while the app runs with wal_autocheckpoint(0). So once the
// disk was freed, commits resumed at once, the backed-off monitor did not
// cut or checkpoint, the WAL grew by every commit and ate the freed space,
// and the next cut found no room for its LTX file either: 503s until the
// disk was grown, with replication reported healthy (the replica's own
// uploads had nothing new to fail on). Here instead:
//   - a cut is tried every monitor interval, failed or not, so the first one
//     that finds room also runs Litestream's checkpoint;
//   - a failed cut is replication failing (Healthy, Status, Publish) until a
//     cut succeeds;
//   - while cuts fail, CheckWAL stops commits once the WAL has grown
//     MaxWALGrowth past its size at the last good cut, so the space that
//     frees up is left to the cut that drains it;
//   - a replica whose uploads failed is retried on Open's schedule
//     (RetryInterval doubling to MaxRetryInterval), not after Litestream's
//     backoff of up to 5 minutes.
type capture struct {
	stop context.CancelFunc
	done sync.WaitGroup

	mu      sync.Mutex
	err     error     // the last cut's error; nil once a cut succeeds
	since   time.Time // when cuts began to fail
	walBase int64     // size of the -wal file after the last good cut
}

// startCapture runs the cut and replica-retry loops for db (from start).
func (r *Replicator) startCapture(db *litestream.DB) {
	ctx, stop := context.WithCancel(context.Background())
	r.capture.stop = stop
	r.capture.done.Add(2)
	go func() { defer r.capture.done.Done(); r.cutLoop(ctx, db) }()
	go func() { defer r.capture.done.Done(); r.replicaRetryLoop(ctx, db) }()
}

// stopCapture stops both loops and waits for them (from close, before the
// store closes).
func (r *Replicator) stopCapture() {
	if r.capture.stop != nil {
		r.capture.stop()
		r.capture.done.Wait()
		r.capture.stop = nil
	}
}

func (r *Replicator) cutLoop(ctx context.Context, db *litestream.DB) {
	tick := time.NewTicker(r.cfg.DB.MonitorInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		_ = r.cut(ctx, db)
	}
}

// cut cuts the WAL into an LTX file, and runs Litestream's checkpoint if one
// is due, and records the outcome. A cut ended by ctx records nothing: it
// says nothing about the disk.
func (r *Replicator) cut(ctx context.Context, db *litestream.DB) error {
	err := db.Sync(ctx)
	if err != nil && ctx.Err() != nil {
		return err
	}
	if err != nil {
		err = fmt.Errorf("litestream cannot capture the WAL of %s (no checkpoint until it can): %w", r.path, err)
	}
	return r.recordCut(err)
}

// recordCut records a cut's outcome, logging a change.
func (r *Replicator) recordCut(err error) error {
	c := &r.capture
	c.mu.Lock()
	failing := c.err != nil
	if err == nil {
		c.err = nil
		if fi, serr := os.Stat(r.path + "-wal"); serr == nil {
			c.walBase = fi.Size()
		}
	} else {
		if !failing {
			c.since = time.Now()
		}
		c.err = err
	}
	since := c.since
	c.mu.Unlock()
	r.client.record(err)
	switch {
	case err != nil && !failing:
		r.Logger.Error("replication: cannot capture the WAL; retrying every monitor interval", "db", r.path, "error", err.Error())
	case err == nil && failing:
		r.Logger.Info("replication: the WAL is captured again", "db", r.path, "failed_for", time.Since(since).Round(time.Millisecond).String())
	}
	return err
}

// cutFailing is the failed cut that replication has not recovered from (and
// since when), or nil.
func (r *Replicator) cutFailing() (error, time.Time) {
	r.capture.mu.Lock()
	defer r.capture.mu.Unlock()
	return r.capture.err, r.capture.since
}

// CheckWAL returns an error wrapping ErrWALFull while Litestream cannot
// capture the WAL and the -wal file has grown more than MaxWALGrowth past its
// size at the last good cut. The writer calls it before each batch and
// answers 503 meanwhile: nothing can checkpoint the WAL before it is cut
// (Litestream's read transaction pins it), so every commit would grow it
// and fill the space the cut needs. While cuts succeed it costs a mutex.
func (r *Replicator) CheckWAL() error {
	r.capture.mu.Lock()
	err, since, base := r.capture.err, r.capture.since, r.capture.walBase
	r.capture.mu.Unlock()
	if err == nil || r.MaxWALGrowth <= 0 {
		return nil
	}
	fi, serr := os.Stat(r.path + "-wal")
	if serr != nil || fi.Size() <= base+r.MaxWALGrowth {
		return nil
	}
	return fmt.Errorf("%w: it has grown %d bytes since Litestream's last capture (%s ago; at most %d while capture fails): %w",
		ErrWALFull, fi.Size()-base, time.Since(since).Round(time.Second), r.MaxWALGrowth, err)
}

// replicaRetryLoop uploads again, on Open's retry schedule, while the
// replica's last operation failed: Litestream's replica monitor waits up to
// 5 minutes after a run of failures, so a replica that came back would stay
// behind that long. An attempt is bounded by AttemptTimeout and runs beside
// the cuts, so a hung replica cannot hold them up.
func (r *Replicator) replicaRetryLoop(ctx context.Context, db *litestream.DB) {
	wait := time.Duration(0)
	for {
		next := r.RetryInterval
		if r.replicaFailing(db) {
			actx, cancel := context.WithTimeout(ctx, r.AttemptTimeout)
			err := db.Replica.Sync(actx)
			cancel()
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				r.client.record(fmt.Errorf("replica sync: %w", err))
				wait = min(max(2*wait, r.RetryInterval), r.MaxRetryInterval)
				next = wait
			} else {
				wait = 0
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(next):
		}
	}
}

// replicaFailing: the replica's last error is later than its last good sync.
func (r *Replicator) replicaFailing(db *litestream.DB) bool {
	r.client.mu.Lock()
	err, at := r.client.lastErr, r.client.lastErrAt
	r.client.mu.Unlock()
	return err != nil && !db.LastSuccessfulSyncAt().After(at)
}
