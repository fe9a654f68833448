package custody

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Writer errors a caller branches on.
var (
	// ErrQueueFull means the writer is saturated; answer 503 with Retry-After.
	ErrQueueFull = errors.New("writer queue is full")
	// ErrClosed means the writer is shutting down.
	ErrClosed = errors.New("writer is closed")
)

// Writer owns the single write connection. Every write goes through its one
// goroutine, which commits in batches (group commit): requests that arrive
// while a commit is in flight share the next fsync. Each caller waits for the
// batch holding its own work, so a reply always follows its commit.
type Writer struct {
	// QueueSize bounds the queue; beyond it Submit fails fast with ErrQueueFull
	// instead of letting latency grow without bound. Default 4096.
	QueueSize int
	// MaxBatch caps how many items one transaction holds. Default 512.
	MaxBatch int
	// QueueWait is how long SubmitAll waits for room in the queue for all
	// of its ops before they all fail with ErrQueueFull. Default 5s.
	QueueWait time.Duration
	// Now is the clock (tests replace it). Default time.Now.
	Now func() time.Time
	// AfterBatch, when set, is called with each committed batch's size and
	// commit duration (metrics).
	AfterBatch func(size int, commit time.Duration)
	// OnStorageError, when set, is called from the writer goroutine for each
	// storage failure: a begin, commit or savepoint that failed (op "begin",
	// "commit", "savepoint": the whole batch got the error) or a delivery
	// whose writes failed on their own (op "delivery": that item alone).
	// Each of these is a 503 to a sender; a full disk or an I/O error turns
	// every delivery into one, so serve logs and counts them (the delivery
	// lines alone are INFO). Errors of other ops (an adjustment a check
	// refused) are theirs to report.
	OnStorageError func(op string, err error)
	// Admit, when set, is asked before each batch; while it returns an
	// error, the batch is not begun and every item gets that error (503),
	// reported like a storage error (op "admit"). serve sets it to the
	// replicator's WAL bound: while Litestream cannot capture the WAL,
	// nothing checkpoints it, and commits would fill the disk the capture
	// needs (replication/capture.go).
	Admit func() error
	// Replicate, when set, turns on ACK-after-replica mode: a committed item's
	// reply waits until Replicate, called after its COMMIT, returns (see
	// replica.go; it must return in bounded time). nil: reply after COMMIT.
	Replicate func(ctx context.Context) error
	// Route, when set, names the destinations a new event is forwarded to
	// (outbox.go): Submit asks it for each Delivery, so every source of
	// events gets the same outbox rows.
	Route Router
	// AfterOutbox, when set, is called from the writer goroutine after each
	// committed batch that wrote outbox rows (the relay wakes up).
	AfterOutbox func()
	// Push, when set, is given every ledger row inside the transaction the
	// moment it is appended: usage rows of new events, adjustments and
	// voids alike, all of which pass through Tx.Append. It is the place
	// for a row's effects that must commit with it (invariant 7): billing
	// sync (stripe.Sync) writes the row's push and its outbox message there,
	// so a row that commits is a row that will be pushed. An error fails the
	// op that appended the row.
	Push Pusher
	// Receipt, when set, is called inside the transaction with every new
	// receipt (a duplicate is not), after its ledger rows: the place for
	// what an event says about state kept elsewhere that must commit with
	// its custody (invariant 7). Billing sync (stripe.Reports) links
	// Stripe's error reports to the pushes they name there. An error fails
	// the delivery.
	Receipt ReceiptHook
	// Limits resolves the limits whose thresholds raise alerts (entitle);
	// nil raises none. The usage state is kept whatever it is: every batch
	// adds its rows to their months' totals (entitle.Tracker).
	Limits *entitle.Policy

	db       *schema.DB
	store    Store               // set by Open
	states   *entitle.StateCache // the usage state across batches, for the database the writer alone changes between them
	testHook func(*Delivery) error
	lastNow  int64 // owned by the writer goroutine

	mu     sync.RWMutex
	closed bool
	queue  chan *job
	done   chan struct{}
	// room admits SubmitAll's ops, QueueSize at most at once, all of one call
	// or none (FIFO, so a big batch is never starved by small ones).
	room *semaphore.Weighted

	replica *replicaStage // nil unless Replicate is set
}

