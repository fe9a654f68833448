package replication

import (
	"github.com/hookledger/hookledger/durable"

	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

// Status describes how far the replica is behind the local database.
type Status struct {
	DBPath      string
	Replica     string // "file:<dir>" or "s3://bucket/prefix"
	LocalTXID   TXID   // last transaction Litestream has cut from the WAL
	ReplicaTXID TXID   // last transaction the replica holds
	// InSync: ReplicaTXID == LocalTXID and the WAL holds nothing Litestream
	// has not cut (WAL is not WALPending or WALUnknown).
	InSync bool
	// LagBytes and LagTime cover LTX files cut locally but not yet uploaded
	// (LagTime is the age of the oldest) and committed WAL frames not cut
	// yet (WALPendingBytes). Those were committed after Litestream's last
	// cut, so for them, and while WAL is WALUnknown, LagTime is the time
	// since that cut (CapturedAt): an upper bound.
	LagBytes int64
	LagTime  time.Duration
	// WAL compares the database's -wal file with what Litestream last cut
	// from it: WALCaptured, WALPending (WALPendingBytes committed bytes not
	// cut yet, included in LagBytes), WALUnknown (WALReason says why; the
	// replica may lack commits) or WALNoHistory (nothing cut yet).
	WAL             WALState
	WALReason       string
	WALPendingBytes int64
	WALModTime      time.Time // last write to the -wal file; zero if there is none
	CapturedAt      time.Time // when Litestream last cut the WAL (newest local L0 file); zero if never
	LastSyncAt      time.Time // last successful replica sync; zero if none
	LastError       string    // last replica error; empty if none
	LastErrorAt     time.Time
	// ReportedAt is set by ReadStatus when a running Replicator has
	// published its LastSyncAt and LastError (see Publish): when it did.
	ReportedAt time.Time
}

// Healthy reports whether the replica's last operation succeeded.
func (s Status) Healthy() bool { return s.LastError == "" || s.LastSyncAt.After(s.LastErrorAt) }

// Status asks the replica for its position, so it fails when the replica is
// unreachable. When the WAL holds commits so recent that Litestream's monitor
// may not have polled since, it waits (at most the monitor interval and
// settleGrace, within ctx) and looks again: see settle.
func (r *Replicator) Status(ctx context.Context) (Status, error) {
	st, err := r.status(ctx)
	if wait := settle(st, r.cfg.DB.MonitorInterval); wait > 0 && err == nil {
		select {
		case <-time.After(wait):
			st, err = r.status(ctx)
		case <-ctx.Done():
		}
	}
	return st, err
}

// settleGrace is how long Litestream's cut may take after its monitor polls.
const settleGrace = 500 * time.Millisecond

// maxSettle bounds the wait in settle: with a longer monitor interval a
// status call does not wait for the next poll.
const maxSettle = 5 * time.Second

// settle says how long to wait before a second look at st: its pending WAL
// commits may be younger than the monitor interval, so a running Litestream
// may be about to cut them. Their LagTime (since the last cut) would then
// overstate the lag of a quiet database that just took a commit; the second
// look shows either the cut (and a small lag) or the same cut (capture is
// stopped or stuck, and the lag is real). 0: no second look.
func settle(st Status, monitor time.Duration) time.Duration {
	if st.WAL != WALPending || st.CapturedAt.IsZero() || monitor <= 0 || monitor+settleGrace > maxSettle {
		return 0
	}
	return time.Until(st.WALModTime.Add(monitor + settleGrace))
}

func (r *Replicator) status(ctx context.Context) (Status, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.db == nil && r.pending == nil {
		return Status{}, ErrClosed
	}
	st, err := readStatus(ctx, r.path, &r.cfg.DB.Replica, r.client)
	if r.db == nil && err == nil {
		err = fmt.Errorf("%w: %w", ErrNotStarted, r.pending) // listing works, but nothing is replicated
	}
	var lastErr error
	st.LastSyncAt, st.LastErrorAt, lastErr = r.outcome()
	if lastErr != nil {
		st.LastError = lastErr.Error()
	}
	return st, err
}

// outcome is the last successful sync and the last error (any of the
// replica's, or of a cut), under r.mu. While cuts fail, the replica's
// later syncs had nothing new to upload: the last sync is then no later
// than the first failed cut, so a status never reads healthy meanwhile.
func (r *Replicator) outcome() (lastSync, lastErrAt time.Time, lastErr error) {
	if r.db != nil {
		lastSync = r.db.LastSuccessfulSyncAt()
	}
	if since, err := r.cutFailing(); err != nil && lastSync.After(since) {
		lastSync = since
	}
	r.client.mu.Lock()
	lastErr, lastErrAt = r.client.lastErr, r.client.lastErrAt
	r.client.mu.Unlock()
	return lastSync, lastErrAt, lastErr
}

// Healthy reports the replica's last outcome without asking the replica,
// so it is cheap enough for every readiness probe: a failing cut of the WAL
// (capture.go) until a cut succeeds, else the last replica error, unless a
// sync has succeeded since. It does not notice a replica that died while
// nothing was written; Status does (it lists the replica).
func (r *Replicator) Healthy() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.db == nil {
		if r.pending != nil {
			return fmt.Errorf("%w: %w", ErrNotStarted, r.pending)
		}
		return ErrClosed
	}
	if _, err := r.cutFailing(); err != nil {
		return err
	}
	r.client.mu.Lock()
	err, at := r.client.lastErr, r.client.lastErrAt
	r.client.mu.Unlock()
	if err != nil && !r.db.LastSuccessfulSyncAt().After(at) {
		return fmt.Errorf("replica %s: %w", r.cfg.DB.Replica.String(), err)
	}
	return nil
}

