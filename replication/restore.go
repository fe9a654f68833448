package replication

import (
	"github.com/hookledger/hookledger/durable"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

var (
	// ErrNoReplica means the replica holds no backup at all: wrong
	// location, or replication never ran.
	ErrNoReplica = errors.New("replica holds no backup")

	// ErrNotAvailable means the replica has backups, but none reaches back
	// to the requested TXID or timestamp (or the TXID is in the future).
	ErrNotAvailable = errors.New("requested point in time is not in the replica")

	// ErrDBExists means the output database (or a -wal/-shm/-journal file
	// of one) exists and RestoreOptions.Force is not set.
	ErrDBExists = errors.New("database already exists")

	// ErrInUse means a running Replicator (hookledger serve) published its
	// status for the output database moments ago: restoring over a database
	// another process has open would corrupt it.
	ErrInUse = errors.New("database is in use")
)

// TXID is a Litestream transaction ID. It counts Litestream sync batches
// (one LTX file each), not SQLite commits; it prints as 16 hex digits.
type TXID = ltx.TXID

// ParseTXID parses the hex form printed by TXID.String and by the stock
// `litestream ltx` command; unlike the stock CLI, leading zeros are optional.
func ParseTXID(s string) (TXID, error) {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || len(s) > 16 {
		return 0, fmt.Errorf("invalid txid %q: want up to 16 hex digits", s)
	}
	return TXID(v), nil
}

// MetaPath is the local sidecar directory Litestream keeps next to the
// database: ".<file name>-litestream" (e.g. ".hookledger.db-litestream").
// It holds the LTX files cut from the WAL and must not outlive the database
// it describes.
func MetaPath(dbPath string) string {
	dir, name := filepath.Split(dbPath)
	return filepath.Join(dir, "."+name+litestream.MetaDirSuffix)
}

// RestoreOptions selects what to restore and where. The zero value restores
// the latest state into the database path named in the config.
type RestoreOptions struct {
	// OutputPath defaults to the database path in the config.
	OutputPath string

	// At most one of TXID and Timestamp: restore the state as of that
	// Litestream transaction, or the last one replicated before Timestamp.
	TXID      TXID
	Timestamp time.Time

	// IfDBNotExists makes an existing output database a successful no-op
	// (RestoreResult.Skipped), for restore-if-missing at startup.
	IfDBNotExists bool

	// Force replaces an existing database and removes its -wal, -shm and
	// -journal files. Without it such files are an ErrDBExists error:
	// a WAL may hold the only copy of recent commits.
	Force bool

	// Logger receives Litestream's restore logs. Default: slog.Default().
	Logger *slog.Logger

	// Progress, when set, is called as LTX bytes are read from the replica:
	// read so far and the plan's total (a reader retried after a network
	// error counts again, so read is capped at total). It may be called
	// from several goroutines at once.
	Progress func(read, total int64)
}

// RestoreResult describes what Restore wrote.
type RestoreResult struct {
	Path      string
	TXID      TXID      // Litestream transaction the database now reflects
	Timestamp time.Time // when that transaction was replicated
	Files     int       // LTX files applied
	Skipped   bool      // IfDBNotExists and the database existed; nothing written
}

// Restore rebuilds the configured database from its replica.
//
// It restores into a temporary file next to the target, runs SQLite's full
// integrity_check on it, and only then removes the target's stale -wal/-shm
// files and Litestream sidecar and renames the new file into place: a failed
// or interrupted restore leaves the previous state untouched. The application
// (and its Replicator) must not have the target open.
func Restore(ctx context.Context, cfg *Config, opts RestoreOptions) (res RestoreResult, err error) {
	if opts.TXID != 0 && !opts.Timestamp.IsZero() {
		return res, errors.New("restore: choose a TXID or a timestamp, not both")
	}
	out := opts.OutputPath
	if out == "" {
		out = cfg.DB.Path
	}
	if out, err = filepath.Abs(out); err != nil {
		return res, err
	}
	res.Path = out
	logger := opts.Logger
	if logger == nil {
		logger = slog.Default()
	}

	switch fi, err := os.Stat(out); {
	case err == nil && fi.IsDir():
		return res, fmt.Errorf("restore: %s is a directory", out)
	case err == nil && opts.IfDBNotExists:
		res.Skipped = true
		return res, nil
	case err == nil && !opts.Force:
		return res, fmt.Errorf("restore: %s: %w (use --force to replace it)", out, ErrDBExists)
	case err != nil && !os.IsNotExist(err):
		return res, fmt.Errorf("restore: %w", err)
	}
	if opts.Force {
		if pid, ago, ok := liveReplicator(out); ok {
			return res, fmt.Errorf("restore: %s: %w: process %d (hookledger serve) replicated it %s ago; stop it first",
				out, ErrInUse, pid, ago.Round(time.Second))
		}
	} else {
		for _, p := range []string{out + "-wal", out + "-shm", out + "-journal"} {
			if _, err := os.Stat(p); err == nil {
				return res, fmt.Errorf("restore: stale %s without its database: %w (use --force to remove it)", p, ErrDBExists)
			}
		}
	}

	client, err := newReplicaClient(&cfg.DB.Replica)
	if err != nil {
		return res, err
	}
	client.SetLogger(logger)
	where := cfg.DB.Replica.String()
	if err := client.Init(ctx); err != nil {
		return res, fmt.Errorf("restore from %s: %w", where, err)
	}

	// Plan first, then restore exactly the planned TXID, so the result we
	// report is the state we wrote even while a live replicator keeps
	// uploading (TXID alone determines the state).
	plan, err := litestream.CalcRestorePlan(ctx, client, opts.TXID, opts.Timestamp, logger)
	if errors.Is(err, litestream.ErrTxNotAvailable) {
		if empty, e := replicaEmpty(ctx, client); e != nil {
			return res, fmt.Errorf("restore from %s: %w", where, e)
		} else if empty {
			return res, fmt.Errorf("restore from %s: %w", where, ErrNoReplica)
		}
		return res, fmt.Errorf("restore from %s at %s: %w", where, target(opts), ErrNotAvailable)
	} else if err != nil {
		return res, fmt.Errorf("restore from %s: plan: %w", where, err)
	}
	last := plan[len(plan)-1]
	res.TXID, res.Timestamp, res.Files = last.MaxTXID, last.CreatedAt, len(plan)

	if err := durable.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	// A unique name Litestream may create (it refuses existing outputs). It
	// writes <tmp>.tmp and renames it to <tmp> itself.
	tmp := filepath.Join(filepath.Dir(out), "."+filepath.Base(out)+".restore-"+strconv.FormatInt(time.Now().UnixNano(), 36))
	defer func() {
		for _, p := range []string{tmp, tmp + ".tmp", tmp + "-wal", tmp + "-shm"} {
			_ = os.Remove(p)
		}
	}()
	ropt := litestream.NewRestoreOptions()
	ropt.OutputPath = tmp
	ropt.TXID = res.TXID
	ropt.IntegrityCheck = litestream.IntegrityCheckFull // PRAGMA integrity_check
	if opts.Progress != nil {
		pc := &progressClient{ReplicaClient: client, report: opts.Progress}
		for _, info := range plan {
			pc.total += info.Size
		}
		client = pc
	}
	replica := litestream.NewReplicaWithClient(nil, client)
	if err := replica.Restore(ctx, ropt); err != nil {
		return res, fmt.Errorf("restore %s from %s: %w", res.TXID, where, err)
	}

	// Litestream creates its output with os.Create (0666 less the umask);
	// the database holds raw bodies, so it is private whatever the umask.
	if err := os.Chmod(tmp, 0o600); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}

	// The new file is whole and checked. Stale -wal/-shm must go before it
	// takes the old name: SQLite would replay an old WAL over the restored
	// pages. The sidecar's LTX files describe the old database; Litestream
	// starts a fresh one from the replica's position.
	for _, p := range []string{out + "-wal", out + "-shm", out + "-journal", litestream.TXIDPath(out)} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return res, fmt.Errorf("restore: remove stale %s: %w", p, err)
		}
	}
	if err := os.RemoveAll(MetaPath(out)); err != nil {
		return res, fmt.Errorf("restore: remove stale sidecar: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	if err := durable.SyncDir(filepath.Dir(out)); err != nil {
		return res, fmt.Errorf("restore: %w", err)
	}
	// Without this, serve could not tell the restored database from a new
	// empty one and would refuse to replicate it (see LocalTXID).
	if err := writeRestoredMarker(out, res.TXID, where); err != nil {
		return res, fmt.Errorf("restored %s, but cannot record its position (serve will refuse to replicate it): %w", out, err)
	}
	return res, nil
}

