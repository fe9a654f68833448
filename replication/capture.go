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

// ErrWALFull is CheckWAL's error: the WAL has grown as far as it may before
// Litestream captures and checkpoints it.
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
//   - CheckWAL stops commits once the WAL file has grown, since Litestream
//     last restarted it, by half the free disk space, or while cuts fail by
//     MaxWALGrowth, so the space that frees up is left to the cut that
//     drains the WAL and to the checkpoint after it;
//   - a replica whose uploads failed is retried on Open's schedule
//     (RetryInterval doubling to MaxRetryInterval), not after Litestream's
//     backoff of up to 5 minutes.
type capture struct {
	stop context.CancelFunc
	done sync.WaitGroup

	mu      sync.Mutex
	err     error     // the last cut's error; nil once a cut succeeds
	since   time.Time // when cuts began to fail
	walBase int64     // size of the -wal file when a good cut first saw its current generation
	walSalt [8]byte   // that generation's salts (the WAL header's)
	known   bool      // walBase is set: a cut has succeeded
}

// startCapture runs the cut, replica-retry and prune loops for db (from start).
func (r *Replicator) startCapture(db *litestream.DB) {
	ctx, stop := context.WithCancel(context.Background())
	r.capture.stop = stop
	r.capture.done.Add(3)
	go func() {
		defer r.capture.done.Done()
		every(ctx, r.cfg.DB.MonitorInterval, func() { _ = r.cut(ctx, db) })
	}()
	go func() { defer r.capture.done.Done(); r.replicaRetryLoop(ctx, db) }()
	go func() { defer r.capture.done.Done(); every(ctx, pruneEvery, func() { r.prune(ctx, db) }) }()
}

// stopCapture stops the loops and waits for them (from close, before the
// store closes).
func (r *Replicator) stopCapture() {
	if r.capture.stop != nil {
		r.capture.stop()
		r.capture.done.Wait()
		r.capture.stop = nil
	}
}

// every runs fn every d until ctx ends (the cut and prune loops).
func every(ctx context.Context, d time.Duration, fn func()) {
	tick := time.NewTicker(d)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fn()
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
		// The count starts again where the WAL restarted since the last
		// look (Litestream checkpointed it: its space is reused from the
		// start), not at every cut: a WAL that is cut but never restarted
		// grows the file all the same.
		if size, salt, ok := walHeader(r.path); ok && (!c.known || salt != c.walSalt) {
			c.walBase, c.walSalt, c.known = size, salt, true
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

// cutFailing is since when, and with which error, replication has failed to
// cut the WAL without recovering; err is nil when it has not.
func (r *Replicator) cutFailing() (since time.Time, err error) {
	r.capture.mu.Lock()
	defer r.capture.mu.Unlock()
	return r.capture.since, r.capture.err
}

// CheckWAL returns an error wrapping ErrWALFull when the -wal file has grown,
// since a good cut last found it restarted (checkpointed by Litestream), by
// more than half the disk space still free (FreeSpace), or, while cuts
// fail, by more than MaxWALGrowth. The
// writer calls it before each batch and answers 503 meanwhile. Nothing can
// checkpoint the WAL before it is cut (Litestream's read transaction pins
// it), so each commit grows it until the next cut, and that cut needs room
// for its LTX file, and the checkpoint after it room for the database to
// grow: on a disk with space just freed, commits would otherwise take it
// all within a second. Meanwhile the writer's pause lets Litestream's
// checkpoint take the write lock it needs; the restarted WAL is reused from
// its start, and the count starts again.
func (r *Replicator) CheckWAL() error {
	r.capture.mu.Lock()
	cutErr, since, base, known := r.capture.err, r.capture.since, r.capture.walBase, r.capture.known
	r.capture.mu.Unlock()
	if !known {
		return nil // not replicating yet: nothing is cut
	}
	fi, err := os.Stat(r.path + "-wal")
	if err != nil {
		return nil
	}
	grown := fi.Size() - base
	if grown <= 0 {
		return nil
	}
	if cutErr != nil && r.MaxWALGrowth > 0 && grown > r.MaxWALGrowth {
		return fmt.Errorf("%w: it has grown %d bytes since Litestream last checkpointed it (at most %d while capture fails, as it has for %s): %w",
			ErrWALFull, grown, r.MaxWALGrowth, time.Since(since).Round(time.Second), cutErr)
	}
	if r.FreeSpace == nil {
		return nil
	}
	if free, err := r.FreeSpace(); err == nil && uint64(grown) > free/2 {
		err := fmt.Errorf("%w: it has grown %d bytes since Litestream last checkpointed it and the disk has %d bytes free: the rest is kept for Litestream's capture and checkpoint",
			ErrWALFull, grown, free)
		if cutErr != nil {
			err = fmt.Errorf("%w, which fails: %w", err, cutErr)
		}
		return err
	}
	return nil
}

// walHeader is the -wal file's size and its header's salts.
func walHeader(dbPath string) (size int64, salt [8]byte, ok bool) {
	f, err := os.Open(dbPath + "-wal")
	if err != nil {
		return 0, salt, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, salt, false
	}
	_, _ = f.ReadAt(salt[:], 16) // too short for a header: no generation yet, zero salts
	return fi.Size(), salt, true
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
