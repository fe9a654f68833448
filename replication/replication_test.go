package replication

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Verbose() {
		slog.SetDefault(slog.New(slog.DiscardHandler)) // Litestream logs a lot
	}
	os.Exit(m.Run())
}

// fast makes Litestream poll and upload every 20 ms instead of every second.
const fast = "monitor-interval: 20ms\n    replica:\n      sync-interval: 20ms\n"

// slow leaves all WAL cutting and uploading to explicit Sync calls.
const slow = "monitor-interval: 1h\n    replica:\n      sync-interval: 1h\n"

// setup writes a litestream.yml for dir/hookledger.db with a file replica in
// dir/replica; timing is fast or slow.
func setup(t testing.TB, timing string) (*Config, string) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hookledger.db")
	return writeConfig(t, dir, fmt.Sprintf("dbs:\n  - path: %s\n    %s      type: file\n      path: %s\n",
		dbPath, timing, filepath.Join(dir, "replica"))), dbPath
}

func writeConfig(t testing.TB, dir, yml string) *Config {
	t.Helper()
	p := filepath.Join(dir, "litestream.yml")
	if err := os.WriteFile(p, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(p)
	if err != nil {
		t.Fatalf("LoadConfig:\n%s\n%v", yml, err)
	}
	return cfg
}

// openApp opens the database the way hookledger does while Litestream runs.
func openApp(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(wal)&_pragma=synchronous(full)"+
		"&_pragma=busy_timeout(5000)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// insert commits rows [from, from+n) one transaction per row.
func insert(t testing.TB, db *sql.DB, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		if _, err := db.Exec(`INSERT INTO t (id, v) VALUES (?, ?)`, i, fmt.Sprintf("row %d %x", i, sha256.Sum256([]byte{byte(i)}))); err != nil {
			t.Fatal(err)
		}
	}
}

// digest hashes every row of t, and counts them.
func digest(t testing.TB, path string) (string, int) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT id, v FROM t ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	h, n := sha256.New(), 0
	for rows.Next() {
		var id int
		var v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(h, "%d|%s\n", id, v)
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), n
}

func start(t testing.TB, cfg *Config, dbPath string) *Replicator {
	t.Helper()
	r, err := NewReplicator(cfg, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	r.Logger = slog.Default()
	if err := r.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

func removeDB(t testing.TB, dbPath string) {
	for _, p := range []string{dbPath, dbPath + "-wal", dbPath + "-shm", MetaPath(dbPath)} {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
}

func mustRestore(t testing.TB, cfg *Config, opts RestoreOptions) RestoreResult {
	t.Helper()
	res, err := Restore(context.Background(), cfg, opts)
	if err != nil {
		t.Fatalf("Restore(%+v): %v", opts, err)
	}
	return res
}

// replicateAndLose replicates 300 rows in 30 commits, the last 10 written
// after the last Sync (so only Close's final sync carries them), then deletes
// the database and every sidecar. It returns the digest of the lost database.
func replicateAndLose(t *testing.T, cfg *Config, dbPath string) string {
	ctx := context.Background()
	app := openApp(t, dbPath)
	insert(t, app, 0, 100)
	r := start(t, cfg, dbPath)
	insert(t, app, 100, 190)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, app, 290, 10)
	want, _ := digest(t, dbPath)
	if err := app.Close(); err != nil { // the app's database closes first
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	removeDB(t, dbPath)
	return want
}

func TestReplicateDeleteRestore(t *testing.T) {
	cfg, dbPath := setup(t, fast)
	want := replicateAndLose(t, cfg, dbPath)

	res := mustRestore(t, cfg, RestoreOptions{})
	if got, n := digest(t, dbPath); got != want || n != 300 {
		t.Fatalf("restored %d rows, digest %s; want 300 rows, %s", n, got, want)
	}
	if res.Path != dbPath || res.TXID == 0 || res.Timestamp.IsZero() || res.Files == 0 {
		t.Fatalf("result %+v", res)
	}
	// The restored database replicates again, continuing the same replica.
	app := openApp(t, dbPath)
	r := start(t, cfg, dbPath)
	insert(t, app, 300, 5)
	if err := r.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	st, err := r.Status(context.Background())
	if err != nil || !st.InSync || st.ReplicaTXID <= res.TXID || !st.Healthy() {
		t.Fatalf("status after restart %+v, %v", st, err)
	}
}

// Sync must not return before the replica holds every earlier commit. With
// hour-long intervals nothing but Sync moves data to the replica, so a
// restore taken right after it, while the replicator runs, shows its effect.
func TestSyncWaitsForReplica(t *testing.T) {
	ctx := context.Background()
	cfg, dbPath := setup(t, slow)
	app := openApp(t, dbPath)
	r := start(t, cfg, dbPath)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	insert(t, app, 0, 20)
	before := filepath.Join(t.TempDir(), "before.db")
	mustRestore(t, cfg, RestoreOptions{OutputPath: before})
	if _, n := digest(t, before); n != 0 {
		t.Fatalf("replica had %d rows before Sync; the control is broken", n)
	}

	begin := time.Now()
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	after := filepath.Join(t.TempDir(), "after.db")
	mustRestore(t, cfg, RestoreOptions{OutputPath: after})
	want, _ := digest(t, dbPath)
	if got, n := digest(t, after); got != want || n != 20 {
		t.Fatalf("replica right after Sync has %d rows; want all 20", n)
	}
	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.InSync || st.LocalTXID == 0 || st.LagBytes != 0 || st.LastSyncAt.Before(begin) || !st.Healthy() {
		t.Fatalf("status %+v", st)
	}
}

func TestPointInTimeRestore(t *testing.T) {
	ctx := context.Background()
	cfg, dbPath := setup(t, fast)
	app := openApp(t, dbPath)
	r := start(t, cfg, dbPath)
	insert(t, app, 0, 10)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantA, _ := digest(t, dbPath)
	time.Sleep(20 * time.Millisecond) // LTX timestamps have millisecond precision
	at := time.Now()
	time.Sleep(20 * time.Millisecond)
	insert(t, app, 10, 10)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	wantB, _ := digest(t, dbPath)

	dir := t.TempDir()
	byTXID := mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(dir, "txid.db"), TXID: st.ReplicaTXID})
	byTime := mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(dir, "time.db"), Timestamp: at})
	latest := mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(dir, "latest.db")})
	for _, c := range []struct {
		res  RestoreResult
		want string
	}{{byTXID, wantA}, {byTime, wantA}, {latest, wantB}} {
		if got, n := digest(t, c.res.Path); got != c.want {
			t.Errorf("%s: %d rows, wrong state (txid %s)", filepath.Base(c.res.Path), n, c.res.TXID)
		}
	}
	if byTXID.TXID != st.ReplicaTXID || byTime.TXID < st.ReplicaTXID || !byTime.Timestamp.Before(at) || latest.TXID <= byTime.TXID {
		t.Errorf("txids: by txid %s, by time %s at %s, latest %s; want %s", byTXID.TXID, byTime.TXID, byTime.Timestamp, latest.TXID, st.ReplicaTXID)
	}

	_, err = Restore(ctx, cfg, RestoreOptions{OutputPath: filepath.Join(dir, "future.db"), TXID: latest.TXID + 1000})
	if !errors.Is(err, ErrNotAvailable) {
		t.Errorf("restore of a future txid: %v; want ErrNotAvailable", err)
	}
}

