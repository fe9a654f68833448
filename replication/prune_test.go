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
// level 2 covers but its newest, and the replica still restores the latest
// state and a state at an earlier moment (a prefix of the rows, none written
// after it).
func TestPruneKeepsWhatARestoreNeeds(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hookledger.db")
	cfg := writeConfig(t, dir, fmt.Sprintf(`levels:
  - interval: 1s
  - interval: 3s
dbs:
  - path: %s
    %s      type: file
      path: %s
`, dbPath, fast, filepath.Join(dir, "replica")))
	app := openApp(t, dbPath)
	r := start(t, cfg, dbPath)

	var at time.Time
	var atRows int
	for i := range 40 { // 8 s of commits: several level 1 files, two of level 2
		insert(t, app, i*10, 10)
		if i == 20 {
			atRows, at = (i+1)*10, time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "compacted into level 2 twice", func() bool { return len(levelFiles(t, r, 2)) >= 2 })
	before := len(levelFiles(t, r, 1))

	if err := prune(ctx, r.db, len(cfg.Levels)); err != nil {
		t.Fatal(err)
	}
	covered := levelFiles(t, r, 2)
	l1 := levelFiles(t, r, 1)
	for i, f := range l1 {
		if i < len(l1)-1 && f.MaxTXID <= covered[len(covered)-1].MaxTXID {
			t.Errorf("level 1 file %s–%s is covered by level 2 (to %s) and was kept", f.MinTXID, f.MaxTXID, covered[len(covered)-1].MaxTXID)
		}
	}
	if len(l1) >= before {
		t.Errorf("level 1: %d files before pruning, %d after; want fewer", before, len(l1))
	}

	want, n := digest(t, dbPath)
	out := t.TempDir()
	latest := mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(out, "latest.db")})
	if got, m := digest(t, latest.Path); got != want {
		t.Errorf("latest restore: %d rows, wrong state; want %d", m, n)
	}
	past := mustRestore(t, cfg, RestoreOptions{OutputPath: filepath.Join(out, "past.db"), Timestamp: at})
	_, m := digest(t, past.Path)
	if m == 0 || m > atRows {
		t.Errorf("restore to a moment after row %d: %d rows; want some, none written after it", atRows, m)
	}
}
