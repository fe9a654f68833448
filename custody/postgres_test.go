package custody_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

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
