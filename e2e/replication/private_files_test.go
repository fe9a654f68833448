//go:build unix

package replication_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
)

// Every file serve, restore and `dispute export` create holds raw webhook
// bodies or is derived from them: under the most permissive umask (0000) each
// file is still 0600 and each directory 0700. Run against the built binary,
// so the files SQLite and Litestream create themselves are covered too.
func TestFilesArePrivateUnderAnyUmask(t *testing.T) {
	bin := testenv.Binary(t)
	// The child starts with umask 0, as under a careless service manager.
	wrapper := filepath.Join(t.TempDir(), "hookledger-umask0")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\numask 0\nexec "+bin+" \"$@\"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	e := newReplEnv(t, wrapper, 100*time.Millisecond, 100*time.Millisecond)

	cmd, stderr, url := e.serve()
	for _, id := range []string{"evt_private_1", "evt_private_2"} {
		if code, body := e2e.Post(t, url, id); code != 200 {
			t.Fatalf("delivery %s: %d %s", id, code, body)
		}
	}
	// -wal and -shm exist while serve runs; look before it closes them.
	live := walkModes(t, e.path("data"))
	if !slicesContainSuffix(live, "hookledger.db-wal") || !slicesContainSuffix(live, "hookledger.db-shm") {
		t.Fatalf("no -wal/-shm seen while serving: %v", live)
	}
	waitReplica(t, e.path("replica"))
	e.stop(cmd, stderr)

	out := e.path("restored", "nested", "hookledger.db") // restore creates both directories
	e.mustRun("restore", "-o", out)
	bundle := e.path("bundle.zip")
	e.mustRun("dispute", "export", "default:evt_private_1", "--out", bundle)

	walkModes(t, e.path("data"))
	walkModes(t, e.path("replica"))
	walkModes(t, e.path("restored"))
	if fi, err := os.Stat(bundle); err != nil {
		t.Fatal(err)
	} else if fi.Mode().Perm() != 0o600 {
		t.Errorf("dispute bundle: mode %v, want 0600", fi.Mode().Perm())
	}
}

// walkModes checks every file under root is 0600 and every directory
// (root included) 0700, and returns the paths it saw.
func walkModes(t *testing.T, root string) []string {
	t.Helper()
	var seen []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		seen = append(seen, p)
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 {
		t.Fatalf("%s holds nothing: %v", root, seen)
	}
	return seen
}

func slicesContainSuffix(paths []string, suffix string) bool {
	for _, p := range paths {
		if strings.HasSuffix(p, suffix) {
			return true
		}
	}
	return false
}

// waitReplica waits until the file replica holds at least one LTX file.
func waitReplica(t *testing.T, dir string) {
	t.Helper()
	await.Eventually(t, 20*time.Second, "an LTX file in "+dir, func() bool {
		found := false
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.HasSuffix(p, ".ltx") {
				found = true
			}
			return nil
		})
		return found
	})
}