// Op is one unit of work in a write transaction. If it fails, only its own
// writes are undone and the rest of its batch still commits.
//
// Apply may run more than once for one Submit: when another op in the same
// batch fails, the writer rolls the batch back and applies it again. Each call
// must start afresh from the transaction it is given, setting its results
// rather than adding to them.
type Op interface {
	Apply(ctx context.Context, tx *Tx) error
}

// OpFunc adapts a function to Op, for writes defined outside this package
// (adjustments, replays) that must share the writer and the ledger chain.
type OpFunc func(ctx context.Context, tx *Tx) error

// Apply calls f.
func (f OpFunc) Apply(ctx context.Context, tx *Tx) error { return f(ctx, tx) }

type job struct {
	op    Op
	reply chan error // Submit's; nil in a group
	group *group     // SubmitAll's
	err   error      // a group job's result
}

// finish hands a job its result: once, after its batch committed (or failed).
func (j *job) finish(err error) {
	if j.group == nil {
		j.reply <- err
		return
	}
	j.err = err
	j.group.finished()
}

// NewWriter returns a writer for db; call Open before Submit.
func NewWriter(db *schema.DB) *Writer {
	return &Writer{db: db, QueueSize: 4096, MaxBatch: 512, QueueWait: 5 * time.Second, Now: time.Now}
}

// Open prepares the write connection's statements and starts the writer
// goroutine.
func (w *Writer) Open(ctx context.Context) error {
	store, err := w.db.OpenWriter(ctx)
	if err != nil {
		return err
	}
	w.store = store
	w.states = entitle.NewStateCache()
	w.queue = make(chan *job, w.QueueSize)
	w.done = make(chan struct{})
	w.room = semaphore.NewWeighted(int64(w.QueueSize))
	w.startReplicaStage()
	go w.run()
	return nil
}

// Close stops accepting work, commits everything already queued and waits.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	close(w.queue)
	w.mu.Unlock()
	<-w.done
	w.stopReplicaStage()
	return w.store.Close()
}

// Depth is the number of queued items (for metrics).
func (w *Writer) Depth() int { return len(w.queue) }

