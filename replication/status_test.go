package replication

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// breakFileReplica puts a plain file where the replica directory was, so
// every replica operation fails (even for root, unlike chmod); the returned
// func puts the directory back untouched.
func breakFileReplica(t *testing.T, cfg *Config) (repair func()) {
	t.Helper()
	dir := cfg.DB.Replica.Path
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Remove(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(dir+".away", dir); err != nil {
			t.Fatal(err)
		}
	}
}

// Healthy follows the replica's last outcome without listing it, and
// Publish carries that outcome to ReadStatus in another process.
func TestHealthyAndPublishedStatus(t *testing.T) {
	ctx := context.Background()
	cfg, dbPath := setup(t, slow)
	app := openApp(t, dbPath)
	r := start(t, cfg, dbPath)
	insert(t, app, 0, 3)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Healthy(); err != nil {
		t.Fatalf("Healthy after a good sync: %v", err)
	}
	if err := r.Publish(); err != nil {
		t.Fatal(err)
	}
	st, err := ReadStatus(ctx, cfg)
	if err != nil || st.ReportedAt.IsZero() || st.LastError != "" || !st.InSync || !st.Healthy() {
		t.Fatalf("ReadStatus while healthy: %+v, %v", st, err)
	}

	repair := breakFileReplica(t, cfg)
	insert(t, app, 3, 3)
	if err := r.Sync(ctx); err == nil {
		t.Fatal("Sync succeeded with the replica directory gone")
	}
	if err := r.Healthy(); err == nil || !strings.Contains(err.Error(), cfg.DB.Replica.Path) {
		t.Fatalf("Healthy after a failed sync: %v; want an error naming the replica", err)
	}
	if err := r.Publish(); err != nil {
		t.Fatal(err)
	}
	st, _ = ReadStatus(ctx, cfg) // the listing fails too; the published error is still read
	if st.LastError == "" || st.Healthy() || st.ReportedAt.IsZero() {
		t.Fatalf("ReadStatus after a failure: %+v; want the published error", st)
	}

	repair()
	if err := r.Sync(ctx); err != nil {
		t.Fatalf("Sync after repair: %v", err)
	}
	if err := r.Healthy(); err != nil {
		t.Fatalf("Healthy after recovery: %v", err)
	}
	r.Publish()
	if st, err := ReadStatus(ctx, cfg); err != nil || !st.Healthy() || !st.InSync {
		t.Fatalf("ReadStatus after recovery: %+v, %v", st, err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Healthy(); err != ErrClosed {
		t.Errorf("Healthy after Close: %v, want ErrClosed", err)
	}
}

func TestRestoreProgress(t *testing.T) {
	cfg, dbPath := setup(t, fast)
	want := replicateAndLose(t, cfg, dbPath)
	var mu sync.Mutex
	var calls int
	var last, total int64
	res := mustRestore(t, cfg, RestoreOptions{Progress: func(read, tot int64) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if read < last || read > tot {
			t.Errorf("progress went from %d to %d of %d", last, read, tot)
		}
		last, total = read, tot
	}})
	if calls == 0 || total == 0 || last != total {
		t.Errorf("progress: %d calls, ended at %d of %d; want to end at the total", calls, last, total)
	}
	if got, _ := digest(t, res.Path); got != want {
		t.Error("restore with progress restored the wrong state")
	}
}

// A forced restore over a database that a running serve replicates (it
// published its status moments ago) is refused; a stale report or an exited
// process is not in the way.
func TestForcedRestoreRefusesLiveDatabase(t *testing.T) {
	cfg, dbPath := setup(t, fast)
	replicateAndLose(t, cfg, dbPath)
	mustRestore(t, cfg, RestoreOptions{})
	writeReport := func(pid int, at time.Time) {
		if err := os.MkdirAll(MetaPath(dbPath), 0o755); err != nil {
			t.Fatal(err)
		}
		buf, _ := json.Marshal(report{PID: pid, UpdatedAt: at})
		if err := os.WriteFile(filepath.Join(MetaPath(dbPath), reportFile), buf, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeReport(os.Getppid(), time.Now()) // a process that is certainly running
	_, err := Restore(context.Background(), cfg, RestoreOptions{Force: true})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), strconv.Itoa(os.Getppid())) {
		t.Fatalf("forced restore under a live replicator: %v; want ErrInUse naming its pid", err)
	}
	writeReport(os.Getppid(), time.Now().Add(-2*ReportStale))
	mustRestore(t, cfg, RestoreOptions{Force: true})
	if _, err := os.Stat("/proc/self"); err == nil {
		writeReport(1<<30, time.Now()) // no such pid
		mustRestore(t, cfg, RestoreOptions{Force: true})
	}
}
