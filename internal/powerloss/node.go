package powerloss

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// node is a file or directory of the mount; its backing path follows the
// kernel's view of the tree (go-fuse keeps it across renames).
type node struct {
	fs.Inode
	pl *FS
}

var (
	_ fs.NodeLookuper   = (*node)(nil)
	_ fs.NodeGetattrer  = (*node)(nil)
	_ fs.NodeSetattrer  = (*node)(nil)
	_ fs.NodeOpener     = (*node)(nil)
	_ fs.NodeCreater    = (*node)(nil)
	_ fs.NodeMkdirer    = (*node)(nil)
	_ fs.NodeSymlinker  = (*node)(nil)
	_ fs.NodeReadlinker = (*node)(nil)
	_ fs.NodeUnlinker   = (*node)(nil)
	_ fs.NodeRmdirer    = (*node)(nil)
	_ fs.NodeRenamer    = (*node)(nil)
	_ fs.NodeReaddirer  = (*node)(nil)
	_ fs.NodeFsyncer    = (*node)(nil)
	_ fs.NodeStatfser   = (*node)(nil)
)

func (n *node) path() string { return filepath.Join(n.pl.Backing, n.Path(nil)) }

func (n *node) child(ctx context.Context, st *syscall.Stat_t) *fs.Inode {
	return n.NewInode(ctx, &node{pl: n.pl}, fs.StableAttr{Mode: st.Mode, Ino: st.Ino})
}

// lock takes the model's lock; every operation after the cut fails.
func (n *node) lock() syscall.Errno {
	n.pl.mu.Lock()
	if n.pl.cut {
		n.pl.mu.Unlock()
		return errCut
	}
	return 0
}

func (n *node) unlock() { n.pl.mu.Unlock() }

// stat is lstat with the size the processes see (unsynced writes included).
func (n *node) stat(p string, st *syscall.Stat_t) error {
	if err := syscall.Lstat(p, st); err != nil {
		return err
	}
	if d, ok := n.pl.files[st.Ino]; ok {
		st.Size = d.size
		st.Blocks = (d.size + 511) / 512
	}
	return nil
}

// data returns the file's unsaved state, opening it on first use.
func (n *node) data(p string) (*fileData, error) {
	ino, err := backingIno(p)
	if err != nil {
		return nil, err
	}
	if d, ok := n.pl.files[ino]; ok {
		return d, nil
	}
	d, err := openData(p)
	if err != nil {
		return nil, err
	}
	n.pl.files[ino] = d
	return d, nil
}

func (n *node) dirIno() (uint64, error) { return backingIno(n.path()) }

// own gives a new entry to the process that made it (the mount serves
// every user as root; PostgreSQL insists its files are its own).
func own(ctx context.Context, p string) error {
	caller, ok := fuse.FromContext(ctx)
	if !ok || os.Getuid() != 0 {
		return nil
	}
	return os.Lchown(p, int(caller.Uid), int(caller.Gid))
}

func (n *node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	var st syscall.Stat_t
	if err := n.stat(filepath.Join(n.path(), name), &st); err != nil {
		return nil, fs.ToErrno(err)
	}
	out.Attr.FromStat(&st)
	return n.child(ctx, &st), 0
}

func (n *node) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	var st syscall.Stat_t
	if h, ok := f.(*handle); ok {
		// Still open after an unlink: the backing file is in the attic.
		if err := syscall.Fstat(int(h.d.f.Fd()), &st); err != nil {
			return fs.ToErrno(err)
		}
		st.Size = h.d.size
		st.Blocks = (h.d.size + 511) / 512
	} else if err := n.stat(n.path(), &st); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStat(&st)
	return 0
}

func (n *node) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	p := n.path()
	if m, ok := in.GetMode(); ok {
		if err := syscall.Chmod(p, m); err != nil {
			n.unlock()
			return fs.ToErrno(err)
		}
	}
	uid, uok := in.GetUID()
	gid, gok := in.GetGID()
	if uok || gok {
		u, g := -1, -1
		if uok {
			u = int(uid)
		}
		if gok {
			g = int(gid)
		}
		if err := syscall.Lchown(p, u, g); err != nil {
			n.unlock()
			return fs.ToErrno(err)
		}
	}
	if size, ok := in.GetSize(); ok {
		d, err := n.handleData(f, p)
		if err == nil {
			err = d.truncate(int64(size))
		}
		if err != nil {
			n.unlock()
			return fs.ToErrno(err)
		}
	}
	n.unlock()
	return n.Getattr(ctx, f, out)
}