// Submit queues op and waits until the batch holding it has committed. A nil
// error means op's writes are durable. If ctx ends first, Submit returns
// ctx.Err() but op may still commit.
func (w *Writer) Submit(ctx context.Context, op Op) error {
	w.route(op)
	j := &job{op: op, reply: make(chan error, 1)}
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return ErrClosed
	}
	select {
	case w.queue <- j:
	default:
		w.mu.RUnlock()
		return ErrQueueFull
	}
	w.mu.RUnlock()
	select {
	case err := <-j.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SubmitAll submits many ops at once, in order, each its own job (so each
// keeps its own savepoint in the isolated pass), and waits for all of them:
// errs[i] is what Submit would have returned for ops[i]. It is how one
// request of the ingest API hands over up to a thousand events: all of them
// are queued before the first reply is awaited, so they ride in as few
// commits as MaxBatch allows instead of one request-sized wait each.
//
// A call is admitted whole or not at all: it waits (FIFO, up to QueueWait)
// until the queue has room for every one of its ops, then queues them all;
// if the room does not come, every op fails with ErrQueueFull and nothing is
// queued. So a full queue never half-applies a batch, and a batch of a
// thousand is not starved by the single deliveries around it. (Where Submit
// fails at once on a full queue, a batch waits: its client would otherwise
// retry a thousand events for the lack of room for a few.) An op whose own
// writes fail still fails alone, as with Submit, while the others commit.
func (w *Writer) SubmitAll(ctx context.Context, ops []Op) []error {
	errs := make([]error, len(ops))
	fail := func(err error) []error {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	if len(ops) == 0 {
		return errs
	}
	if len(ops) > w.QueueSize {
		return fail(fmt.Errorf("%w: %d ops at once is more than the queue holds (%d)", ErrQueueFull, len(ops), w.QueueSize))
	}
	wait, cancel := context.WithTimeout(ctx, w.QueueWait)
	err := w.room.Acquire(wait, int64(len(ops)))
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return fail(ctx.Err())
		}
		return fail(ErrQueueFull)
	}
	defer w.room.Release(int64(len(ops)))
	for _, op := range ops {
		w.route(op) // here, like Submit: the writer goroutine only inserts the outbox rows
	}
	g := &group{done: make(chan struct{})}
	g.left.Store(int64(len(ops)))
	jobs := make([]job, len(ops))
	if err := w.enqueue(ctx, ops, jobs, g); err != nil {
		return fail(err)
	}
	select {
	case <-g.done:
		for i := range jobs {
			errs[i] = jobs[i].err
		}
	case <-ctx.Done():
		return fail(ctx.Err()) // they may still commit, as with Submit
	}
	return errs
}

// group is the jobs of one SubmitAll: done closes when the last finishes.
type group struct {
	left atomic.Int64
	done chan struct{}
}

func (g *group) finished() {
	if g.left.Add(-1) == 0 {
		close(g.done)
	}
}

// enqueue queues every op (SubmitAll has admitted them). The room is
// SubmitAll's own: Submit's deliveries may still fill the channel for a
// moment, and the writer drains it, so a blocked send waits for a batch's
// commit at most. The writer closing first (ErrClosed) queues nothing.
func (w *Writer) enqueue(ctx context.Context, ops []Op, jobs []job, g *group) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return ErrClosed
	}
	for i, op := range ops {
		jobs[i] = job{op: op, group: g}
		w.queue <- &jobs[i]
	}
	return nil
}

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]*job, 0, w.MaxBatch)
	for first := range w.queue {
		// No artificial delay: a lone request commits at once, and whatever
		// queued up during the previous fsync rides along in this one.
		batch = append(batch[:0], first)
	drain:
		for len(batch) < w.MaxBatch {
			select {
			case j, ok := <-w.queue:
				if !ok {
					break drain
				}
				batch = append(batch, j)
			default:
				break drain
			}
		}
		w.commit(batch)
	}
}

// commit runs one transaction for the batch and replies to every job.
//
// It first runs the batch without savepoints: they cost a journal copy of
// every page an op touches, and ops almost never fail. If one does, that pass
// is rolled back and the batch runs again with a savepoint per op, leaving out
// the op that failed, so it fails alone and the others commit.
func (w *Writer) commit(batch []*job) {
	if w.Admit != nil {
		if err := w.Admit(); err != nil {
			err = w.storageError("admit", err)
			for _, j := range batch {
				j.finish(err)
			}
			return
		}
	}
	errs := make([]error, len(batch))
	failed, err := w.apply(batch, errs, false)
	if err == nil && failed {
		_, err = w.apply(batch, errs, true)
	}
	if err == nil && w.replica != nil {
		w.awaitReplica(batch, errs) // the writer goes on to the next batch
		return
	}
	for i, j := range batch {
		if errs[i] == nil {
			errs[i] = err // nothing in this batch is durable
		}
		j.finish(errs[i])
	}
}

