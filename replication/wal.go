package replication

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/superfly/ltx"
)

// WALState says whether the database's -wal file holds commits that
// Litestream has not cut into an LTX file yet: such commits exist only on
// the local disk, whatever the TXIDs say.
type WALState string

const (
	// WALCaptured: every committed WAL frame is in a local LTX file.
	WALCaptured WALState = "captured"
	// WALPending: the WAL holds committed frames beyond Litestream's last
	// cut (WALPendingBytes of them).
	WALPending WALState = "pending"
	// WALUnknown: the WAL cannot be compared with Litestream's last cut
	// (WALReason says why), so commits may be missing from the replica.
	WALUnknown WALState = "unknown"
	// WALNoHistory: Litestream has cut nothing here yet and the WAL holds
	// no committed frames; only the TXIDs compare.
	WALNoHistory WALState = "no history"
)

// walStatus is what readWAL found.
type walStatus struct {
	State        WALState
	Reason       string    // why, when State is WALUnknown (or a caveat for WALPending)
	PendingBytes int64     // committed WAL bytes beyond the last cut
	ModTime      time.Time // the -wal file's modification time; zero without one
	CapturedAt   time.Time // timestamp of the newest local L0 file; zero without one
}

// readWAL compares the database's -wal file with the WAL range the newest
// local L0 file records (ltx.Header WALOffset, WALSize, WALSalt1/2: Litestream
// continues each cut from WALOffset+WALSize with that salt). It only reads
// files: no SQLite connection, no lock, nothing written, so a running serve
// is not disturbed. A cut or checkpoint racing with the read is retried.
func readWAL(dbPath string) walStatus {
	var ws walStatus
	for range 3 {
		var before, after walMark
		before = markWAL(dbPath)
		ws = readWALOnce(dbPath)
		after = markWAL(dbPath)
		if before == after {
			break
		}
	}
	return ws
}

// walMark identifies the state readWALOnce looked at, to notice a race.
type walMark struct {
	maxTXID TXID
	header  [litestream.WALHeaderSize]byte
}

func markWAL(dbPath string) walMark {
	var m walMark
	m.maxTXID, _ = newestL0(dbPath)
	if f, err := os.Open(dbPath + "-wal"); err == nil {
		f.ReadAt(m.header[:], 0)
		f.Close()
	}
	return m
}

// newestL0 is the newest local L0 file's TXID and path ("" if none).
func newestL0(dbPath string) (TXID, string) {
	dir := filepath.FromSlash(litestream.LTXLevelDir(MetaPath(dbPath), 0))
	ents, _ := os.ReadDir(dir)
	var txid TXID
	var name string
	for _, ent := range ents {
		if _, maxTXID, err := ltx.ParseFilename(ent.Name()); err == nil && maxTXID >= txid {
			txid, name = maxTXID, ent.Name()
		}
	}
	if name == "" {
		return 0, ""
	}
	return txid, filepath.Join(dir, name)
}

var discardLogger = slog.New(slog.DiscardHandler)

