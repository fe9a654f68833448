package custody_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
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

// open lets every call through; it may be called more than once.
func (f *fakeReplica) open() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.gate:
	default:
		close(f.gate)
	}
}

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

// replicaEnv is newEnv with a writer in ACK-after-replica mode.
func replicaEnv(t *testing.T, f *fakeReplica) *env {
	e := newEnvWithWriter(t, "sqlite", func(w *custody.Writer) { w.Replicate = f.sync })
	// Runs before newEnv's cleanup: a test that stops early with the gate
	// still closed must not leave e.Close waiting on a held reply forever.
	t.Cleanup(f.open)
	return e
}

// goSend posts a signed delivery for the default provider from a new
// goroutine and always sends exactly one code on out: the reply's status, or
// -1 if the request failed (reported with t.Errorf). Unlike e.send it never
// calls t.Fatal, which must not run off the test goroutine; and the deferred
// send means even a goroutine that ends early cannot leave the test waiting
// on out until the package timeout.
func goSend(e *env, id string, body []byte, out chan<- int) {
	go func() {
		code := -1
		defer func() { out <- code }()
		c, err := postNoFatal(e, id, body)
		if err != nil {
			e.T.Errorf("%s: %v", id, err)
			return
		}
		code = c
	}()
}

// postNoFatal is e.send without t.Fatal: it returns the status code.
func postNoFatal(e *env, id string, body []byte) (int, error) {
	req, err := http.NewRequest(http.MethodPost, e.HTTP.URL+"/webhooks/default", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	if err := testenv.SignStandard(req.Header, testenv.Secret, id, "", body, e.Now()); err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, err
	}
	return resp.StatusCode, nil
}

// awaitSignal waits for ch, a hook or the fake replica saying a sender got
// that far, and fails the test instead of hanging if a sender's code (see
// goSend) comes first or nothing happens within 10 s.
func awaitSignal(t *testing.T, what string, ch <-chan struct{}, codes <-chan int) {
	t.Helper()
	select {
	case <-ch:
	case c := <-codes:
		t.Fatalf("waiting until %s: a sender finished first with code %d", what, c)
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
	}
}

// recvCode takes one code goSend delivered, failing the test (instead of
// hanging it) if none arrives within 10 s, and failing it if the code is the
// -1 of a request that got no reply.
func recvCode(t *testing.T, codes <-chan int) int {
	t.Helper()
	select {
	case c := <-codes:
		if c == -1 {
			t.Errorf("a sender goroutine got no reply (code -1)")
		}
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for a reply")
		return 0
	}
}

