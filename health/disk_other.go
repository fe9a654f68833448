//go:build !linux

package health

// StatDisk is only implemented on Linux, hookledger's deployment target.
func StatDisk(dir string) (DiskStatus, error) { return DiskStatus{}, ErrDiskUnknown }