// apply runs the batch's ops in one transaction and commits it. Ops whose
// errs entry is already set are skipped. Without isolate, the first op to fail
// (its error goes into errs) abandons the transaction and apply reports
// failed; with isolate, each op runs in its own savepoint. err is a failure of
// the transaction itself: nothing of the batch is durable.
func (w *Writer) apply(batch []*job, errs []error, isolate bool) (failed bool, err error) {
	ctx := context.Background()
	b, err := w.store.Begin(ctx)
	if err != nil {
		return false, w.storageError("begin", fmt.Errorf("begin: %w", err))
	}
	defer b.Rollback()
	btx := &Tx{b: b, hook: w.testHook, now: w.clock(), route: w.Route, receipt: w.Receipt}
	var states *entitle.StateCache
	if v, ok, err := b.DataVersion(ctx); err != nil {
		return false, w.storageError("begin", fmt.Errorf("read data_version: %w", err))
	} else if ok {
		w.states.Begin(v)
		states = w.states
		btx.version, btx.versionOK = v, true
	}
	btx.usage = entitle.NewTracker(b, w.Limits, states)
	if w.Push != nil {
		btx.push = w.Push.Begin(btx)
	}
	b.Expect(expectedReceipts(batch, errs))
	for i, j := range batch {
		if _, ok := j.op.(*Delivery); !ok && errs[i] == nil {
			if err := btx.flushPushes(ctx); err != nil {
				return false, w.storageError("push", err)
			}
		}
		switch {
		case errs[i] != nil:
		case isolate:
			var txErr error
			if errs[i], txErr = btx.isolated(ctx, j.op); txErr != nil {
				return false, w.storageError("savepoint", txErr) // the savepoint could not be undone: commit nothing
			}
			btx.after(j.op)
			w.opFailed(j.op, errs[i])
		default:
			if errs[i] = j.op.Apply(ctx, btx); errs[i] != nil {
				if err := b.Err(); err != nil {
					// The batch failed, not the op: on PostgreSQL its
					// begin, or the writes of earlier ops that it held
					// back and sent before this op's statement.
					errs[i] = nil
					if errors.Is(err, schema.ErrHeldBack) {
						return true, nil // one op at a time finds the op at fault
					}
					return false, w.storageError("begin", err)
				}
				w.opFailed(j.op, errs[i]) // final: the isolated pass skips it
				return true, nil
			}
			btx.after(j.op)
		}
	}
	if err := btx.flushPushes(ctx); err != nil {
		return false, w.storageError("push", err)
	}
	if err := btx.usage.Flush(ctx); err != nil {
		return false, w.storageError("save usage state", err)
	}
	if err := btx.saveHead(ctx); err != nil {
		return false, w.storageError("save chain head", err)
	}
	start := time.Now()
	if err := b.Commit(); err != nil {
		if !isolate && errors.Is(err, schema.ErrHeldBack) {
			// The writes the storage held back (PostgreSQL: the ops' and
			// the head's, in one statement before COMMIT) failed, and
			// nothing committed: the batch runs again one op at a time,
			// so that a failing op fails alone.
			return true, nil
		}
		return false, w.storageError("commit", fmt.Errorf("commit: %w", err))
	}
	btx.usage.Committed()
	if btx.push != nil {
		btx.push.Committed()
	}
	if w.AfterBatch != nil {
		w.AfterBatch(len(batch), time.Since(start))
	}
	if btx.outboxed && w.AfterOutbox != nil {
		w.AfterOutbox()
	}
	return false, nil
}

// expectedReceipts are the receipts the batch's deliveries insert, unless
// they exist (Batch.Expect).
func expectedReceipts(batch []*job, errs []error) iter.Seq[schema.ReceiptKey] {
	return func(yield func(schema.ReceiptKey) bool) {
		for i, j := range batch {
			if d, ok := j.op.(*Delivery); ok && errs[i] == nil {
				if !yield(schema.ReceiptKey{Provider: d.Provider, EventID: d.EventID}) {
					return
				}
			}
		}
	}
}

// storageError reports err (see OnStorageError) and returns it.
func (w *Writer) storageError(op string, err error) error {
	if w.OnStorageError != nil {
		w.OnStorageError(op, err)
	}
	return err
}

// opFailed reports a delivery whose own writes failed: everything a
// Delivery's Apply returns is a database error (a payload that cannot be
// mapped is stored as failed, not returned).
func (w *Writer) opFailed(op Op, err error) {
	if _, ok := op.(*Delivery); ok && err != nil {
		w.storageError("delivery", err)
	}
}

// clock returns the batch time, never earlier than the previous batch's even
// if the wall clock steps back.
func (w *Writer) clock() int64 {
	w.lastNow = max(w.lastNow, w.Now().UnixMilli())
	return w.lastNow
}