func (n *node) handleData(f fs.FileHandle, p string) (*fileData, error) {
	if h, ok := f.(*handle); ok {
		return h.d, nil
	}
	return n.data(p)
}

// openFlags: no kernel caching of data, so every write and read reaches the
// model; SQLite's -shm file is the exception, as it is mapped into memory
// (MAP_SHARED needs the page cache) and is rebuilt from the WAL after a cut.
func openFlags(name string) uint32 {
	if strings.HasSuffix(name, "-shm") {
		return 0
	}
	return fuse.FOPEN_DIRECT_IO
}

func (n *node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, 0, e
	}
	defer n.unlock()
	p := n.path()
	d, err := n.data(p)
	if err != nil {
		return nil, 0, fs.ToErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		if err := d.truncate(0); err != nil {
			return nil, 0, fs.ToErrno(err)
		}
	}
	return &handle{d: d, pl: n.pl, appends: flags&syscall.O_APPEND != 0}, openFlags(p), 0
}

func (n *node) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, nil, 0, e
	}
	defer n.unlock()
	p := filepath.Join(n.path(), name)
	fd, err := syscall.Open(p, syscall.O_CREAT|syscall.O_EXCL|syscall.O_RDWR, mode)
	if err == nil {
		syscall.Close(fd)
		if err := own(ctx, p); err != nil {
			return nil, nil, 0, fs.ToErrno(err)
		}
		dir, err := n.dirIno()
		if err != nil {
			return nil, nil, 0, fs.ToErrno(err)
		}
		n.pl.record(dir, "create "+p, func() error { return os.Remove(p) })
	} else if err != syscall.EEXIST || flags&syscall.O_EXCL != 0 {
		return nil, nil, 0, fs.ToErrno(err)
	}
	d, err := n.data(p)
	if err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	if flags&syscall.O_TRUNC != 0 {
		if err := d.truncate(0); err != nil {
			return nil, nil, 0, fs.ToErrno(err)
		}
	}
	var st syscall.Stat_t
	if err := n.stat(p, &st); err != nil {
		return nil, nil, 0, fs.ToErrno(err)
	}
	out.Attr.FromStat(&st)
	return n.child(ctx, &st), &handle{d: d, pl: n.pl, appends: flags&syscall.O_APPEND != 0}, openFlags(p), 0
}

func (n *node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	p := filepath.Join(n.path(), name)
	if err := os.Mkdir(p, os.FileMode(mode&0o7777)); err != nil {
		return nil, fs.ToErrno(err)
	}
	return n.created(ctx, p, "mkdir", func() error { return os.RemoveAll(p) }, out)
}

func (n *node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	p := filepath.Join(n.path(), name)
	if err := os.Symlink(target, p); err != nil {
		return nil, fs.ToErrno(err)
	}
	return n.created(ctx, p, "symlink", func() error { return os.Remove(p) }, out)
}

// created finishes a Mkdir or Symlink of p: owned by the caller, recorded
// in its directory as undone by undo at a cut unless the directory is
// synced, and returned as a new child.
func (n *node) created(ctx context.Context, p, op string, undo func() error, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if err := own(ctx, p); err != nil {
		return nil, fs.ToErrno(err)
	}
	dir, err := n.dirIno()
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	n.pl.record(dir, op+" "+p, undo)
	var st syscall.Stat_t
	if err := n.stat(p, &st); err != nil {
		return nil, fs.ToErrno(err)
	}
	out.Attr.FromStat(&st)
	return n.child(ctx, &st), 0
}

func (n *node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	s, err := os.Readlink(n.path())
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return []byte(s), 0
}

// remove moves an entry to the attic, where it waits for the cut to decide
// whether the removal happened.
func (n *node) remove(name string, dir bool) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	p := filepath.Join(n.path(), name)
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		return fs.ToErrno(err)
	}
	isDir := st.Mode&syscall.S_IFMT == syscall.S_IFDIR
	switch {
	case dir && !isDir:
		return syscall.ENOTDIR
	case !dir && isDir:
		return syscall.EISDIR
	case dir && !emptyDir(p):
		return syscall.ENOTEMPTY
	}
	a := n.pl.atticPath()
	if err := os.Rename(p, a); err != nil {
		return fs.ToErrno(err)
	}
	ino, err := n.dirIno()
	if err != nil {
		return fs.ToErrno(err)
	}
	n.pl.record(ino, "remove "+p, func() error { return os.Rename(a, p) })
	return 0
}

