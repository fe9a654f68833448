package receiver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/ledger"
)

// fakeReplica stands in for Litestream's sync-and-wait: while gate is closed
// every call blocks; fail makes calls return an error.
type fakeReplica struct {
	calls   atomic.Int32
	started chan struct{} // one send per call, if anyone listens
	mu      sync.Mutex
	gate    chan struct{}
	fail    error
}

func newFakeReplica() *fakeReplica {
	return &fakeReplica{started: make(chan struct{}, 100), gate: make(chan struct{})}
}

func (f *fakeReplica) open() { f.mu.Lock(); close(f.gate); f.mu.Unlock() }

func (f *fakeReplica) sync(ctx context.Context) error {
	f.calls.Add(1)
	f.started <- struct{}{}
	f.mu.Lock()
	gate, fail := f.gate, f.fail
	f.mu.Unlock()
	select {
	case <-gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return fail
}

// replicaEnv is newEnv with its writer replaced by one in ACK-after-replica mode.
func replicaEnv(t *testing.T, f *fakeReplica) *env {
	e := newEnv(t)
	if err := e.writer.Close(); err != nil {
		t.Fatal(err)
	}
	w := NewWriter(e.db)
	w.Now = func() time.Time { return e.now }
	w.Replicate = f.sync
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.writer, e.srv.Writer = w, w
	return e
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// The reply waits for the replica, the writer does not: while the first
// replica sync hangs, later events commit locally, and once it returns one
// more sync releases all of them.
func TestReplicaAckWaitsForReplicaNotWriter(t *testing.T) {
	f := newFakeReplica()
	e := replicaEnv(t, f)
	codes := make(chan int, 5)
	go func() { codes <- e.send("msg_0", usageBody("cus_1", "m", "1")).Code }()
	<-f.started // msg_0 committed; its replica sync is in flight
	if got := e.count("receipts"); got != 1 {
		t.Fatalf("receipts = %d while the replica sync hangs, want 1 (committed locally)", got)
	}
	for i := 1; i <= 4; i++ {
		go func() { codes <- e.send(fmt.Sprintf("msg_%d", i), usageBody("cus_1", "m", "1")).Code }()
	}
	waitFor(t, "the writer commits 4 more events behind the hung sync", func() bool { return e.count("receipts") == 5 })
	select {
	case c := <-codes:
		t.Fatalf("a reply (%d) went out before the replica held its commit", c)
	case <-time.After(50 * time.Millisecond):
	}

	f.open()
	for range 5 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("reply %d, want 200", c)
		}
	}
	// One sync for msg_0, then one for everything committed while it ran.
	if n := f.calls.Load(); n != 2 {
		t.Errorf("replica synced %d times, want 2 (msg_0, then msg_1..4 together)", n)
	}
	if got := e.counts(); got != [3]int{5, 5, 5} {
		t.Errorf("receipts, attempts, usage = %v, want [5 5 5]", got)
	}
}

// A replica error is a 503 (the sender retries); the retry is a duplicate
// that adds nothing and is acknowledged once the replica answers again.
func TestReplicaErrorAnswers503AndRetryIsAcked(t *testing.T) {
	f := newFakeReplica()
	f.open()
	f.fail = errors.New("replica unreachable")
	e := replicaEnv(t, f)
	body := usageBody("cus_1", "m", "2.5")
	r := e.send("msg_1", body)
	if r.Code != http.StatusServiceUnavailable || r.Body.Accepted {
		t.Fatalf("with the replica down: %d %+v, want 503", r.Code, r.Body)
	}
	if got := e.counts(); got != [3]int{1, 1, 1} {
		t.Fatalf("receipts, attempts, usage = %v, want [1 1 1]: committed locally, only the ACK is withheld", got)
	}
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	r = e.send("msg_1", body)
	if r.Code != http.StatusOK || !r.Body.Duplicate {
		t.Fatalf("retry: %d %+v, want 200 duplicate", r.Code, r.Body)
	}
	if got := e.counts(); got != [3]int{1, 2, 1} {
		t.Errorf("receipts, attempts, usage = %v, want [1 2 1]", got)
	}
	if got := e.totals()["cus_1"]; got != 2*ledger.Scale+ledger.Scale/2 {
		t.Errorf("total %s, want 2.5", got)
	}
}

// An item whose own op failed was rolled back: it gets its error at once
// instead of waiting for a replica that has nothing of it to hold.
func TestReplicaFailedItemIsNotHeldBack(t *testing.T) {
	f := newFakeReplica()
	e := replicaEnv(t, f)
	e.writer.testHook = func(d *Delivery) error {
		if d.EventID == "msg_bad" {
			return errors.New("injected")
		}
		return nil
	}
	if r := e.send("msg_bad", usageBody("cus_1", "m", "1")); r.Code != http.StatusServiceUnavailable {
		t.Fatalf("failed item: %d, want 503 without waiting for the replica", r.Code)
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("a batch with nothing committed synced the replica %d times", n)
	}
	f.open()
}

// Close waits for the replies that wait for the replica.
func TestReplicaCloseDrainsStage(t *testing.T) {
	f := newFakeReplica()
	e := replicaEnv(t, f)
	reply := make(chan error, 1)
	go func() {
		reply <- e.writer.Submit(context.Background(), OpFunc(func(context.Context, *Tx) error { return nil }))
	}()
	<-f.started
	closed := make(chan struct{})
	go func() { e.writer.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a reply still waited for the replica")
	case <-time.After(50 * time.Millisecond):
	}
	f.open()
	if err := <-reply; err != nil {
		t.Fatalf("Submit: %v", err)
	}
	<-closed
	if err := e.writer.Submit(context.Background(), OpFunc(func(context.Context, *Tx) error { return nil })); !errors.Is(err, ErrClosed) {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
}

// A batch the writer is committing when the previous one is handed over rides
// along in the same replica sync instead of waiting for the next one.
func TestReplicaSyncGathersTheBatchBeingCommitted(t *testing.T) {
	defer func(d time.Duration) { replicaGather = d }(replicaGather)
	replicaGather = 5 * time.Second // never the reason this test passes
	f := newFakeReplica()
	f.open()
	e := replicaEnv(t, f)
	entered, release := make(chan struct{}), make(chan struct{})
	e.writer.testHook = func(d *Delivery) error {
		if d.EventID == "msg_a" {
			close(entered)
			<-release
		}
		return nil
	}
	codes := make(chan int, 3)
	go func() { codes <- e.send("msg_a", usageBody("cus_1", "m", "1")).Code }()
	<-entered // msg_a holds the writer; the next two queue behind it
	for _, id := range []string{"msg_b", "msg_c"} {
		go func() { codes <- e.send(id, usageBody("cus_1", "m", "1")).Code }()
	}
	waitFor(t, "two items queue behind msg_a", func() bool { return e.writer.Depth() == 2 })
	close(release)
	for range 3 {
		if c := <-codes; c != http.StatusOK {
			t.Errorf("reply %d, want 200", c)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("replica synced %d times for two back-to-back batches, want 1", n)
	}
}
