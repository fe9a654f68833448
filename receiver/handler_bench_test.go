package receiver_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/scheme"
)

// The handler benchmark runs on a real SQLite file with synchronous=FULL, so
// every commit pays a real fsync: ns/op and allocs/op are per delivery.
//
//	go test -run '^$' -bench ServeWebhook -benchmem ./receiver/

func benchWriter(b *testing.B) *custody.Writer {
	b.Helper()
	return testenv.New(b, testenv.Options{NoServer: true, RealTime: true}).Writer
}

var benchMapper = ledger.NewMapper([]ledger.Mapping{{
	Type:     "usage.recorded",
	Customer: ledger.Field{Path: "data.customer"},
	Meter:    ledger.Field{Path: "data.meter"},
	Quantity: ledger.Field{Path: "data.quantity"},
}}, nil)

// cpuTime is the process's user+system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkServeWebhook is the whole request path in one process — signature
// check, parsing, logging, the writer and its commit — without the network:
// 32 goroutines per core post signed deliveries to the handler. cpu-ns/op is
// the process's CPU time per delivery.
func BenchmarkServeWebhook(b *testing.B) {
	w := benchWriter(b)
	var batches, items, commitNs atomic.Int64
	w.AfterBatch = func(size int, commit time.Duration) {
		batches.Add(1)
		items.Add(int64(size))
		commitNs.Add(int64(commit))
	}
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	sch, err := scheme.New("standard", scheme.HMACOptions{})
	if err != nil {
		b.Fatal(err)
	}
	key, err := sch.Key(secret)
	if err != nil {
		b.Fatal(err)
	}
	p := &receiver.Provider{Name: "default", Scheme: sch, Keys: [][]byte{key}, Tolerance: 5 * time.Minute, MaxBody: 256 << 10}
	srv := &receiver.Server{
		Providers:      map[string]*receiver.Provider{"default": p},
		Mapper:         benchMapper,
		Custody:        w,
		HandlerVersion: "hookledger/bench",
		Log:            slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Now:            time.Now,
	}
	mux := http.NewServeMux()
	srv.Routes(mux)

	// Sign every delivery before the clock starts.
	now := time.Now()
	type signed struct {
		h    http.Header
		body []byte
	}
	reqs := make([]signed, b.N)
	for i := range reqs {
		id := fmt.Sprintf("evt_%09d", i)
		body := fmt.Appendf(nil, `{"id":%q,"type":"usage.recorded","data":{"customer":"cus_%d","meter":"api_requests","quantity":12.5}}`, id, i%100)
		h := http.Header{"Content-Type": {"application/json"}}
		p.Scheme.Sign(h, body, p.Keys[0], id, "usage.recorded", now)
		reqs[i] = signed{h, body}
	}
	var next atomic.Int64
	b.SetParallelism(32)
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s := reqs[next.Add(1)-1]
			r := httptest.NewRequest(http.MethodPost, "/webhooks/default", bytes.NewReader(s.body))
			r.Header = s.h
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				b.Errorf("status %d: %s", rec.Code, rec.Body)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(items.Load())/float64(batches.Load()), "items/batch")
	b.ReportMetric(float64(commitNs.Load())/float64(batches.Load())/1e6, "commit-ms")
}
