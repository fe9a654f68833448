package custody_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// On a new PostgreSQL database the writer finds a batch's stored receipts
// through the unique index, however many receipts it writes before the
// server first analyzes the table. A statement prepared while receipts was
// empty kept a plan that read the whole table for every batch (a hash join
// over a sequential scan): throughput fell with every receipt stored, to
// half within 15,000, until autovacuum's first ANALYZE a minute or more
// later.
func TestPostgresWriterReadsNoReceiptsBySequentialScan(t *testing.T) {
	e := newEnv(t, "postgres")
	const n = 2000
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 { // concurrent senders, so batches hold several receipts
		wg.Go(func() {
			for i := range work {
				id := fmt.Sprintf("evt_%05d", i%n) // the last 10% repeat earlier events
				if r := e.Send(id, testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
					t.Errorf("%s: %d %+v", id, r.Code, r.Body)
				}
			}
		})
	}
	for i := range n + n/10 {
		work <- i
	}
	close(work)
	wg.Wait()

	// The writer's connection reports its table statistics as it closes.
	e.Reopen()
	inserted := func() int { return e.Int(`SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'receipts'`) }
	await.Eventually(t, 10*time.Second, fmt.Sprintf("the statistics showing %d receipts inserted", n), func() bool { return inserted() == n })
	scanned := e.Int(`SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'receipts'`)
	if scanned > n {
		t.Errorf("%d receipts were read by sequential scans while %d were written: the writer's lookup is scanning the table", scanned, n)
	}
}

// On PostgreSQL a batch's inserts are held back and sent with its COMMIT.
// When they fail (here a trigger refuses one receipt) nothing commits, and
// the batch runs again one delivery at a time: the one at fault gets 503,
// the others are stored once, on an unbroken chain.
func TestPostgresFailedHeldBackWritesFailOnlyTheirDelivery(t *testing.T) {
	var batches []int
	var mu sync.Mutex
	e := newEnvWithWriter(t, "postgres", func(w *custody.Writer) {
		w.AfterBatch = func(size int, _ time.Duration) {
			mu.Lock()
			batches = append(batches, size)
			mu.Unlock()
		}
	})
	refuseMsg3(e)
	sixInOneBatch(t, e, func(*custody.Delivery) error { return nil })
	if n := e.Int(`SELECT count(*) FROM receipts WHERE event_id = 'msg_3'`); n != 0 {
		t.Errorf("%d receipts for the refused delivery", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(batches) == 0 || batches[len(batches)-1] < 5 {
		t.Errorf("committed batches %v: the five were not committed together after the retry", batches)
	}
}

// refuseMsg3 makes PostgreSQL refuse msg_3's receipt: a trigger raises.
func refuseMsg3(e *env) {
	e.Exec(`CREATE FUNCTION refuse_msg_3() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.event_id = 'msg_3' THEN RAISE EXCEPTION 'injected: msg_3 is refused'; END IF;
			RETURN NEW;
		END $$`)
	e.Exec(`CREATE TRIGGER refuse_msg_3 BEFORE INSERT ON receipts FOR EACH ROW EXECUTE FUNCTION refuse_msg_3()`)
}

// An op that runs a statement of its own first sends the writes the batch
// held back for the ops before it. When those fail the op is not at fault:
// the batch runs again one op at a time, the refused delivery gets 503 and
// the op commits.
func TestPostgresFailedHeldBackWritesAreNotTheNextOpsFault(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, "postgres")
	refuseMsg3(e)
	entered, release := make(chan struct{}), make(chan struct{})
	e.Writer.SetTestHook(func(d *custody.Delivery) error {
		if d.EventID == "msg_0" { // alone in its batch, applied once
			close(entered)
			<-release
		}
		return nil
	})
	releaseWriter := sync.OnceFunc(func() { close(release) })
	defer releaseWriter()
	body := testenv.UsageBody("cus_1", "m", "1")
	held, refused := make(chan int, 1), make(chan int, 1)
	goSend(e, "msg_0", body, held)
	awaitSignal(t, "msg_0 holds the writer", entered, held)
	goSend(e, "msg_3", body, refused)
	await.Eventually(t, 5*time.Second, "msg_3 is queued", func() bool { return e.Writer.Depth() >= 1 })
	opErr := make(chan error, 1)
	go func() {
		opErr <- e.Writer.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
			_, err := tx.Stripe().LastStripeCustomer(ctx, "cus_1") // a statement: msg_3's receipt is sent first
			return err
		}))
	}()
	await.Eventually(t, 5*time.Second, "the op is queued behind msg_3", func() bool { return e.Writer.Depth() >= 2 })
	releaseWriter()
	if c := recvCode(t, held); c != 200 {
		t.Errorf("msg_0: %d, want 200", c)
	}
	if c := recvCode(t, refused); c != 503 {
		t.Errorf("msg_3: %d, want 503", c)
	}
	select {
	case err := <-opErr:
		if err != nil {
			t.Errorf("the op after msg_3 failed: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the op got no reply")
	}
	if got := e.Rows(); got != [3]int{1, 1, 1} {
		t.Errorf("receipts, attempts, usage = %v, want [1 1 1]", got)
	}
}

