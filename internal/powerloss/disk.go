package powerloss

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// Disk is a test's power-loss filesystem: a backing directory and a
// mountpoint in t.TempDir(), mounted until the test ends. Where FUSE cannot
// be mounted the test is skipped, and fails in CI (testenv.NeedService).
type Disk struct {
	t       testing.TB
	Backing string
	Dir     string // the mountpoint: put the files under test here
	Sync    Sync
	fs      *FS
}

// NewDisk mounts a power-loss filesystem with the given fsync semantics.
func NewDisk(t testing.TB, sync Sync) *Disk {
	t.Helper()
	base := t.TempDir()
	d := &Disk{t: t, Backing: filepath.Join(base, "backing"), Dir: filepath.Join(base, "mnt"), Sync: sync}
	for _, dir := range []string{d.Backing, d.Dir} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	fs, err := Mount(d.Backing, d.Dir, sync)
	if err != nil {
		testenv.NeedService(t, "FUSE (/dev/fuse, root)", err)
	}
	d.fs = fs
	t.Cleanup(func() {
		if d.fs != nil {
			if err := d.fs.Cut(DropAll, nil); err != nil {
				t.Errorf("powerloss: unmount at the end: %v", err)
			}
		}
	})
	return d
}

// PowerCut cuts the power (every process using the mount must have exited:
// kill them first) and mounts again over what the disk kept.
func (d *Disk) PowerCut(kind Cut, rng *rand.Rand) {
	d.t.Helper()
	fs := d.fs
	d.fs = nil
	if err := fs.Cut(kind, rng); err != nil {
		d.t.Fatalf("power cut: %v", err)
	}
	fs, err := Mount(d.Backing, d.Dir, d.Sync)
	if err != nil {
		d.t.Fatalf("mount again after the cut: %v", err)
	}
	d.fs = fs
}

// Pending lists the name changes a cut would undo now.
func (d *Disk) Pending() []string { return d.fs.Pending() }