// Tx is a batch's write transaction: the storage batch (its typed writes,
// with the writer's statements bound to it) and the chain head it moves.
type Tx struct {
	b schema.Batch
	// now is the batch's commit clock in unix ms, read after Begin (which
	// holds the write lock from its start):
	// a row's recorded_at never precedes a transaction that committed before it,
	// which is what makes an invoice's ingestion cutoff exact.
	now int64
	// head is both chains' head, read once per batch (headReady) and stored
	// once before COMMIT if the batch moved it (loaded is where it started).
	head      ledger.Head
	headReady bool
	loaded    [2]int64
	hook      func(*Delivery) error // tests inject failures here
	route     Router                // the writer's (outbox.go)
	push      Pushes                // the batch's, of the writer's Pusher
	receipt   ReceiptHook           // the writer's
	outboxed  bool                  // the batch wrote outbox rows
	// usage keeps the usage state (per customer, meter and month) current
	// with the rows the batch appends and decides threshold crossings.
	usage *entitle.Tracker
	// version is the database's data version at the batch's start
	// (versionOK false: not kept, PostgreSQL).
	version   schema.DataVersion
	versionOK bool
}

// Pusher writes what ledger rows must push to another system (their outbox
// messages), in the rows' transaction: Begin starts a batch's.
type Pusher interface {
	Begin(tx *Tx) Pushes
}

// Pushes are what one batch's rows push. Row writes what row r pushes
// (body is the event it was mapped from, nil for an adjustment); what it
// keeps back, Flush stores: the writer calls it before every op other than
// a delivery (a relay's claim, a correction, a read of pushes) and before
// the batch commits. What Pushes keep in memory about what they wrote
// follows the batch: Mark and Undo bracket an op that runs in a
// savepoint, and Committed is called once the batch committed.
type Pushes interface {
	Row(ctx context.Context, r *ledger.Row, body []byte) error
	Flush(ctx context.Context) error
	Mark() int
	Undo(mark int)
	Committed()
}

// DataVersion is the database's data version at the batch's start, as
// schema.Batch.DataVersion reads it (ok false on PostgreSQL): what a hook
// keeps from one batch to the next holds while it stays the same.
func (b *Tx) DataVersion() (v schema.DataVersion, ok bool) { return b.version, b.versionOK }

// Claims is how many outbox claims this process has made (schema.Batch.Claims).
func (b *Tx) Claims() int64 { return b.b.Claims() }

// ReceiptHook writes what a new receipt (d, stored as receiptID) means
// for state kept beside the ledger, in the receipt's transaction.
type ReceiptHook func(ctx context.Context, tx *Tx, d *Delivery, receiptID int64) error

// Outboxed notes that the batch wrote outbox rows, so the relay is woken
// after it commits.
func (b *Tx) Outboxed() { b.outboxed = true }

// Now is the batch time in unix milliseconds: the recorded_at of its rows.
func (b *Tx) Now() int64 { return b.now }

// Append adds a row to the ledger's hash chain.
func (b *Tx) Append(ctx context.Context, r *ledger.Row) error { return b.AppendEvent(ctx, r, nil) }

// AppendEvent adds a row mapped from event body (nil for an adjustment or a
// void) to the ledger's hash chain, counts it in the usage state, raises the
// alerts of the usage, spend and credit thresholds it crossed and writes
// what it pushes (Writer.Push): every ledger row (usage, adjustment, void,
// replay) is appended here, so none can skip them, and all of it commits
// with the row or not at all.
func (b *Tx) AppendEvent(ctx context.Context, r *ledger.Row, body []byte) error {
	h, err := b.chainHead(ctx)
	if err != nil {
		return err
	}
	if err := h.Ledger.Append(ctx, b, r); err != nil {
		return err
	}
	crossed, err := b.usage.Add(ctx, r)
	if err != nil {
		return fmt.Errorf("usage state: %w", err)
	}
	for _, c := range crossed {
		if err := b.alert(ctx, c); err != nil {
			return err
		}
	}
	spent, err := b.usage.Spend(ctx, r)
	if err != nil {
		return fmt.Errorf("spend: %w", err)
	}
	for _, c := range spent {
		if err := b.spendAlert(ctx, c); err != nil {
			return err
		}
	}
	drawn, err := b.usage.Credits(ctx, r, b.now)
	if err != nil {
		return fmt.Errorf("credits: %w", err)
	}
	for _, c := range drawn {
		if err := b.creditAlert(ctx, c); err != nil {
			return err
		}
	}
	if b.push != nil {
		return b.push.Row(ctx, r, body)
	}
	return nil
}