// reportFile, inside the database's Litestream sidecar, is where a running
// Replicator publishes what only it knows (its last successful sync and last
// error) for ReadStatus in another process. It lives and dies with the
// sidecar, so it never describes a different database.
const reportFile = "hookledger-replica.json"

// ReportStale is how old a published report may be before Restore stops
// treating its publisher as running; publish more often than this.
const ReportStale = 30 * time.Second

type report struct {
	PID         int       `json:"pid"`
	UpdatedAt   time.Time `json:"updated_at"`
	LastSyncAt  time.Time `json:"last_sync_at"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at"`
}

// Publish writes the replicator's last successful sync and last error where
// ReadStatus (the `replica status` command) finds them. serve calls it
// periodically.
func (r *Replicator) Publish() error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	rep := report{PID: os.Getpid(), UpdatedAt: time.Now().UTC()}
	switch {
	case r.db != nil:
		lastSync, lastErrAt, lastErr := r.outcome()
		rep.LastSyncAt, rep.LastErrorAt = lastSync.UTC(), lastErrAt.UTC()
		if lastErr != nil {
			rep.LastError = lastErr.Error()
		}
	case r.pending != nil:
		rep.LastError, rep.LastErrorAt = fmt.Errorf("%w: %w", ErrNotStarted, r.pending).Error(), rep.UpdatedAt
	default:
		return ErrClosed
	}
	if len(rep.LastError) > maxReportError {
		rep.LastError = rep.LastError[:maxReportError] + "…"
	}
	buf, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	if err := durable.MkdirAll(MetaPath(r.path), 0o700); err != nil { // before Litestream's first start
		return fmt.Errorf("publish replica status: %w", err)
	}
	if err := writeReport(filepath.Join(MetaPath(r.path), reportFile), buf); err != nil {
		return fmt.Errorf("publish replica status: %w", err)
	}
	return nil
}

// reportSize is the size every report file is padded to (JSON allows the
// trailing spaces), so that one can be rewritten in place without taking a
// new block of a full disk; maxReportError keeps a report within it.
const (
	reportSize     = 4096
	maxReportError = 2048
)

// writeReport writes and renames, so a reader never sees half a file. On a
// full disk, where the new file cannot be written, it overwrites the
// existing one in place instead: a reader may then see a torn report, which
// does not parse and is read as none, once; a stale report would say
// "healthy" all along. No fsync: it is advisory and rewritten every few
// seconds.
func writeReport(path string, buf []byte) error {
	if len(buf) < reportSize {
		buf = append(buf, bytes.Repeat([]byte(" "), reportSize-len(buf))...)
	}
	tmp := path + ".tmp"
	err := os.WriteFile(tmp, buf, 0o600)
	if err == nil {
		return os.Rename(tmp, path)
	}
	os.Remove(tmp)
	f, ferr := os.OpenFile(path, os.O_WRONLY, 0)
	if ferr != nil {
		return err
	}
	if _, ferr = f.WriteAt(buf, 0); ferr == nil {
		ferr = f.Truncate(int64(len(buf)))
	}
	if cerr := f.Close(); ferr == nil {
		ferr = cerr
	}
	if ferr != nil {
		return err
	}
	return nil
}

