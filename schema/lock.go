package schema

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// LockFile is the lock file in the data directory. A process that writes the
// directory's files wholesale (serve, restore, migrate) holds an exclusive
// flock(2) on it for its lifetime; the file holds that process's PID.
const LockFile = "hookledger.lock"

// ErrLocked means another process holds the data directory's lock.
var ErrLocked = errors.New("the data directory is in use")

// DirLock is a held data-directory lock.
type DirLock struct {
	f *os.File
}

// LockDir takes the exclusive lock on dir, which must exist, without
// waiting. The lock is an flock(2) on dir/hookledger.lock, so the kernel
// releases it when the process exits however it exits (kill -9 included):
// a lock file left behind never blocks a restart. The file is left in place
// on Unlock; removing it would let a process that opened it just before lock
// a file that no longer has a name.
func LockDir(dir string) (*DirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if !errors.Is(err, errWouldBlock) {
			return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
		}
		holder := "another process"
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				holder = "pid " + strconv.Itoa(pid)
			}
		}
		return nil, fmt.Errorf("%w: %s holds %s (another hookledger serve, restore or migrate on the same data directory); stop it first",
			ErrLocked, holder, path)
	}
	// The PID is what a refused process names as the holder; a lock whose
	// file says nothing (or an older holder's PID) would name the wrong one.
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return &DirLock{f: f}, nil
}

// Unlock releases the lock. Safe on a nil *DirLock.
func (l *DirLock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}