func readWALOnce(dbPath string) (ws walStatus) {
	unknown := func(format string, args ...any) walStatus {
		ws.State, ws.Reason, ws.PendingBytes = WALUnknown, fmt.Sprintf(format, args...), 0
		return ws
	}

	// Litestream's last cut.
	txid, ltxPath := newestL0(dbPath)
	var hdr ltx.Header
	if ltxPath != "" {
		f, err := os.Open(ltxPath)
		if err != nil {
			return unknown("cannot read Litestream's newest LTX file: %v", err)
		}
		buf := make([]byte, ltx.HeaderSize)
		_, err = io.ReadFull(f, buf)
		f.Close()
		if err == nil {
			err = hdr.UnmarshalBinary(buf)
		}
		if err != nil {
			return unknown("cannot read Litestream's newest LTX file %s: %v", filepath.Base(ltxPath), err)
		}
		ws.CapturedAt = time.UnixMilli(hdr.Timestamp)
	}

	// The WAL.
	walPath := dbPath + "-wal"
	wal, err := os.Open(walPath)
	if errors.Is(err, os.ErrNotExist) {
		if ltxPath == "" {
			ws.State = WALNoHistory
			return ws
		}
		return unknown("the WAL is gone (another process checkpointed and removed it since Litestream's last cut, txid %s): "+
			"commits made in between are in the database file but may be missing from the replica; serve's next sync snapshots the database", txid)
	} else if err != nil {
		return unknown("cannot read the WAL: %v", err)
	}
	defer wal.Close()
	fi, err := wal.Stat()
	if err != nil {
		return unknown("cannot read the WAL: %v", err)
	}
	ws.ModTime = fi.ModTime()
	walSize := fi.Size()
	var walHdr [litestream.WALHeaderSize]byte
	if _, err := wal.ReadAt(walHdr[:], 0); err != nil || !validWALHeader(walHdr[:]) {
		if ltxPath == "" {
			ws.State = WALNoHistory
			return ws
		}
		return unknown("the WAL is empty (truncated by a checkpoint since Litestream's last cut, txid %s): "+
			"commits made before the checkpoint may be missing from the replica; serve's next sync snapshots the database", txid)
	}
	pageSize := binary.BigEndian.Uint32(walHdr[8:])
	salt1, salt2 := binary.BigEndian.Uint32(walHdr[16:]), binary.BigEndian.Uint32(walHdr[20:])
	frameSize := int64(litestream.WALFrameHeaderSize) + int64(pageSize)

	// Committed frames of the WAL's current generation, from its start.
	fromStart := func() (int64, error) {
		rd, err := litestream.NewWALReader(wal, discardLogger)
		if err != nil {
			return 0, err
		}
		return committedBytes(rd, litestream.WALHeaderSize, frameSize)
	}

	if ltxPath == "" {
		n, err := fromStart()
		if err != nil {
			return unknown("cannot read the WAL: %v", err)
		}
		if n == 0 {
			ws.State = WALNoHistory
			return ws
		}
		ws.State, ws.PendingBytes = WALPending, n
		return ws
	}

	end := hdr.WALOffset + hdr.WALSize // where Litestream's next cut starts
	switch {
	case hdr.WALOffset < litestream.WALHeaderSize:
		return unknown("Litestream's newest LTX file (txid %s) records no WAL position", txid)
	case hdr.PageSize != pageSize:
		return unknown("the WAL's page size %d is not that of Litestream's newest LTX file (%d)", pageSize, hdr.PageSize)
	case (end-litestream.WALHeaderSize)%frameSize != 0:
		return unknown("Litestream's newest LTX file (txid %s) records an unaligned WAL end %d", txid, end)
	}

	if salt1 == hdr.WALSalt1 && salt2 == hdr.WALSalt2 {
		// The same WAL generation Litestream last cut: commits beyond its end.
		if walSize < end {
			return unknown("the WAL (%d bytes) is shorter than what Litestream cut from it (%d bytes)", walSize, end)
		}
		var n int64
		if end == litestream.WALHeaderSize {
			n, err = fromStart()
		} else {
			n, err = oldGeneration(wal, end, hdr.WALSalt1, hdr.WALSalt2, frameSize)
		}
		if err != nil {
			return unknown("cannot follow the WAL from Litestream's last cut (offset %d): %v", end, err)
		}
		ws.State, ws.PendingBytes = WALCaptured, n
		if n > 0 {
			ws.State = WALPending
		}
		return ws
	}

	// The WAL restarted since the last cut (a checkpoint, then a write):
	// every committed frame of the new generation is pending, and so are
	// commits the old generation held beyond the cut, which the checkpoint
	// copied into the database file unseen. Those can still be read while
	// the new generation has not overwritten the frame at the cut. SQLite
	// adds 1 to salt-1 at each restart, so only a difference of exactly 1
	// rules out a whole generation in between.
	n, err := fromStart()
	if err != nil {
		return unknown("cannot read the WAL: %v", err)
	}
	restarts := salt1 - hdr.WALSalt1
	tail, tailErr := int64(0), error(nil)
	switch {
	case end > litestream.WALHeaderSize:
		tail, tailErr = oldGeneration(wal, end, hdr.WALSalt1, hdr.WALSalt2, frameSize)
	case walSize > litestream.WALHeaderSize+n:
		// The cut ended at the old generation's header: its later frames, if
		// any survive, cannot be checksummed without that header.
		tailErr = errors.New("frames of the earlier generation cannot be verified")
	}
	if restarts != 1 {
		tailErr = fmt.Errorf("the WAL restarted %s since Litestream's last cut (txid %s)", restartCount(restarts), txid)
	}
	ws.PendingBytes = n + tail
	switch {
	case tailErr == nil && ws.PendingBytes == 0:
		ws.State = WALCaptured
	case ws.PendingBytes > 0:
		ws.State = WALPending
		if tailErr != nil {
			ws.Reason = "at least this much: " + tailErr.Error()
		}
	default:
		return unknown("%v: commits made before it may be in the database file but missing from the replica; serve's next sync snapshots the database", tailErr)
	}
	return ws
}

func restartCount(n uint32) string {
	if n == 0 || n > 1<<16 {
		return "or was recreated"
	}
	return fmt.Sprintf("%d times", n)
}

// validWALHeader: magic, version and header checksum, as SQLite checks them.
func validWALHeader(hdr []byte) bool {
	_, err := litestream.NewWALReader(bytesReaderAt(hdr), discardLogger)
	return err == nil
}

type bytesReaderAt []byte

func (b bytesReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// oldGeneration is the committed bytes, beyond end, of the WAL generation
// with the given salt, following its checksum chain from the frame before
// end (as Litestream's next cut does). An error means that frame no longer
// carries the salt: it has been overwritten.
func oldGeneration(wal io.ReaderAt, end int64, salt1, salt2 uint32, frameSize int64) (int64, error) {
	rd, err := litestream.NewWALReaderWithOffset(context.Background(), wal, end, salt1, salt2, discardLogger)
	var mismatch *litestream.PrevFrameMismatchError
	if errors.As(err, &mismatch) {
		return 0, errors.New("the WAL was overwritten at Litestream's last cut")
	} else if err != nil {
		return 0, err
	}
	return committedBytes(rd, end, frameSize)
}

// committedBytes reads frames until the checksum chain ends and returns the
// bytes from start to the end of the last commit frame.
func committedBytes(rd *litestream.WALReader, start, frameSize int64) (int64, error) {
	buf := make([]byte, rd.PageSize())
	var last int64
	for {
		_, commit, err := rd.ReadFrame(context.Background(), buf)
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return 0, err
		}
		if commit != 0 {
			last = rd.Offset() + frameSize
		}
	}
	if last == 0 {
		return 0, nil
	}
	return last - start, nil
}
