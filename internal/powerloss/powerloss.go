// Package powerloss is a FUSE filesystem for tests that simulates a power
// cut: a passthrough over a backing directory that keeps what a disk would
// lose until it is fsynced.
//
// A file's data and size live in this process's memory until the file is
// fsynced through any descriptor; a create, mkdir, rename, unlink or rmdir is
// undone at a cut unless its directory was fsynced afterwards (or, in
// Journaled mode, any file or directory was). Kernel caching is off (direct
// I/O, no writeback cache, zero entry and attribute timeouts), so every write
// and fsync reaches the model. Killing a process (kill -9) keeps the kernel's
// page cache; only this kind of filesystem can tell a commit that was fsynced
// from one that was only written, the way SQLite's crash tests and LazyFS
// (used by Jepsen and etcd) do.
//
// The backing directory holds exactly what has been made durable, plus the
// names not yet made durable (undone at a cut); unlinked and replaced entries
// wait in a sibling directory (<backing>.attic) until the cut decides.
//
// Not modelled: hard links (refused), extended attributes, and an entry whose
// ancestor was renamed durably after the entry's own change (its undo finds
// nothing and is skipped).
package powerloss

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Sync says what an fsync makes durable.
type Sync int

const (
	// Strict: a file's fsync saves its data and size; a new, renamed or
	// removed name is saved only by an fsync of its directory (POSIX's rule;
	// what a filesystem without a metadata journal may do). A rename is
	// saved, whole, by an fsync of the directory it moved into.
	Strict Sync = iota
	// Journaled: like Strict, and any fsync also saves every earlier name
	// change (ext4's data=ordered and xfs commit them with the journal).
	Journaled
	// Lying: fsync saves nothing (a disk that acknowledges a flush it did not
	// do). Only for tests that must fail.
	Lying
)

func (s Sync) String() string {
	switch s {
	case Strict:
		return "strict"
	case Journaled:
		return "journaled"
	case Lying:
		return "lying"
	}
	return "sync(" + strconv.Itoa(int(s)) + ")"
}

// Cut says what of the unsaved data reaches the disk at a power cut.
type Cut int

const (
	// DropAll: nothing that was not fsynced survives.
	DropAll Cut = iota
	// KeepSome: each unsynced 4 KiB page of a file survives or not at random
	// (a disk writes back some of its cache before the power goes); unsynced
	// name changes are undone as with DropAll.
	KeepSome
)

func (c Cut) String() string {
	if c == KeepSome {
		return "keep-some"
	}
	return "drop-all"
}

// PageSize is the unit in which unsynced data survives a KeepSome cut.
const PageSize = 4096

// FS is one mount of the power-loss filesystem. Its state lasts until Cut;
// mount again (Mount) for the next run over the same backing directory.
type FS struct {
	Backing    string
	Mountpoint string
	Sync       Sync

	attic  string
	server *fuse.Server

	mu      sync.Mutex
	files   map[uint64]*fileData // by backing inode number: survives renames and the kernel forgetting a node
	journal []nameChange         // name changes not yet durable, oldest first
	seq     int
	cut     bool
}

// nameChange is one create, mkdir, rename or removal that a cut undoes
// unless an fsync of dir (the backing inode of the directory that holds the
// new state of the name) made it durable first.
type nameChange struct {
	dir  uint64
	what string
	undo func() error
}

// Mount mounts the filesystem at mountpoint over backing (both existing
// directories). It needs /dev/fuse and root (it calls mount(2) itself, so no
// fusermount is needed).
func Mount(backing, mountpoint string, sync Sync) (*FS, error) {
	backing, err := filepath.Abs(backing)
	if err != nil {
		return nil, err
	}
	f := &FS{
		Backing:    backing,
		Mountpoint: mountpoint,
		Sync:       sync,
		attic:      backing + ".attic",
		files:      map[uint64]*fileData{},
	}
	if err := os.MkdirAll(f.attic, 0o700); err != nil {
		return nil, err
	}
	zero := time.Duration(0)
	opts := &fs.Options{
		EntryTimeout:    &zero,
		AttrTimeout:     &zero,
		NegativeTimeout: &zero,
		MountOptions: fuse.MountOptions{
			FsName:            "powerloss",
			Name:              "powerloss",
			DirectMountStrict: true,
			// A PostgreSQL server runs as its own user.
			AllowOther: true,
		},
	}
	server, err := fs.Mount(mountpoint, &node{pl: f}, opts)
	if err != nil {
		return nil, fmt.Errorf("powerloss: mount %s: %w", mountpoint, err)
	}
	f.server = server
	return f, nil
}

// errCut answers every operation after the cut.
const errCut = syscall.EIO

// Cut simulates a power cut: it unmounts (the processes using the mount must
// have exited: kill them first, as the power would), then writes to the
// backing directory what the disk keeps: fsynced data, and with KeepSome a
// random half of the unsynced pages; every name change no fsync made durable
// is undone, newest first. rng decides KeepSome's pages.
func (f *FS) Cut(kind Cut, rng *rand.Rand) error {
	f.mu.Lock()
	f.cut = true
	f.mu.Unlock()
	var err error
	for try := 0; try < 50; try++ {
		if err = f.server.Unmount(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		// A lazy detach as the last resort: the kernel drops the mount
		// when its last user goes; the model below no longer changes.
		if derr := syscall.Unmount(f.Mountpoint, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("powerloss: unmount %s: %v (detach: %v)", f.Mountpoint, err, derr)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	inos := make([]uint64, 0, len(f.files))
	for ino := range f.files {
		inos = append(inos, ino)
	}
	// Map order is random; sort so one rng seed gives one outcome.
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	for _, ino := range inos {
		d := f.files[ino]
		if kind == KeepSome {
			errs = append(errs, d.keepSome(rng))
		}
		errs = append(errs, d.f.Close())
	}
	f.files = nil
	for i := len(f.journal) - 1; i >= 0; i-- {
		if err := f.journal[i].undo(); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("undo %s: %w", f.journal[i].what, err))
		}
	}
	f.journal = nil
	errs = append(errs, os.RemoveAll(f.attic))
	return errors.Join(errs...)
}

// Pending lists the name changes a cut would undo now (for tests and
// failure messages).
func (f *FS) Pending() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.journal {
		out = append(out, c.what)
	}
	return out
}

// record adds a name change to the journal.
func (f *FS) record(dir uint64, what string, undo func() error) {
	f.journal = append(f.journal, nameChange{dir: dir, what: what, undo: undo})
}

// atticPath is a fresh name in the attic for an entry removed or replaced.
func (f *FS) atticPath() string {
	f.seq++
	return filepath.Join(f.attic, strconv.Itoa(f.seq))
}

// dirSynced makes the name changes in directory ino durable (Strict), or
// every name change (Journaled).
func (f *FS) dirSynced(ino uint64) {
	switch f.Sync {
	case Lying:
		return
	case Journaled:
		f.journal = nil
		return
	}
	kept := f.journal[:0]
	for _, c := range f.journal {
		if c.dir != ino {
			kept = append(kept, c)
		}
	}
	f.journal = kept
}

// fileSynced is what a file's fsync does to names: only Journaled saves them.
func (f *FS) fileSynced() {
	if f.Sync == Journaled {
		f.journal = nil
	}
}

func backingIno(path string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}
