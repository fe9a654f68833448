package replication

import (
	"context"
	"database/sql"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/litestream"
)

// walSalt1 is the -wal file's header salt-1 (SQLite adds 1 at each restart).
func walSalt1(t *testing.T, dbPath string) uint32 {
	t.Helper()
	buf, err := os.ReadFile(dbPath + "-wal")
	if err != nil || len(buf) < litestream.WALHeaderSize {
		t.Fatalf("read WAL header: %d bytes, %v", len(buf), err)
	}
	return binary.BigEndian.Uint32(buf[16:])
}

// wantStatus checks ReadStatus (another process's view) and, when r is
// running, Replicator.Status.
func wantStatus(t *testing.T, what string, cfg *Config, r *Replicator, inSync bool, wal WALState) Status {
	t.Helper()
	ctx := context.Background()
	st, err := ReadStatus(ctx, cfg)
	if err != nil {
		t.Fatalf("%s: ReadStatus: %v", what, err)
	}
	check := func(who string, st Status) {
		t.Helper()
		if st.InSync != inSync || st.WAL != wal {
			t.Errorf("%s: %s says in sync %v, WAL %q (%s), pending %d bytes, lag %d bytes; want in sync %v, WAL %q",
				what, who, st.InSync, st.WAL, st.WALReason, st.WALPendingBytes, st.LagBytes, inSync, wal)
		}
		switch {
		case wal == WALPending && (st.WALPendingBytes <= 0 || st.LagBytes < st.WALPendingBytes || st.LagTime <= 0):
			t.Errorf("%s: %s: pending %d bytes, lag %d bytes, %s; want pending bytes in the lag", what, who, st.WALPendingBytes, st.LagBytes, st.LagTime)
		case wal != WALPending && st.WALPendingBytes != 0:
			t.Errorf("%s: %s: pending %d bytes with WAL %q", what, who, st.WALPendingBytes, st.WAL)
		case wal == WALUnknown && st.WALReason == "":
			t.Errorf("%s: %s: WAL unknown without a reason", what, who)
		}
	}
	check("ReadStatus", st)
	if r != nil {
		rst, err := r.Status(ctx)
		if err != nil {
			t.Fatalf("%s: Replicator.Status: %v", what, err)
		}
		check("Replicator.Status", rst)
	}
	return st
}

// Commits still in the WAL, which Litestream has not cut into an LTX file
// yet, exist only on the local disk: the status must not say "in sync"
// (as it did when it compared only TXIDs), before or after replication
// stops, and must again once they are replicated, also across checkpoints
// that restart the WAL.
func TestStatusCountsCommitsInTheWAL(t *testing.T) {
	ctx := context.Background()
	cfg, dbPath := setup(t, slow) // nothing cuts the WAL but Sync
	app := openApp(t, dbPath)
	r := start(t, cfg, dbPath)
	insert(t, app, 0, 3)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "after a sync", cfg, r, true, WALCaptured)

	// The incident: three commits, not cut yet. A restore now lacks them.
	insert(t, app, 3, 3)
	st := wantStatus(t, "three commits in the WAL", cfg, r, false, WALPending)
	if st.LocalTXID != st.ReplicaTXID {
		t.Fatalf("control: local %s, replica %s; the TXIDs alone should look in sync", st.LocalTXID, st.ReplicaTXID)
	}
	if _, n := digest(t, mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(t.TempDir(), "now.db")}).Path); n != 3 {
		t.Fatalf("control: a restore now holds %d rows; want only the 3 synced", n)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "after the next sync", cfg, r, true, WALCaptured)

	// Litestream's own checkpoint restarts the WAL (new salt) and cuts it.
	salt := walSalt1(t, dbPath)
	if err := r.db.Checkpoint(ctx, litestream.CheckpointModeRestart); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if walSalt1(t, dbPath) == salt {
		t.Fatal("control: the checkpoint did not restart the WAL")
	}
	wantStatus(t, "after a checkpoint that restarted the WAL", cfg, r, true, WALCaptured)
	insert(t, app, 6, 2)
	wantStatus(t, "commits in the restarted WAL", cfg, r, false, WALPending)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "restarted WAL synced", cfg, r, true, WALCaptured)

	// Replication stopped cleanly: everything is in the replica.
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replication stopped", cfg, nil, true, WALCaptured)

	// A plain connection commits while nothing replicates.
	plain, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)&_pragma=wal_autocheckpoint(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.SetMaxOpenConns(1)
	insert(t, plain, 8, 2)
	wantStatus(t, "commits while replication is stopped", cfg, nil, false, WALPending)

	// A checkpoint that copies them into the database file and restarts
	// the WAL does not make them replicated.
	if _, err := plain.Exec(`PRAGMA wal_checkpoint(RESTART)`); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "checkpointed, not replicated", cfg, nil, false, WALPending)
	salt = walSalt1(t, dbPath)
	insert(t, plain, 10, 1)
	if walSalt1(t, dbPath) != salt+1 {
		t.Fatal("control: the write after the checkpoint did not restart the WAL")
	}
	wantStatus(t, "commits on both sides of a WAL restart", cfg, nil, false, WALPending)

	// The last connection to close checkpoints and deletes the WAL: the
	// commits are in the database file only, and nothing says which.
	if err := plain.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dbPath + "-wal"); !os.IsNotExist(err) {
		t.Fatalf("control: the WAL survived the last connection: %v", err)
	}
	wantStatus(t, "WAL checkpointed away", cfg, nil, false, WALUnknown)

	// Replication again: Litestream snapshots, and all is replicated.
	openApp(t, dbPath) // WAL mode again; closed at cleanup
	r = start(t, cfg, dbPath)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, "replicating again", cfg, r, true, WALCaptured)
	want, _ := digest(t, dbPath)
	if got, n := digest(t, mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(t.TempDir(), "end.db")}).Path); got != want || n != 11 {
		t.Fatalf("the replica holds %d rows, digest match %v; want all 11", n, got == want)
	}
}

// With a running serve, a commit is cut within the monitor interval: a
// status taken right after it looks again once the monitor has polled,
// rather than report the time since the previous cut (which may be long
// ago on a quiet database) as its lag.
func TestStatusSettlesAfterACommit(t *testing.T) {
	ctx := context.Background()
	cfg, dbPath := setup(t, fast)
	app := openApp(t, dbPath)
	r := start(t, cfg, dbPath)
	insert(t, app, 0, 3)
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // a quiet database: the last cut is a second old
	for i, read := range []func() (Status, error){
		func() (Status, error) { return ReadStatus(ctx, cfg) },
		func() (Status, error) { return r.Status(ctx) },
	} {
		insert(t, app, 3+i, 1)
		st, err := read()
		if err != nil || st.WAL != WALCaptured || st.LagTime >= time.Second {
			t.Errorf("status right after a commit, Litestream polling every 20ms: WAL %q, lag %s, %v; "+
				"want the commit cut, after a second look, and less than the second since the previous cut", st.WAL, st.LagTime, err)
		}
	}
}
