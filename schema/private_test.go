//go:build unix

package schema

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// The database and its -wal/-shm are 0600 even under a permissive umask, and
// files an older version left world-readable are tightened on open.
func TestOpenKeepsDatabaseFilesPrivate(t *testing.T) {
	old := syscall.Umask(0) // not parallel: the umask is process-wide
	defer syscall.Umask(old)

	check := func(path string) {
		t.Helper()
		db, err := Open(context.Background(), path, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// A write makes SQLite create -wal and -shm.
		if _, err := db.Write.Exec(`CREATE TABLE IF NOT EXISTS t (x)`); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{path, path + "-wal", path + "-shm"} {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != 0o600 {
				t.Errorf("%s: mode %v, want 0600", filepath.Base(p), got)
			}
		}
		db.Close()
	}

	fresh := filepath.Join(t.TempDir(), "new", "hookledger.db")
	check(fresh)
	if fi, _ := os.Stat(filepath.Dir(fresh)); fi.Mode().Perm() != 0o700 {
		t.Errorf("data directory mode %v, want 0700", fi.Mode().Perm())
	}

	// An older version's files, world-readable, with a WAL left behind.
	legacy := filepath.Join(t.TempDir(), "hookledger.db")
	check(legacy)
	for _, p := range []string{legacy, legacy + "-wal", legacy + "-shm"} {
		if err := os.Chmod(p, 0o644); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	check(legacy)
}
