package replication

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/superfly/ltx"
)

// levelFiles lists a level's files in the replica.
func levelFiles(t *testing.T, r *Replicator, level int) []*ltx.FileInfo {
	t.Helper()
	itr, err := r.db.Replica.Client.LTXFiles(context.Background(), level, 0, false)
	if err != nil {
		t.Fatal(err)
	}
	defer itr.Close()
	var infos []*ltx.FileInfo
	for itr.Next() {
		infos = append(infos, itr.Item())
	}
	if err := itr.Err(); err != nil {
		t.Fatal(err)
	}
	return infos
}

// TestPruneKeepsWhatARestoreNeeds: after pruning, level 1 holds no file
// level 2 covers but its newest, level 2 none that ends before the oldest
// snapshot, and the replica still restores the latest state and a state at
// an earlier moment (a prefix of the rows, none written after it). The
// compactions and snapshots are made here, in order; Litestream's own, hourly,
// have nothing to do after the first.
func TestPruneKeepsWhatARestoreNeeds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hookledger.db")
	cfg := writeConfig(t, dir, fmt.Sprintf(`levels:
  - interval: 1h
  - interval: 1h
snapshot:
  interval: 1h
dbs:
  - path: %s
    %s      type: file
      path: %s
`, dbPath, slow, filepath.Join(dir, "replica")))
	app := openApp(t, dbPath)
	r := start(t, cfg, dbPath)
	rows := 0
	commit := func(levels ...int) {
		insert(t, app, rows, 10)
		rows += 10
		if err := r.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		for _, l := range levels {
			if _, err := r.db.Compact(ctx, l); err != nil {
				t.Fatalf("compact level %d: %v", l, err)
			}
		}
	}
	commit(1)
	commit(1, 2) // level 2's first file: to before the snapshot
	commit(1)
	if _, err := r.db.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // LTX timestamps have millisecond precision
	at, atRows := time.Now(), rows
	time.Sleep(20 * time.Millisecond)
	commit(1, 2)
	commit(1)
	commit(1, 2)
	commit(1)
	// Litestream's retention of snapshots: only the newest is left.
	if _, err := r.db.EnforceSnapshotRetention(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	l1Before, l2Before := len(levelFiles(t, r, 1)), len(levelFiles(t, r, 2))

	if err := pruneLevels(ctx, r.db, len(cfg.Levels)); err != nil {
		t.Fatal(err)
	}
	l2 := levelFiles(t, r, 2)
	l1 := levelFiles(t, r, 1)
	for i, f := range l1 {
		if f.MaxTXID <= l2[len(l2)-1].MaxTXID && i < len(l1)-1 {
			t.Errorf("level 1 file %s–%s is covered by level 2 (to %s) and was kept", f.MinTXID, f.MaxTXID, l2[len(l2)-1].MaxTXID)
		}
	}
	snapshot := levelFiles(t, r, 9)[0]
	for _, f := range l2 {
		if f.MaxTXID < snapshot.MaxTXID {
			t.Errorf("level 2 file %s–%s ends before the oldest snapshot (%s) and was kept", f.MinTXID, f.MaxTXID, snapshot.MaxTXID)
		}
	}
	// Left: level 1's file of the last commit; level 2's two after the snapshot.
	if len(l1) != 1 || len(l2) != 2 {
		t.Errorf("after pruning: %d level 1 files (%d before), %d level 2 (%d before); want 1 and 2", len(l1), l1Before, len(l2), l2Before)
	}

	want, n := digest(t, dbPath)
	out := t.TempDir()
	latest := mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(out, "latest.db")})
	if got, m := digest(t, latest.Path); got != want {
		t.Errorf("latest restore: %d rows, wrong state; want %d", m, n)
	}
	past := mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(out, "past.db"), Timestamp: at})
	if _, m := digest(t, past.Path); m != atRows {
		t.Errorf("restore to the snapshot's moment: %d rows; want %d", m, atRows)
	}
}
