package powerloss

import (
	"io"
	"math/rand/v2"
	"os"
	"slices"
)

// fileData is one file's unsaved state: the backing file holds what was
// fsynced, pages holds every 4 KiB page written since, size the size the
// processes see.
type fileData struct {
	f     *os.File // the backing file, read-write
	pages map[int64][]byte
	size  int64
	// floor: the backing file's bytes at or past floor are no longer part
	// of the file (a truncation since the last fsync); an unwritten page
	// there reads as zeros.
	floor int64
}

func openData(path string) (*fileData, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fileData{f: f, pages: map[int64][]byte{}, size: st.Size(), floor: st.Size()}, nil
}

// page returns page i as the processes see it (a copy when it is not dirty).
func (d *fileData) page(i int64) ([]byte, error) {
	if p, ok := d.pages[i]; ok {
		return p, nil
	}
	p := make([]byte, PageSize)
	off := i * PageSize
	if off < d.floor {
		n, err := d.f.ReadAt(p, off)
		if err != nil && err != io.EOF {
			return nil, err
		}
		if end := d.floor - off; int64(n) > end {
			n = int(end)
		}
		clear(p[n:])
	}
	return p, nil
}

func (d *fileData) readAt(buf []byte, off int64) (int, error) {
	if off >= d.size {
		return 0, nil
	}
	if rest := d.size - off; int64(len(buf)) > rest {
		buf = buf[:rest]
	}
	n := 0
	for n < len(buf) {
		pos := off + int64(n)
		p, err := d.page(pos / PageSize)
		if err != nil {
			return n, err
		}
		n += copy(buf[n:], p[pos%PageSize:])
	}
	return n, nil
}

func (d *fileData) writeAt(data []byte, off int64) error {
	n := 0
	for n < len(data) {
		pos := off + int64(n)
		p, err := d.page(pos / PageSize)
		if err != nil {
			return err
		}
		n += copy(p[pos%PageSize:], data[n:])
		d.pages[pos/PageSize] = p
	}
	if end := off + int64(len(data)); end > d.size {
		d.size = end
	}
	return nil
}

func (d *fileData) truncate(size int64) error {
	if size < d.size {
		// The tail of the last page stays and must read as zeros if the
		// file grows again; whole pages past it are gone.
		if size%PageSize != 0 {
			p, err := d.page(size / PageSize)
			if err != nil {
				return err
			}
			clear(p[size%PageSize:])
			d.pages[size/PageSize] = p
		}
		for i := range d.pages {
			if i*PageSize >= size {
				delete(d.pages, i)
			}
		}
		if size < d.floor {
			d.floor = size
		}
	}
	d.size = size
	return nil
}

// sync writes the file's state to the backing file: what an fsync saves.
func (d *fileData) sync() error {
	if d.floor < d.size {
		// Past floor the old bytes are gone; zeros until written.
		if err := d.f.Truncate(d.floor); err != nil {
			return err
		}
	}
	for i, p := range d.pages {
		if err := d.writePage(i, p); err != nil {
			return err
		}
	}
	if err := d.f.Truncate(d.size); err != nil {
		return err
	}
	clear(d.pages)
	d.floor = d.size
	return nil
}

// writePage writes page i to the backing file, no further than size.
func (d *fileData) writePage(i int64, p []byte) error {
	off := i * PageSize
	if off >= d.size {
		return nil
	}
	if end := d.size - off; end < PageSize {
		p = p[:end]
	}
	_, err := d.f.WriteAt(p, off)
	return err
}

// keepSome writes a random half of the unsynced pages (a cut that lets the
// disk write back part of its cache); the size follows what was written.
func (d *fileData) keepSome(rng *rand.Rand) error {
	idx := make([]int64, 0, len(d.pages))
	for i := range d.pages {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	for _, i := range idx {
		if rng.IntN(2) == 0 {
			continue
		}
		if err := d.writePage(i, d.pages[i]); err != nil {
			return err
		}
	}
	return nil
}
