package custody

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrNotReplicated means an item committed locally but the replica could not
// confirm it, so in ACK-after-replica mode it is not acknowledged: the sender
// retries, the retry is a duplicate, and its reply waits for the replica again.
var ErrNotReplicated = errors.New("committed locally, but the replica does not hold it yet")

// replicaGather bounds how long a replica sync waits for a batch the writer
// is committing at that moment (about one commit's fsync). A variable so
// tests can widen it.
var replicaGather = 2 * time.Millisecond

// replicaStage is the extra pipeline stage of ACK-after-replica mode
// (Writer.Replicate). After COMMIT the writer hands it the batch's waiting
// items and goes straight on to the next batch; the stage calls Replicate once
// for everything handed over since its previous call, then releases all those
// replies. While one Replicate runs, later batches pile up and share the next
// one, just as requests that arrive during an fsync share the next commit.
//
// One refinement: a replica sync costs several fsyncs (Litestream writes the
// LTX file locally, then to the replica, each file and directory synced),
// a commit one. If, when a batch is handed over, the writer already holds the
// next batch, the stage lets that batch ride along (waiting at most
// replicaGather) instead of starting a sync that leaves it to wait for the
// whole next one. Measured in-process with 32 submitters and a file replica,
// this doubled the commits per replica sync and raised throughput 40-60%.
type replicaStage struct {
	replicate func(context.Context) error

	mu      sync.Mutex
	pending []*job // committed, waiting for the replica
	more    bool   // at the last hand-over the writer already held the next batch
	closed  bool
	wake    chan struct{} // capacity 1: "pending changed or closed"
	done    chan struct{}
}

// startReplicaStage runs the stage when Replicate is set (from Open).
func (w *Writer) startReplicaStage() {
	if w.Replicate == nil {
		return
	}
	w.replica = &replicaStage{replicate: w.Replicate, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.replica.run()
}

// stopReplicaStage waits until every handed-over item has its reply (from
// Close, after the writer goroutine has handed over its last batch).
func (w *Writer) stopReplicaStage() {
	s := w.replica
	if s == nil {
		return
	}
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.signal()
	<-s.done
}

// awaitReplica is called by the writer goroutine after a successful COMMIT in
// place of replying. Items whose own op failed left nothing in the committed
// transaction, so there is nothing of theirs to replicate: they get their error
// at once. The rest wait for the replica.
func (w *Writer) awaitReplica(batch []*job, errs []error) {
	s := w.replica
	s.mu.Lock()
	for i, j := range batch {
		if errs[i] != nil {
			j.finish(errs[i])
			continue
		}
		s.pending = append(s.pending, j) // batch is reused by the writer: keep the jobs, not the slice
	}
	s.more = len(w.queue) > 0
	s.mu.Unlock()
	s.signal()
}

func (s *replicaStage) signal() {
	select {
	case s.wake <- struct{}{}:
	default: // a wake-up is already pending; it will see this batch too
	}
}

func (s *replicaStage) run() {
	defer close(s.done)
	for range s.wake {
		s.mu.Lock()
		if s.more && !s.closed {
			s.mu.Unlock()
			select {
			case <-s.wake: // the next batch is committed and handed over
			case <-time.After(replicaGather):
			}
			s.mu.Lock()
		}
		jobs, closed := s.pending, s.closed
		s.pending = nil
		s.mu.Unlock()
		if len(jobs) > 0 {
			// Every job here committed before this call, so one Replicate,
			// which covers every commit that preceded it, covers them all.
			err := s.replicate(context.Background())
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrNotReplicated, err)
			}
			for _, j := range jobs {
				j.finish(err)
			}
		}
		if closed {
			return
		}
	}
}
