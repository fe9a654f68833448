package custody_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
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
	var inserted, scanned int
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		inserted = e.Int(`SELECT n_tup_ins FROM pg_stat_user_tables WHERE relname = 'receipts'`)
		scanned = e.Int(`SELECT seq_tup_read FROM pg_stat_user_tables WHERE relname = 'receipts'`)
		if inserted == n {
			break
		}
	}
	if inserted != n {
		t.Fatalf("the statistics show %d receipts inserted, want %d", inserted, n)
	}
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
	e.Exec(`CREATE FUNCTION refuse_msg_3() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.event_id = 'msg_3' THEN RAISE EXCEPTION 'injected: msg_3 is refused'; END IF;
			RETURN NEW;
		END $$`)
	e.Exec(`CREATE TRIGGER refuse_msg_3 BEFORE INSERT ON receipts FOR EACH ROW EXECUTE FUNCTION refuse_msg_3()`)
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