// ReadStatus reports positions and lag from another process (the
// `replica status` command) by reading the database's Litestream sidecar and
// listing the replica. It does not start replication. LastSyncAt is the
// creation time of the replica's newest L0 file, or the running serve's last
// successful sync if it published a later one; LastError is what serve
// published (ReportedAt says when), else unknown.
//
// The WAL is compared with Litestream's last cut too (Status.WAL), by reading
// files only; like Replicator.Status, it may look twice (settle).
func ReadStatus(ctx context.Context, cfg *Config) (Status, error) {
	client, err := newReplicaClient(&cfg.DB.Replica)
	if err != nil {
		return Status{}, err
	}
	st, err := readStatus(ctx, cfg.DB.Path, &cfg.DB.Replica, client)
	if wait := settle(st, cfg.DB.MonitorInterval); wait > 0 && err == nil {
		select {
		case <-time.After(wait):
			st, err = readStatus(ctx, cfg.DB.Path, &cfg.DB.Replica, client)
		case <-ctx.Done():
		}
	}
	if buf, rerr := os.ReadFile(filepath.Join(MetaPath(cfg.DB.Path), reportFile)); rerr == nil {
		var rep report
		if json.Unmarshal(buf, &rep) == nil {
			st.ReportedAt, st.LastError, st.LastErrorAt = rep.UpdatedAt, rep.LastError, rep.LastErrorAt
			if rep.LastSyncAt.After(st.LastSyncAt) {
				st.LastSyncAt = rep.LastSyncAt
			}
		}
	}
	return st, err
}

func readStatus(ctx context.Context, dbPath string, rc *ReplicaConfig, client litestream.ReplicaClient) (Status, error) {
	st := Status{DBPath: dbPath, Replica: rc.String()}
	ws := readWAL(dbPath) // local files only: known even when the replica is not
	st.WAL, st.WALReason, st.WALPendingBytes = ws.State, ws.Reason, ws.PendingBytes
	st.WALModTime, st.CapturedAt = ws.ModTime, ws.CapturedAt
	if err := client.Init(ctx); err != nil {
		return st, fmt.Errorf("replica %s: %w", st.Replica, err)
	}
	itr, err := client.LTXFiles(ctx, 0, 0, false)
	if err != nil {
		return st, fmt.Errorf("list replica %s: %w", st.Replica, err)
	}
	for itr.Next() {
		if info := itr.Item(); info.MaxTXID >= st.ReplicaTXID {
			st.ReplicaTXID, st.LastSyncAt = info.MaxTXID, info.CreatedAt
		}
	}
	if err := itr.Close(); err != nil {
		return st, fmt.Errorf("list replica %s: %w", st.Replica, err)
	}
	ents, err := os.ReadDir(filepath.FromSlash(litestream.LTXLevelDir(MetaPath(dbPath), 0)))
	if err != nil && !os.IsNotExist(err) {
		return st, err
	}
	var oldest time.Time
	for _, ent := range ents {
		minTXID, maxTXID, err := ltx.ParseFilename(ent.Name())
		if err != nil {
			continue
		}
		st.LocalTXID = max(st.LocalTXID, maxTXID)
		if minTXID <= st.ReplicaTXID {
			continue
		}
		if fi, err := ent.Info(); err == nil {
			st.LagBytes += fi.Size()
			if oldest.IsZero() || fi.ModTime().Before(oldest) {
				oldest = fi.ModTime()
			}
		}
	}
	if !oldest.IsZero() {
		st.LagTime = time.Since(oldest)
	}
	st.LagBytes += ws.PendingBytes
	if (ws.State == WALPending || ws.State == WALUnknown) && !ws.CapturedAt.IsZero() {
		st.LagTime = max(st.LagTime, time.Since(ws.CapturedAt))
	}
	st.InSync = st.LocalTXID == st.ReplicaTXID && ws.State != WALPending && ws.State != WALUnknown
	return st, nil
}
