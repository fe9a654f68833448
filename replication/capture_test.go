package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/hookledger/hookledger/internal/await"
)

// blockCuts stops Litestream from writing its next n LTX files: where each
// would be staged (ltx/0/<txid>-<txid>.ltx.tmp) it puts a directory holding a
// file, which no open can truncate and no remove can clear, even for root.
// That is the step a full data disk fails. The returned func removes them.
func blockCuts(t *testing.T, dbPath string, n int) (unblock func()) {
	t.Helper()
	var dirs []string
	unblock = func() {
		for _, dir := range dirs {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}
		dirs = nil
	}
	// A cut may be under way (its staging file is where the first block
	// goes): then try again.
	for attempt := 0; dirs == nil; attempt++ {
		local, _, err := LocalTXID(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		for txid := local + 1; txid <= local+TXID(n); txid++ {
			dir := filepath.FromSlash(litestream.LTXFilePath(MetaPath(dbPath), 0, txid, txid)) + ".tmp"
			err := os.MkdirAll(dir, 0o700)
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, "block"), nil, 0o600)
			}
			if err != nil && attempt < 20 {
				unblock()
				time.Sleep(20 * time.Millisecond)
				break
			} else if err != nil {
				t.Fatal(err)
			}
			dirs = append(dirs, dir)
		}
	}
	return unblock
}