// A PostgreSQL restart or failover ends the writer's connection: the batch
// on it fails (503, nothing stored) and the next one runs on a new
// connection, so a sender's retry is stored once.
func TestPostgresWriterReconnects(t *testing.T) {
	e := newEnv(t, "postgres")
	send := func(id string) int {
		return e.Send(id, testenv.UsageBody("cus_1", "api_requests", "1")).Code
	}
	if c := send("evt_before"); c != 200 {
		t.Fatalf("before: %d", c)
	}
	if n := e.Int(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`); n == 0 {
		t.Fatal("no connection of the writer's to end")
	}
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		codes := []int{send(id)}
		for try := 0; codes[len(codes)-1] != 200 && try < 3; try++ {
			codes = append(codes, send(id))
		}
		if codes[len(codes)-1] != 200 || len(codes) > 2 {
			t.Errorf("%s: answers %v, want 200 at the first retry at the latest", id, codes)
		}
	}
	if got := e.Rows(); got != [3]int{4, 4, 4} {
		t.Errorf("receipts, attempts, usage = %v, want [4 4 4]", got)
	}
}

// A connection that breaks once the commit's round trip has gone out leaves
// the outcome unknown: the server may have committed. The writer then
// reports a storage error (the senders retry; a delivery's retry is a
// duplicate) and must not run the batch again, which would apply an
// adjustment twice. The proxy here passes everything between the writer and
// PostgreSQL, but, once armed, cuts the connection instead of passing the
// server's reply to a COMMIT.
func TestPostgresCommitWithUnknownOutcomeRunsOnce(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.PostgresDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := startCutProxy(t, u.Host)
	u.Host = p.addr
	db, err := schema.Open(ctx, u.String(), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w := custody.NewWriter(db)
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	adjust := custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		a := ledger.Adjustment{Customer: "cus_1", Meter: "api_requests", Quantity: ledger.TotalOf(1_000_000), Reason: "credit"}
		r, err := a.Row(ctx, tx.Refs(), tx.Now())
		if err != nil {
			return err
		}
		return tx.Append(ctx, r)
	})
	if err := w.Submit(ctx, adjust); err != nil {
		t.Fatal(err)
	}
	p.armed.Store(true)
	if err := w.Submit(ctx, adjust); err == nil {
		t.Error("a commit whose reply never came was reported as a success")
	}
	if p.armed.Load() {
		t.Fatal("the proxy never saw the COMMIT's reply")
	}
	if err := w.Submit(ctx, adjust); err != nil { // the writer goes on, on a new connection
		t.Fatal(err)
	}
	var rows int
	if err := db.Read.GetContext(ctx, &rows, `SELECT count(*) FROM metered_usage`); err != nil {
		t.Fatal(err)
	}
	if rows != 3 {
		t.Errorf("%d adjustment rows for three submitted (the cut one committed), want 3", rows)
	}
	rep, err := invoice.Verify(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if p := rep.First(); p != nil {
		t.Errorf("verify: %+v", *p)
	}
}

// cutProxy forwards TCP connections to a PostgreSQL server; armed, it cuts
// the first connection whose server side sends a COMMIT's CommandComplete.
type cutProxy struct {
	addr  string
	armed atomic.Bool
}

func startCutProxy(t *testing.T, server string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &cutProxy{addr: ln.Addr().String()}
	commit := []byte("C\x00\x00\x00\x0bCOMMIT\x00")
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer client.Close()
				upstream, err := net.Dial("tcp", server)
				if err != nil {
					return
				}
				defer upstream.Close()
				go io.Copy(upstream, client)
				buf := make([]byte, 64<<10)
				for {
					n, err := upstream.Read(buf)
					if n > 0 && bytes.Contains(buf[:n], commit) && p.armed.CompareAndSwap(true, false) {
						return // the reply is lost with the connection
					}
					if n > 0 {
						if _, werr := client.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return p
}
