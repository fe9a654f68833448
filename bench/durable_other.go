//go:build !linux

package bench

import "os"

// allocate extends the file by n bytes at off (no fallocate here).
func allocate(f *os.File, off, n int64) error {
	return f.Truncate(off + n)
}

// datasync flushes the file (fsync: no fdatasync here).
func datasync(f *os.File) error {
	return f.Sync()
}
