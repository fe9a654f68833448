package health

import "golang.org/x/sys/unix"

// StatDisk reports the filesystem holding dir.
func StatDisk(dir string) (DiskStatus, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return DiskStatus{}, err
	}
	return DiskStatus{
		FreeBytes:  st.Bavail * uint64(st.Bsize),
		TotalBytes: st.Blocks * uint64(st.Bsize),
		ReadOnly:   st.Flags&unix.ST_RDONLY != 0,
	}, nil
}
