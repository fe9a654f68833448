package custody

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// The writer benchmarks run on a real SQLite file with synchronous=FULL, so
// every commit pays a real fsync: ns/op and allocs/op are per delivery. With
// HOOKLEDGER_TEST_BACKEND=postgres they run on a fresh database of the
// server HOOKLEDGER_TEST_POSTGRES names instead (cpu-ns/op is then this
// process's share only: the server's work is in its own processes).
//
//	go test -run '^$' -bench Writer -benchmem ./custody/

func benchWriter(b *testing.B) *Writer {
	b.Helper()
	path := filepath.Join(b.TempDir(), schema.FileName)
	if os.Getenv("HOOKLEDGER_TEST_BACKEND") == "postgres" {
		path = benchPostgres(b)
	}
	db, err := schema.Open(context.Background(), path, schema.Options{})
	if err != nil {
		b.Fatal(err)
	}
	w := NewWriter(db)
	if err := w.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		w.Close()
		db.Close()
	})
	return w
}

var benchMapper = ledger.NewMapper([]ledger.Mapping{{
	Type:     "usage.recorded",
	Customer: ledger.Field{Path: "data.customer"},
	Meter:    ledger.Field{Path: "data.meter"},
	Quantity: ledger.Field{Path: "data.quantity"},
}}, nil)

// benchPostgres creates a database on the HOOKLEDGER_TEST_POSTGRES server
// for one benchmark and drops it afterwards (testenv.PostgresDatabase, which
// this package's internal tests cannot import).
func benchPostgres(b *testing.B) string {
	server := os.Getenv("HOOKLEDGER_TEST_POSTGRES")
	if server == "" {
		b.Fatal("HOOKLEDGER_TEST_BACKEND=postgres needs HOOKLEDGER_TEST_POSTGRES")
	}
	name := fmt.Sprintf("hookledger_bench_%d", time.Now().UnixNano())
	dsn, err := schema.CreatePostgresDatabase(context.Background(), server, name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { schema.DropPostgresDatabase(context.Background(), server, name) })
	return dsn
}

// benchDelivery is a classified delivery as the handler would submit it.
func benchDelivery(id string, now time.Time) *Delivery {
	body := fmt.Appendf(nil, `{"id":%q,"type":"usage.recorded","data":{"customer":"cus_%d","meter":"api_requests","quantity":12.5}}`,
		id, len(id)%100)
	sum := sha256.Sum256(body)
	age := 40 * time.Millisecond
	d := &Delivery{
		Provider:         "default",
		EventID:          id,
		EventType:        "usage.recorded",
		Body:             body,
		BodySHA256:       sum[:],
		SignatureHeaders: "Webhook-Id: " + id + "\nWebhook-Timestamp: 1764000000\nWebhook-Signature: v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=\n",
		Source:           SourceWebhook,
		HandlerVersion:   "hookledger/bench",
		ReceivedAt:       now,
		Attempt: Attempt{RemoteAddr: "127.0.0.1:50000", UserAgent: "bench", RequestID: "0123456789abcdef",
			SignatureAge: &age, StatusCode: 200},
	}
	d.Classify(benchMapper)
	return d
}

// BenchmarkWriterBatch commits batches of a fixed size straight through the
// writer's batch path (one transaction per batch): the cost of the
// SQL per delivery and how one fsync is shared.
func BenchmarkWriterBatch(b *testing.B) {
	for _, size := range []int{1, 10, 32, 128} {
		b.Run(fmt.Sprintf("new/size=%d", size), func(b *testing.B) {
			w := benchWriter(b)
			benchCommit(b, w, size, benchJobs(b.N, 0))
		})
	}
	// As serve runs: the usage state built (serve builds it at start) and
	// the deliveries spread over 100 customers.
	b.Run("state/size=32", func(b *testing.B) {
		w := benchWriter(b)
		if _, err := w.BuildUsageState(context.Background(), "UTC"); err != nil {
			b.Fatal(err)
		}
		jobs := benchJobs(b.N, 0)
		for i, j := range jobs {
			d := benchDelivery(fmt.Sprintf("evt_%09d", i), time.Now())
			d.Body = fmt.Appendf(nil, `{"id":"evt_%09d","type":"usage.recorded","data":{"customer":"cus_%d","meter":"api_requests","quantity":12.5}}`, i, i%100)
			d.Classify(benchMapper)
			j.op = d
		}
		benchCommit(b, w, 32, jobs)
	})
	// Every delivery repeats one already stored: the duplicate path.
	b.Run("duplicates/size=32", func(b *testing.B) {
		w := benchWriter(b)
		const size = 32
		w.commit(benchJobs(size, 0))
		jobs := benchJobs(b.N, 0)
		for i, j := range jobs {
			j.op = benchDelivery(fmt.Sprintf("evt_%09d", i%size), time.Now())
		}
		benchCommit(b, w, size, jobs)
		if d := jobs[0].op.(*Delivery); d.Outcome != OutcomeDuplicate {
			b.Fatalf("outcome %s, want duplicate", d.Outcome)
		}
	})
}

// benchJobs builds n deliveries with distinct event ids before the clock starts.
func benchJobs(n, from int) []*job {
	now := time.Now()
	jobs := make([]*job, n)
	for i := range jobs {
		jobs[i] = &job{op: benchDelivery(fmt.Sprintf("evt_%09d", from+i), now), reply: make(chan error, 1)}
	}
	return jobs
}

// benchCommit commits jobs in batches of size; ns/op and allocs/op are per
// delivery. cpu-ns/op is the process's CPU time per delivery, which other load
// on the machine disturbs far less than wall time.
func benchCommit(b *testing.B, w *Writer, size int, jobs []*job) {
	b.ReportAllocs()
	cpu0 := cpuTime()
	defer func() { b.ReportMetric(float64(cpuTime()-cpu0)/float64(len(jobs)), "cpu-ns/op") }()
	b.ResetTimer()
	for i := 0; i < len(jobs); i += size {
		batch := jobs[i:min(i+size, len(jobs))]
		w.commit(batch)
		for _, j := range batch {
			if err := <-j.reply; err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkWriterSubmit is the group commit under concurrency: 32 goroutines
// per core submit deliveries and wait for their commit, as handlers do.
func BenchmarkWriterSubmit(b *testing.B) {
	w := benchWriter(b)
	now := time.Now()
	var seq atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			d := benchDelivery(fmt.Sprintf("evt_%09d", seq.Add(1)), now)
			if err := w.Submit(context.Background(), d); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
