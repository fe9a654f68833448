package receiver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/testenv"
)

// BenchmarkServeEvents is the ingest API's request path in one process, the
// network left out: 8 goroutines post batches of 100 generic usage events to
// the handler, which submits each as its own delivery to the real writer on
// a real file (synchronous=FULL). ns/op, allocs/op and cpu-ns/op are per
// event.
//
//	go test -run '^$' -bench ServeEvents -benchmem ./receiver/
func BenchmarkServeEvents(b *testing.B) {
	e := testenv.New(b, testenv.Options{RealTime: true})
	key, _ := e.CreateKey("bench", 0, 0)
	mux := http.NewServeMux()
	e.Server.Routes(mux)
	const size = 100
	bodies := make([][]byte, (b.N+size-1)/size)
	for k := range bodies {
		var evs [][]byte
		for i := k * size; i < min((k+1)*size, b.N); i++ {
			evs = append(evs, fmt.Appendf(nil, `{"id":"evt_%09d","source":"bench","type":"usage.recorded","data":{"customer":"cus_%d","meter":"api_requests","quantity":3}}`, i, i%100))
		}
		bodies[k] = testenv.Batch(evs...)
	}
	var next atomic.Int64
	b.ReportAllocs()
	cpu0 := cpuTime()
	b.ResetTimer()
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for {
				k := int(next.Add(1)) - 1
				if k >= len(bodies) {
					return
				}
				req := httptest.NewRequest(http.MethodPost, "/v1/events", bytes.NewReader(bodies[k]))
				req.Header.Set("Content-Type", ingest.MediaGeneric)
				req.Header.Set("Authorization", "Bearer "+key)
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Errorf("%d %s", rec.Code, rec.Body)
					return
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}