func startWith(t *testing.T, cfg *Config, dbPath string, set func(*Replicator)) *Replicator {
	t.Helper()
	r, err := NewReplicator(cfg, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	r.Logger = slog.Default()
	set(r)
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func walSize(t *testing.T, dbPath string) int64 {
	t.Helper()
	fi, err := os.Stat(dbPath + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// While Litestream cannot write its LTX files (a full data disk), replication
// is failing — Healthy, Status and the published report say why — and
// CheckWAL stops commits once the WAL has grown MaxWALGrowth; once the files
// can be written, the next cut captures everything, and a restore of the
// replica holds every commit, those made during the failure included.
func TestFailedCutIsReportedBoundsTheWALAndRecovers(t *testing.T) {
	ctx := context.Background()
	cfg, dbPath := setup(t, fast)
	app := openApp(t, dbPath)
	const bound = 256 << 10
	r := startWith(t, cfg, dbPath, func(r *Replicator) { r.MaxWALGrowth = bound })
	insert(t, app, 0, 10)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	unblock := blockCuts(t, dbPath, 5)
	insert(t, app, 10, 5)
	await.Eventually(t, time.Minute, "reported failing", func() bool { return r.Healthy() != nil })
	if err := r.Healthy(); !strings.Contains(err.Error(), "cannot capture the WAL") || !strings.Contains(err.Error(), ".ltx.tmp") {
		t.Fatalf("Healthy: %v; want the failed cut", err)
	}
	// The replica's own syncs go on succeeding (they have nothing new to
	// upload); that must not read as healthy.
	time.Sleep(100 * time.Millisecond)
	if err := r.Healthy(); err == nil {
		t.Fatal("Healthy after the replica's later syncs: nil; the cut still fails")
	}
	st, err := r.Status(ctx)
	if err != nil || st.Healthy() || !strings.Contains(st.LastError, "cannot capture the WAL") {
		t.Fatalf("Status while cuts fail: %+v, %v; want unhealthy with the cut's error", st, err)
	}
	if err := r.Publish(); err != nil {
		t.Fatal(err)
	}
	if st, _ := ReadStatus(ctx, cfg); st.Healthy() || !strings.Contains(st.LastError, "cannot capture the WAL") {
		t.Fatalf("ReadStatus while cuts fail: %+v; want the published error", st)
	}

	// The WAL may grow by the bound, no more: then CheckWAL refuses.
	base := walSize(t, dbPath)
	if err := r.CheckWAL(); err != nil {
		t.Fatalf("CheckWAL before the WAL grew: %v", err)
	}
	n := 15
	for ; r.CheckWAL() == nil; n++ {
		if walSize(t, dbPath) > base+bound+64<<10 {
			t.Fatalf("the WAL grew %d bytes past the bound with CheckWAL still nil", walSize(t, dbPath)-base-bound)
		}
		insert(t, app, n, 1)
	}
	if err := r.CheckWAL(); !errors.Is(err, ErrWALFull) || !strings.Contains(err.Error(), "cannot capture the WAL") {
		t.Fatalf("CheckWAL past the bound: %v; want ErrWALFull with the cut's error", err)
	}

	unblock()
	await.Eventually(t, time.Minute, "healthy after the cuts are unblocked", func() bool { return r.Healthy() == nil && r.CheckWAL() == nil })
	await.Eventually(t, time.Minute, "in sync", func() bool {
		st, err := r.Status(ctx)
		return err == nil && st.InSync
	})
	want, rows := digest(t, dbPath)
	restored := filepath.Join(t.TempDir(), "restored.db")
	mustRestore(t, cfg, RestoreOptions{OutputPath: restored})
	if got, m := digest(t, restored); got != want || m != rows || rows != n {
		t.Fatalf("restored %d rows (digest %s); want %d of %d committed, digest %s", m, got, rows, n, want)
	}
}

// On a disk nearly full, the WAL may grow by half the free space between
// Litestream's checkpoints even while cuts succeed: the rest is kept for
// the cut and the checkpoint.
func TestWALKeepsHalfTheFreeSpace(t *testing.T) {
	ctx := context.Background()
	cfg, dbPath := setup(t, slow)
	app := openApp(t, dbPath)
	const free = 200 << 10
	r := startWith(t, cfg, dbPath, func(r *Replicator) {
		r.FreeSpace = func() (uint64, error) { return free, nil }
	})
	n := 0
	for ; r.CheckWAL() == nil; n++ {
		if n > 5000 {
			t.Fatalf("the WAL grew %d bytes with %d free and CheckWAL still nil", walSize(t, dbPath), free)
		}
		insert(t, app, n, 1)
	}
	if err := r.CheckWAL(); !errors.Is(err, ErrWALFull) || !strings.Contains(err.Error(), "bytes free") {
		t.Fatalf("CheckWAL: %v; want ErrWALFull naming the free space", err)
	}
	if err := r.Healthy(); err != nil {
		t.Fatalf("Healthy: %v; cuts do not fail, only the disk is low", err)
	}
	// Cuts alone do not restart the WAL: still full.
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckWAL(); !errors.Is(err, ErrWALFull) {
		t.Fatalf("CheckWAL after a cut that did not restart the WAL: %v; want ErrWALFull", err)
	}
}

// A replica that failed an upload is retried on the replicator's schedule:
// Litestream's own monitor would wait a whole sync interval (here an hour)
// or, after more failures, up to 5 minutes.
func TestFailedUploadIsRetried(t *testing.T) {
	ctx := context.Background()
	cfg, dbPath := setup(t, slow)
	app := openApp(t, dbPath)
	r := startWith(t, cfg, dbPath, func(r *Replicator) {
		r.RetryInterval, r.MaxRetryInterval = 10*time.Millisecond, 50*time.Millisecond
	})
	insert(t, app, 0, 10)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	repair := breakFileReplica(t, cfg)
	insert(t, app, 10, 10)
	if err := r.Sync(ctx); err == nil {
		t.Fatal("Sync succeeded with the replica directory gone")
	}
	time.Sleep(100 * time.Millisecond) // a few retries fail too
	if err := r.Healthy(); err == nil {
		t.Fatal("Healthy with the replica directory gone: nil")
	}
	repair()
	await.Eventually(t, time.Minute, "caught up without a Sync", func() bool {
		st, err := readStatus(ctx, dbPath, &cfg.DB.Replica, r.client)
		return err == nil && st.LocalTXID > 0 && st.ReplicaTXID == st.LocalTXID
	})
	await.Eventually(t, time.Minute, "healthy after catching up", func() bool { return r.Healthy() == nil })
	want, _ := digest(t, dbPath)
	restored := filepath.Join(t.TempDir(), "restored.db")
	mustRestore(t, cfg, RestoreOptions{OutputPath: restored})
	if got, n := digest(t, restored); got != want || n != 20 {
		t.Fatalf("restored %d rows; want 20, digest %s", n, fmt.Sprint(want))
	}
}
