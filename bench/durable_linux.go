package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocate reserves n bytes of disk at off (fallocate), extending the file.
func allocate(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), 0, off, n)
}

// datasync flushes the file's data (fdatasync): the size is already on disk.
func datasync(f *os.File) error {
	return unix.Fdatasync(int(f.Fd()))
}