func emptyDir(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == io.EOF
}

func (n *node) Unlink(ctx context.Context, name string) syscall.Errno { return n.remove(name, false) }
func (n *node) Rmdir(ctx context.Context, name string) syscall.Errno  { return n.remove(name, true) }

const renameNoReplace = 1

func (n *node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&^renameNoReplace != 0 {
		return syscall.EINVAL // RENAME_EXCHANGE and whiteouts are not modelled
	}
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	p1 := filepath.Join(n.path(), name)
	p2 := filepath.Join(np.path(), newName)
	if p1 == p2 {
		return 0
	}
	var st1, st2 syscall.Stat_t
	if err := syscall.Lstat(p1, &st1); err != nil {
		return fs.ToErrno(err)
	}
	replaced := ""
	if err := syscall.Lstat(p2, &st2); err == nil {
		if flags&renameNoReplace != 0 {
			return syscall.EEXIST
		}
		if st1.Ino == st2.Ino {
			return 0
		}
		if st2.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			if st1.Mode&syscall.S_IFMT != syscall.S_IFDIR {
				return syscall.EISDIR
			}
			if !emptyDir(p2) {
				return syscall.ENOTEMPTY
			}
		} else if st1.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			return syscall.ENOTDIR
		}
		replaced = n.pl.atticPath()
		if err := os.Rename(p2, replaced); err != nil {
			return fs.ToErrno(err)
		}
	}
	if err := os.Rename(p1, p2); err != nil {
		if replaced != "" {
			os.Rename(replaced, p2)
		}
		return fs.ToErrno(err)
	}
	dir, err := np.dirIno()
	if err != nil {
		return fs.ToErrno(err)
	}
	n.pl.record(dir, "rename "+p1+" "+p2, func() error {
		if err := os.Rename(p2, p1); err != nil {
			return err
		}
		if replaced != "" {
			return os.Rename(replaced, p2)
		}
		return nil
	})
	return 0
}

func (n *node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	if e := n.lock(); e != 0 {
		return nil, e
	}
	defer n.unlock()
	return fs.NewLoopbackDirStream(n.path())
}

// Fsync saves a file's data and size (and, Journaled, every name change), or
// a directory's name changes. Lying saves nothing.
func (n *node) Fsync(ctx context.Context, f fs.FileHandle, flags uint32) syscall.Errno {
	if e := n.lock(); e != 0 {
		return e
	}
	defer n.unlock()
	if n.pl.Sync == Lying {
		return 0
	}
	if n.IsDir() {
		ino, err := n.dirIno()
		if err != nil {
			return fs.ToErrno(err)
		}
		n.pl.dirSynced(ino)
		return 0
	}
	d, err := n.handleData(f, n.path())
	if err == nil {
		err = d.sync()
	}
	if err != nil {
		return fs.ToErrno(err)
	}
	n.pl.fileSynced()
	return 0
}

func (n *node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	var s syscall.Statfs_t
	if err := syscall.Statfs(n.pl.Backing, &s); err != nil {
		return fs.ToErrno(err)
	}
	out.FromStatfsT(&s)
	return 0
}

// handle is an open file: every descriptor of a file shares its fileData.
type handle struct {
	d       *fileData
	pl      *FS
	appends bool
}

var (
	_ fs.FileReader  = (*handle)(nil)
	_ fs.FileWriter  = (*handle)(nil)
	_ fs.FileFlusher = (*handle)(nil)
)

func (h *handle) Read(ctx context.Context, buf []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	if e := h.lock(); e != 0 {
		return nil, e
	}
	defer h.pl.mu.Unlock()
	n, err := h.d.readAt(buf, off)
	if err != nil {
		return nil, fs.ToErrno(err)
	}
	return fuse.ReadResultData(buf[:n]), 0
}

func (h *handle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	if e := h.lock(); e != 0 {
		return 0, e
	}
	defer h.pl.mu.Unlock()
	if h.appends {
		off = h.d.size
	}
	if err := h.d.writeAt(data, off); err != nil {
		return 0, fs.ToErrno(err)
	}
	return uint32(len(data)), 0
}

// Flush (close) saves nothing: only fsync does.
func (h *handle) Flush(ctx context.Context) syscall.Errno { return 0 }

func (h *handle) lock() syscall.Errno {
	h.pl.mu.Lock()
	if h.pl.cut {
		h.pl.mu.Unlock()
		return errCut
	}
	return 0
}
