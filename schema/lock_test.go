package schema

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A second lock on the same directory is refused with the holder's PID; once
// released, the directory can be locked again. (A kill -9'd holder is covered
// end to end: TestLifecycle in e2e/replication.)
func TestLockDir(t *testing.T) {
	dir := t.TempDir()
	l, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, LockFile))
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q; want this process's pid", b)
	}
	_, err = LockDir(dir)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second lock: %v; want ErrLocked naming the holder", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := LockDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock()
	if _, err := LockDir(filepath.Join(dir, "missing")); err == nil {
		t.Error("locked a directory that does not exist")
	}
}

// A lock whose PID cannot be written is refused rather than held with a
// lock file that names no holder (or an older one). The lock file is a
// symlink to /dev/full, which can be opened and flocked but not truncated
// or written: no seam in the code.
func TestLockDirPIDWriteFailureIsReturned(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	dir := t.TempDir()
	if err := os.Symlink("/dev/full", filepath.Join(dir, LockFile)); err != nil {
		t.Fatal(err)
	}
	l, err := LockDir(dir)
	if err == nil {
		l.Unlock()
		t.Fatal("LockDir returned a lock whose PID was never written")
	}
	if !strings.Contains(err.Error(), "lock data directory") {
		t.Errorf("error %q does not say what failed", err)
	}
}
