package health

import (
	"context"
	"errors"
	"fmt"
)

// ErrDiskUnknown means the platform cannot report free space; Disk then passes.
var ErrDiskUnknown = errors.New("disk space unknown on this platform")

// DiskStatus describes the filesystem holding a directory.
type DiskStatus struct {
	FreeBytes  uint64 // available to unprivileged users
	TotalBytes uint64
	ReadOnly   bool
}

// statDisk is replaced in tests.
var statDisk = StatDisk

// Disk fails when dir's filesystem is mounted read-only or has less than
// minFree bytes available: SQLite would then fail the next commit that grows
// the WAL, although the write probe (which writes no page) still passes.
func Disk(dir string, minFree uint64) CheckFunc {
	return func(ctx context.Context) error {
		st, err := statDisk(dir)
		if errors.Is(err, ErrDiskUnknown) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("stat data directory: %w", err)
		}
		if st.ReadOnly {
			return fmt.Errorf("data directory %s is on a read-only filesystem", dir)
		}
		if st.FreeBytes < minFree {
			return fmt.Errorf("data directory %s has %d bytes free, below the %d-byte minimum", dir, st.FreeBytes, minFree)
		}
		return nil
	}
}