func TestRestoreRefusesToOverwrite(t *testing.T) {
	cfg, dbPath := setup(t, fast)
	want := replicateAndLose(t, cfg, dbPath)
	mustRestore(t, cfg, RestoreOptions{})
	app := openApp(t, dbPath) // local changes the replica never saw
	insert(t, app, 1000, 3)
	app.Close()
	local, _ := digest(t, dbPath)

	if _, err := Restore(context.Background(), cfg, RestoreOptions{}); !errors.Is(err, ErrDBExists) {
		t.Fatalf("restore over an existing database: %v; want ErrDBExists", err)
	}
	if res := mustRestore(t, cfg, RestoreOptions{IfDBNotExists: true}); !res.Skipped {
		t.Fatalf("IfDBNotExists did not skip: %+v", res)
	}
	if got, _ := digest(t, dbPath); got != local {
		t.Fatal("a refused restore changed the database")
	}

	// Stale WAL, shm and sidecar of the old database must not survive --force.
	for _, p := range []string{dbPath + "-wal", dbPath + "-shm", filepath.Join(MetaPath(dbPath), "junk")} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte("stale"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	res := mustRestore(t, cfg, RestoreOptions{Force: true})
	for _, p := range []string{dbPath + "-wal", dbPath + "-shm", filepath.Join(MetaPath(dbPath), "junk")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived a forced restore", p)
		}
	}
	// The new sidecar holds only the position the restore left.
	if ents, _ := os.ReadDir(MetaPath(dbPath)); len(ents) != 1 || ents[0].Name() != restoredFile {
		t.Errorf("sidecar after a forced restore: %v; want only %s", ents, restoredFile)
	}
	if txid, restored, err := LocalTXID(dbPath); err != nil || !restored || txid != res.TXID {
		t.Errorf("LocalTXID after restore: %s %v %v; want %s from the restore marker", txid, restored, err, res.TXID)
	}
	if got, _ := digest(t, dbPath); got != want {
		t.Fatal("forced restore did not bring back the replica's state")
	}

	// A WAL without its database may hold the only copy of commits.
	removeDB(t, dbPath)
	os.WriteFile(dbPath+"-wal", []byte("stale"), 0o600)
	if _, err := Restore(context.Background(), cfg, RestoreOptions{}); !errors.Is(err, ErrDBExists) {
		t.Fatalf("restore next to an orphan WAL: %v; want ErrDBExists", err)
	}
}

func TestRestoreNoReplica(t *testing.T) {
	cfg, dbPath := setup(t, fast)
	_, err := Restore(context.Background(), cfg, RestoreOptions{})
	if !errors.Is(err, ErrNoReplica) {
		t.Fatalf("Restore from an empty replica: %v; want ErrNoReplica", err)
	}
	ents, _ := os.ReadDir(filepath.Dir(dbPath))
	for _, e := range ents {
		if e.Name() != "litestream.yml" {
			t.Errorf("failed restore left %s behind", e.Name())
		}
	}
}

// BenchmarkSync measures one commit (synchronous=FULL) plus a Sync that waits
// for a file replica on local disk; the p50/p99 metrics split the two.
func BenchmarkSync(b *testing.B) {
	ctx := context.Background()
	cfg, dbPath := setup(b, slow)
	app := openApp(b, dbPath)
	r := start(b, cfg, dbPath)
	var commits, syncs []time.Duration
	for i := 0; b.Loop(); i++ {
		begin := time.Now()
		insert(b, app, i, 1)
		commits = append(commits, time.Since(begin))
		begin = time.Now()
		if err := r.Sync(ctx); err != nil {
			b.Fatal(err)
		}
		syncs = append(syncs, time.Since(begin))
	}
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"commit", commits}, {"sync", syncs}} {
		slices.Sort(m.d)
		b.ReportMetric(float64(m.d[len(m.d)/2].Microseconds()), "p50-"+m.name+"-µs")
		b.ReportMetric(float64(m.d[len(m.d)*99/100].Microseconds()), "p99-"+m.name+"-µs")
	}
}
