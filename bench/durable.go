package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/hookledger/hookledger/custody"
)

// DurableLog is the smallest custody that keeps the durability promise: one
// goroutine appends each batch of raw bodies to a pre-allocated log file,
// fdatasyncs it, then releases the batch's replies; duplicates are told apart
// by an in-memory map. It keeps no ledger, no index and no chain, and cannot
// be queried: it is the floor under any durable receiver on this disk, the
// reference serve's write path is measured against (the throughput issue).
//
// Its queue and batch bounds are the custody writer's defaults, so a
// saturated reference answers 503 where serve would.
type DurableLog struct {
	f     *os.File
	queue chan *durableJob

	mu     sync.RWMutex // guards closed against a send on a closed queue
	closed bool
	done   chan struct{}

	// Owned by the writer goroutine.
	seen map[string][]byte // provider NUL event id -> body SHA-256
	off  int64             // where the next record goes
	size int64             // bytes allocated on disk
	buf  []byte
}

type durableJob struct {
	d     *custody.Delivery
	reply chan error
}

const (
	durableQueue    = 4096     // custody.Writer's default QueueSize
	durableMaxBatch = 512      // custody.Writer's default MaxBatch
	durableChunk    = 64 << 20 // bytes allocated at a time
)

// OpenDurableLog starts a fresh log at path (an old one is truncated: the
// dedupe map starts empty too) and its writer.
func OpenDurableLog(path string) (*DurableLog, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	l := &DurableLog{f: f, queue: make(chan *durableJob, durableQueue), done: make(chan struct{}),
		seen: make(map[string][]byte)}
	if err := l.grow(0); err != nil {
		f.Close()
		return nil, err
	}
	go l.run()
	return l, nil
}

// Submit takes custody of a delivery: it returns once the batch holding it is
// on disk. Only deliveries are accepted; the reference has no other writes.
func (l *DurableLog) Submit(ctx context.Context, op custody.Op) error {
	d, ok := op.(*custody.Delivery)
	if !ok {
		return fmt.Errorf("durable reference: %T is not a delivery", op)
	}
	j := &durableJob{d: d, reply: make(chan error, 1)}
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return custody.ErrClosed
	}
	select {
	case l.queue <- j:
	default:
		l.mu.RUnlock()
		return custody.ErrQueueFull
	}
	l.mu.RUnlock()
	select {
	case err := <-j.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close drains the queue, syncs, and closes the file.
func (l *DurableLog) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.queue)
	}
	l.mu.Unlock()
	<-l.done
	return l.f.Close()
}

func (l *DurableLog) run() {
	defer close(l.done)
	batch := make([]*durableJob, 0, durableMaxBatch)
	for j := range l.queue {
		batch = append(batch[:0], j)
	drain:
		for len(batch) < durableMaxBatch {
			select {
			case j, ok := <-l.queue:
				if !ok {
					break drain
				}
				batch = append(batch, j)
			default:
				break drain
			}
		}
		err := l.commit(batch)
		for _, j := range batch {
			j.reply <- err
		}
	}
}

// commit appends the batch's new events as one write and one fdatasync.
// Every job's reply, duplicates' too, waits for it: a duplicate of an event
// earlier in the same batch is only durable once the batch is.
func (l *DurableLog) commit(batch []*durableJob) error {
	l.buf = l.buf[:0]
	var added []string
	for _, j := range batch {
		d := j.d
		key := d.Provider + "\x00" + d.EventID
		if sum, ok := l.seen[key]; ok {
			d.Outcome, d.StoredStatus = custody.OutcomeDuplicate, d.Status
			if !bytes.Equal(sum, d.BodySHA256) {
				d.Outcome = custody.OutcomePayloadMismatch
			}
			continue
		}
		l.seen[key] = d.BodySHA256
		added = append(added, key)
		d.Outcome, d.StoredStatus = custody.OutcomeInserted, d.Status
		l.buf = appendRecord(l.buf, d)
	}
	err := l.write(l.buf)
	if err != nil {
		for _, k := range added { // not durable: a retry must be new again
			delete(l.seen, k)
		}
	}
	return err
}

func (l *DurableLog) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if err := l.grow(int64(len(b))); err != nil {
		return err
	}
	if _, err := l.f.WriteAt(b, l.off); err != nil {
		return err
	}
	if err := datasync(l.f); err != nil {
		return err
	}
	l.off += int64(len(b))
	return nil
}

// grow makes sure n more bytes fit in the space already allocated, so that
// fdatasync never has to write a new file size.
func (l *DurableLog) grow(n int64) error {
	for l.off+n > l.size || l.size == 0 {
		if err := allocate(l.f, l.size, durableChunk); err != nil {
			return fmt.Errorf("allocate the durable reference's log: %w", err)
		}
		l.size += durableChunk
		if err := l.f.Sync(); err != nil { // the new size, once per chunk
			return err
		}
	}
	return nil
}

// A record: three uvarint-length-prefixed fields, provider, event id, body.
func appendRecord(b []byte, d *custody.Delivery) []byte {
	for _, field := range [][]byte{[]byte(d.Provider), []byte(d.EventID), d.Body} {
		b = binary.AppendUvarint(b, uint64(len(field)))
		b = append(b, field...)
	}
	return b
}

// ReadDurableLog returns the records a log holds, in order: for tests and
// for checking a run by hand.
func ReadDurableLog(path string) (records [][3][]byte, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// The space after the last record is zeros; a record starts with its
	// provider's length, never 0.
	for len(b) > 0 && b[0] != 0 {
		var rec [3][]byte
		for i := range rec {
			n, k := binary.Uvarint(b)
			if k <= 0 || uint64(len(b)-k) < n {
				return records, errors.New("durable log: truncated record")
			}
			rec[i], b = b[k:k+int(n)], b[k+int(n):]
		}
		records = append(records, rec)
	}
	return records, nil
}