// liveReplicator reports another process that published a status report for
// dbPath recently (Publish runs every few seconds while serve replicates),
// unless /proc shows that process is gone.
func liveReplicator(dbPath string) (pid int, ago time.Duration, ok bool) {
	buf, err := os.ReadFile(filepath.Join(MetaPath(dbPath), reportFile))
	if err != nil {
		return 0, 0, false
	}
	var rep report
	if json.Unmarshal(buf, &rep) != nil || rep.PID == os.Getpid() {
		return 0, 0, false
	}
	if ago = time.Since(rep.UpdatedAt); ago > ReportStale {
		return 0, 0, false
	}
	if _, err := os.Stat("/proc/self"); err == nil {
		if _, err := os.Stat("/proc/" + strconv.Itoa(rep.PID)); err != nil {
			return 0, 0, false // Linux, and that process has exited
		}
	}
	return rep.PID, ago, true
}

func target(opts RestoreOptions) string {
	if opts.TXID != 0 {
		return "txid " + opts.TXID.String()
	}
	return opts.Timestamp.UTC().Format(time.RFC3339Nano)
}

// replicaEmpty reports whether no level of the replica holds an LTX file.
func replicaEmpty(ctx context.Context, client litestream.ReplicaClient) (bool, error) {
	for level := 0; level <= litestream.SnapshotLevel; level++ {
		itr, err := client.LTXFiles(ctx, level, 0, false)
		if err != nil {
			return false, err
		}
		found := itr.Next()
		if err := itr.Close(); err != nil {
			return false, err
		}
		if found {
			return false, nil
		}
	}
	return true, nil
}

// progressClient counts the LTX bytes a restore reads.
type progressClient struct {
	litestream.ReplicaClient
	total  int64
	read   atomic.Int64
	report func(read, total int64)
}

func (c *progressClient) OpenLTXFile(ctx context.Context, level int, minTXID, maxTXID ltx.TXID, offset, size int64) (io.ReadCloser, error) {
	rc, err := c.ReplicaClient.OpenLTXFile(ctx, level, minTXID, maxTXID, offset, size)
	if err != nil {
		return nil, err
	}
	return &countingReader{ReadCloser: rc, c: c}, nil
}

type countingReader struct {
	io.ReadCloser
	c *progressClient
}

func (r *countingReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.c.report(min(r.c.read.Add(int64(n)), r.c.total), r.c.total)
	}
	return n, err
}
