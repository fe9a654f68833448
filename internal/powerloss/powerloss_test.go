package powerloss

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestModelMatchesBytes drives one file through random writes, truncations,
// fsyncs and reads, and checks every read against a byte slice (what the
// processes must see) and, after each cut, the backing file against a second
// slice (what fsync saved): exactly it after a DropAll cut; byte for byte
// either it or the unsynced state after a KeepSome cut.
func TestModelMatchesBytes(t *testing.T) {
	d := NewDisk(t, Journaled)
	rng := rand.New(rand.NewPCG(29, 1))
	name := "f"
	var seen, saved []byte
	f, err := os.Create(filepath.Join(d.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	syncFile := func() {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		saved = bytes.Clone(seen)
	}
	syncFile() // Journaled: the create is durable with it
	for round := 0; round < 20; round++ {
		for op := 0; op < 200; op++ {
			switch k := rng.IntN(10); {
			case k < 5:
				off := rng.IntN(12 * PageSize)
				buf := make([]byte, 1+rng.IntN(3*PageSize))
				for i := range buf {
					buf[i] = byte(rng.IntN(255) + 1)
				}
				if _, err := f.WriteAt(buf, int64(off)); err != nil {
					t.Fatal(err)
				}
				if end := off + len(buf); end > len(seen) {
					seen = append(seen, make([]byte, end-len(seen))...)
				}
				copy(seen[off:], buf)
			case k < 6:
				size := rng.IntN(14 * PageSize)
				if err := f.Truncate(int64(size)); err != nil {
					t.Fatal(err)
				}
				if size < len(seen) {
					seen = seen[:size]
				} else {
					seen = append(seen, make([]byte, size-len(seen))...)
				}
			case k < 7:
				syncFile()
			default:
				off := rng.IntN(14 * PageSize)
				buf := make([]byte, 1+rng.IntN(3*PageSize))
				n, _ := f.ReadAt(buf, int64(off))
				want := []byte{}
				if off < len(seen) {
					want = seen[off:min(len(seen), off+len(buf))]
				}
				if !bytes.Equal(buf[:n], want) {
					t.Fatalf("round %d op %d: read %d bytes at %d differs from the model (want %d bytes)", round, op, n, off, len(want))
				}
			}
		}
		if st, err := f.Stat(); err != nil || st.Size() != int64(len(seen)) {
			t.Fatalf("round %d: size %v (%v), want %d", round, st.Size(), err, len(seen))
		}
		f.Close()
		kind := Cut(round % 2)
		d.PowerCut(kind, rng)
		got, err := os.ReadFile(filepath.Join(d.Backing, name))
		if err != nil {
			t.Fatal(err)
		}
		switch kind {
		case DropAll:
			if !bytes.Equal(got, saved) {
				t.Fatalf("round %d: after a drop-all cut the disk holds %d bytes, not the %d fsync saved", round, len(got), len(saved))
			}
		case KeepSome:
			for i, b := range got {
				if b != at(saved, i) && b != at(seen, i) {
					t.Fatalf("round %d: after a keep-some cut byte %d is %d: neither saved (%d) nor written (%d)", round, i, b, at(saved, i), at(seen, i))
				}
			}
		}
		seen = bytes.Clone(got)
		saved = bytes.Clone(got)
		if f, err = os.OpenFile(filepath.Join(d.Dir, name), os.O_RDWR, 0); err != nil {
			t.Fatal(err)
		}
		if mounted, err := os.ReadFile(filepath.Join(d.Dir, name)); err != nil || !bytes.Equal(mounted, got) {
			t.Fatalf("round %d: the mount reads %d bytes (%v), the disk holds %d", round, len(mounted), err, len(got))
		}
	}
	f.Close()
}

func at(b []byte, i int) byte {
	if i < len(b) {
		return b[i]
	}
	return 0
}

// TestNamesNeedTheirDirectorySynced: under Strict a created, renamed or
// removed name survives a cut only when its directory was fsynced after
// the change; under Journaled any fsync saves it; under Lying nothing does.
func TestNamesNeedTheirDirectorySynced(t *testing.T) {
	type outcome struct{ fileSynced, dirSynced bool }
	for _, tc := range []struct {
		sync Sync
		// Whether the created file exists after the cut when only the file
		// was fsynced, and when the directory was fsynced too.
		want outcome
	}{
		{Strict, outcome{false, true}},
		{Journaled, outcome{true, true}},
		{Lying, outcome{false, false}},
	} {
		t.Run(tc.sync.String(), func(t *testing.T) {
			d := NewDisk(t, tc.sync)
			for _, syncDir := range []bool{false, true} {
				sub := filepath.Join(d.Dir, "sub")
				if err := os.Mkdir(sub, 0o700); err != nil && !os.IsExist(err) {
					t.Fatal(err)
				}
				syncPath(t, d.Dir) // the subdirectory's own name
				p := filepath.Join(sub, "new")
				if err := os.WriteFile(p, []byte("acked"), 0o600); err != nil {
					t.Fatal(err)
				}
				syncPath(t, p)
				if syncDir {
					syncPath(t, sub)
				}
				d.PowerCut(DropAll, nil)
				data, err := os.ReadFile(filepath.Join(d.Dir, "sub", "new"))
				want := tc.want.fileSynced
				if syncDir {
					want = tc.want.dirSynced
				}
				if got := err == nil && string(data) == "acked"; got != want {
					t.Errorf("directory fsynced %v: file present %v (%v), want %v", syncDir, got, err, want)
				}
				os.RemoveAll(sub)
				syncPath(t, d.Dir)
			}
		})
	}
}

// TestRenameAndRemoveUndone: an unsynced rename over an old file and an
// unsynced unlink are undone by a cut; the old contents come back.
func TestRenameAndRemoveUndone(t *testing.T) {
	d := NewDisk(t, Strict)
	for _, n := range []string{"a", "b", "c"} {
		p := filepath.Join(d.Dir, n)
		if err := os.WriteFile(p, []byte(n), 0o600); err != nil {
			t.Fatal(err)
		}
		syncPath(t, p)
	}
	syncPath(t, d.Dir)
	if err := os.Rename(filepath.Join(d.Dir, "a"), filepath.Join(d.Dir, "b")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(d.Dir, "c")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, d.Dir); got != "b=a" {
		t.Fatalf("before the cut: %s", got)
	}
	d.PowerCut(DropAll, nil)
	if got := readAll(t, d.Dir); got != "a=a b=b c=c" {
		t.Fatalf("after the cut: %s, want a=a b=b c=c", got)
	}
	if err := os.Rename(filepath.Join(d.Dir, "a"), filepath.Join(d.Dir, "b")); err != nil {
		t.Fatal(err)
	}
	syncPath(t, d.Dir)
	d.PowerCut(DropAll, nil)
	if got := readAll(t, d.Dir); got != "b=a c=c" {
		t.Fatalf("after a synced rename and the cut: %s, want b=a c=c", got)
	}
}

func readAll(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) > 0 {
			out = append(out, ' ')
		}
		out = append(out, e.Name()+"="+string(data)...)
	}
	return string(out)
}

func syncPath(t *testing.T, p string) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", p, err)
	}
}