// The reply waits for the replica, the writer does not: while the first
// replica sync hangs, later events commit locally, and once it returns one
// more sync releases all of them.
func TestReplicaAckWaitsForReplicaNotWriter(t *testing.T) {
	f := newFakeReplica()
	e := replicaEnv(t, f)
	codes := make(chan int, 5)
	goSend(e, "msg_0", testenv.UsageBody("cus_1", "m", "1"), codes)
	awaitSignal(t, "msg_0's replica sync starts", f.started, codes) // msg_0 committed; its replica sync is in flight
	if got := e.Count("receipts"); got != 1 {
		t.Fatalf("receipts = %d while the replica sync hangs, want 1 (committed locally)", got)
	}
	for i := 1; i <= 4; i++ {
		goSend(e, fmt.Sprintf("msg_%d", i), testenv.UsageBody("cus_1", "m", "1"), codes)
	}
	await.Eventually(t, 5*time.Second, "the writer commits 4 more events behind the hung sync", func() bool { return e.Count("receipts") == 5 })
	select {
	case c := <-codes:
		t.Fatalf("a reply (%d) went out before the replica held its commit", c)
	case <-time.After(50 * time.Millisecond):
	}

	f.open()
	for range 5 {
		if c := recvCode(t, codes); c != http.StatusOK {
			t.Errorf("reply %d, want 200", c)
		}
	}
	// One sync for msg_0, then one for everything committed while it ran.
	if n := f.calls.Load(); n != 2 {
		t.Errorf("replica synced %d times, want 2 (msg_0, then msg_1..4 together)", n)
	}
	if got := e.Rows(); got != [3]int{5, 5, 5} {
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
	body := testenv.UsageBody("cus_1", "m", "2.5")
	r := e.Send("msg_1", body)
	if r.Code != http.StatusServiceUnavailable || r.Body.Accepted {
		t.Fatalf("with the replica down: %d %+v, want 503", r.Code, r.Body)
	}
	if got := e.Rows(); got != [3]int{1, 1, 1} {
		t.Fatalf("receipts, attempts, usage = %v, want [1 1 1]: committed locally, only the ACK is withheld", got)
	}
	f.mu.Lock()
	f.fail = nil
	f.mu.Unlock()
	r = e.Send("msg_1", body)
	if r.Code != http.StatusOK || !r.Body.Duplicate {
		t.Fatalf("retry: %d %+v, want 200 duplicate", r.Code, r.Body)
	}
	if got := e.Rows(); got != [3]int{1, 2, 1} {
		t.Errorf("receipts, attempts, usage = %v, want [1 2 1]", got)
	}
	if got := e.Totals()["cus_1"]; got != 2*ledger.Scale+ledger.Scale/2 {
		t.Errorf("total %s, want 2.5", got)
	}
}

// An item whose own op failed was rolled back: it gets its error at once
// instead of waiting for a replica that has nothing of it to hold.
func TestReplicaFailedItemIsNotHeldBack(t *testing.T) {
	f := newFakeReplica()
	e := replicaEnv(t, f)
	e.Writer.SetTestHook(func(d *custody.Delivery) error {
		if d.EventID == "msg_bad" {
			return errors.New("injected")
		}
		return nil
	})
	if r := e.Send("msg_bad", testenv.UsageBody("cus_1", "m", "1")); r.Code != http.StatusServiceUnavailable {
		t.Fatalf("failed item: %d, want 503 without waiting for the replica", r.Code)
	}
	if n := f.calls.Load(); n != 0 {
		t.Errorf("a batch with nothing committed synced the replica %d times", n)
	}
	// Rolled back: no receipt, no attempt, no usage row, nothing in the total.
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("receipts, attempts, usage = %v, want [0 0 0]: the failed item was rolled back", got)
	}
	if got, ok := e.Totals()["cus_1"]; ok || got != 0 {
		t.Errorf("cus_1 total %s (present %v), want none: the failed event must add nothing", got, ok)
	}
	f.open()
}

// Close waits for the replies that wait for the replica.
func TestReplicaCloseDrainsStage(t *testing.T) {
	f := newFakeReplica()
	e := replicaEnv(t, f)
	reply := make(chan error, 1)
	go func() {
		reply <- e.Writer.Submit(context.Background(), custody.OpFunc(func(context.Context, *custody.Tx) error { return nil }))
	}()
	<-f.started
	closed := make(chan struct{})
	go func() { e.Writer.Close(); close(closed) }()
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
	if err := e.Writer.Submit(context.Background(), custody.OpFunc(func(context.Context, *custody.Tx) error { return nil })); !errors.Is(err, custody.ErrClosed) {
		t.Errorf("Submit after Close: %v, want ErrClosed", err)
	}
}

// A batch the writer is committing when the previous one is handed over rides
// along in the same replica sync instead of waiting for the next one.
func TestReplicaSyncGathersTheBatchBeingCommitted(t *testing.T) {
	defer custody.SetReplicaGather(5 * time.Second)() // never the reason this test passes
	f := newFakeReplica()
	f.open()
	e := replicaEnv(t, f)
	entered, release := make(chan struct{}), make(chan struct{})
	releaseWriter := sync.OnceFunc(func() { close(release) })
	defer releaseWriter() // a test that stops early must not leave msg_a held
	e.Writer.SetTestHook(func(d *custody.Delivery) error {
		if d.EventID == "msg_a" {
			close(entered)
			<-release
		}
		return nil
	})
	codes := make(chan int, 3)
	goSend(e, "msg_a", testenv.UsageBody("cus_1", "m", "1"), codes)
	awaitSignal(t, "msg_a holds the writer", entered, codes) // msg_a holds the writer; the next two queue behind it
	for _, id := range []string{"msg_b", "msg_c"} {
		goSend(e, id, testenv.UsageBody("cus_1", "m", "1"), codes)
	}
	await.Eventually(t, 5*time.Second, "two items queue behind msg_a", func() bool { return e.Writer.Depth() == 2 })
	releaseWriter()
	for range 3 {
		if c := recvCode(t, codes); c != http.StatusOK {
			t.Errorf("reply %d, want 200", c)
		}
	}
	if n := f.calls.Load(); n != 1 {
		t.Errorf("replica synced %d times for two back-to-back batches, want 1", n)
	}
}
