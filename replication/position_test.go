package replication

import (
	"os"
	"path/filepath"
	"testing"
)

// A restore marker that cannot be written whole is an error, and nothing is
// renamed into place: a torn marker would be read as the restore position.
// The temporary file is a symlink to /dev/full, so the write fails with
// ENOSPC as on a full disk, without a seam in the code.
func TestRestoredMarkerWriteFailureIsReturned(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full on this system")
	}
	dbPath := filepath.Join(t.TempDir(), "hookledger.db")
	meta := MetaPath(dbPath)
	if err := os.MkdirAll(meta, 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(meta, restoredFile)
	if err := os.Symlink("/dev/full", marker+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := writeRestoredMarker(dbPath, 42, "file:///replica"); err == nil {
		t.Fatal("writeRestoredMarker on a full disk returned no error")
	}
	if _, err := os.Lstat(marker); !os.IsNotExist(err) {
		t.Errorf("a marker was renamed into place after a failed write (Lstat: %v)", err)
	}
	if txid, restored, err := LocalTXID(dbPath); err != nil || restored || txid != 0 {
		t.Errorf("LocalTXID after a failed marker write: %s %v %v; want 0, no restore", txid, restored, err)
	}
}

// Control: the same call on a writable directory leaves the position.
func TestRestoredMarkerWritten(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "hookledger.db")
	if err := writeRestoredMarker(dbPath, 42, "file:///replica"); err != nil {
		t.Fatal(err)
	}
	if txid, restored, err := LocalTXID(dbPath); err != nil || !restored || txid != 42 {
		t.Errorf("LocalTXID: %s %v %v; want 42 from the marker", txid, restored, err)
	}
}