// after is what the batch does after op: an op that wrote the credit
// ledger (a grant, a void, an expiry) changed the balances the batch read,
// so the rows after it read them again (entitle.Tracker.ForgetCredits).
func (b *Tx) after(op Op) {
	switch op.(type) {
	case *GrantCredit, *VoidCredit, *ExpireCredits:
		b.usage.ForgetCredits()
	}
}

// RebuildUsageState recomputes the usage state from the whole ledger in
// this batch (entitle.Build), with months in zone.
func (b *Tx) RebuildUsageState(ctx context.Context, zone string) error {
	h, err := b.chainHead(ctx)
	if err != nil {
		return err
	}
	if err := entitle.Build(ctx, b.b, zone, time.UnixMilli(b.now), h.Ledger.LastID); err != nil {
		return err
	}
	b.usage.Reset()
	return nil
}

// InsertLedgerRow stores a row the chain linked, with the prepared insert.
func (b *Tx) InsertLedgerRow(ctx context.Context, r schema.LedgerRow) error {
	return b.b.InsertLedgerRow(ctx, r)
}

// chainHead returns the head of both chains, loading it once per batch: the
// batch holds the write lock, so no other writer can move it until this
// transaction ends.
func (b *Tx) chainHead(ctx context.Context) (*ledger.Head, error) {
	if !b.headReady {
		h, err := ledger.LoadHead(ctx, b.b)
		if err != nil {
			return nil, err
		}
		b.head, b.headReady = h, true
		b.loaded = [2]int64{h.Ledger.LastID, h.Receipts.LastID}
	}
	return &b.head, nil
}

// flushPushes stores what the batch's pushes kept back (Pushes.Flush).
func (b *Tx) flushPushes(ctx context.Context) error {
	if b.push == nil {
		return nil
	}
	return b.push.Flush(ctx)
}

// saveHead stores the head once per batch, if the batch moved it: one UPDATE
// of one row however many receipts and rows the batch appended.
func (b *Tx) saveHead(ctx context.Context) error {
	h := &b.head
	if !b.headReady || b.loaded == [2]int64{h.Ledger.LastID, h.Receipts.LastID} {
		return nil
	}
	if err := b.b.SaveHead(ctx, schema.ChainHead{LedgerID: h.Ledger.LastID, LedgerHash: h.Ledger.LastHash,
		ReceiptID: h.Receipts.LastID, ReceiptHash: h.Receipts.LastHash}); err != nil {
		return fmt.Errorf("save chain head: %w", err)
	}
	return nil
}

// isolated applies op inside a savepoint, so a failing op undoes only its own
// writes: opErr is op's error. txErr means the savepoint itself failed, so the
// op's writes may still be in the transaction and it must not commit.
func (b *Tx) isolated(ctx context.Context, op Op) (opErr, txErr error) {
	saved, savedReady, mark := b.head, b.headReady, b.usage.Mark()
	pushed := 0
	if b.push != nil {
		pushed = b.push.Mark()
	}
	opErr, txErr = b.b.Isolated(ctx, func() error { return op.Apply(ctx, b) })
	if opErr != nil {
		// The savepoint undid the op's receipts and rows; the head it
		// advanced in memory, the totals it added to, and the pushes it
		// wrote, go back with them.
		b.head, b.headReady = saved, savedReady
		if b.push != nil {
			b.push.Undo(pushed)
		}
		if !b.usage.Undo(mark) {
			return opErr, errors.New("an op that rebuilt the usage state failed: the batch is abandoned")
		}
	}
	return opErr, txErr
}
