// Package durable creates directories and files so that their names
// survive a power cut.
//
// A new name becomes durable when the directory holding it is fsynced
// (POSIX's rule); an fsync of the file saves its contents only. ext4 and xfs
// also save names with the next journal commit, but other filesystems need
// not, and a data directory created without it can vanish at a power cut
// with every acknowledged event in it (internal/powerloss's strict mode
// shows this).
package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// MkdirAll is os.MkdirAll that fsyncs the parent of every directory it
// creates, so the whole path is durable when it returns.
func MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	// Made by another process meanwhile (ErrExist): sync it all the same,
	// as that process may not have yet.
	if err := os.Mkdir(dir, perm); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return SyncDir(filepath.Dir(dir))
}

// SyncDir fsyncs a directory: the names created, renamed or removed in it
// are durable when it returns.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteFile replaces the file at path with data, atomically: data goes to a
// temporary file beside it (mode perm), which is fsynced and renamed over
// path, then the directory is fsynced. A crash leaves the old file or the
// new one, never a part of either.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing to remove
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return SyncDir(dir)
}
