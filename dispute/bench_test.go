package dispute

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
)

// benchEvents is the size of the benchmarked customer month: a busy
// customer's invoice line, every event with its receipt, one attempt in ten
// a retry.
const benchEvents = 2000

// seedBench writes benchEvents signed events for cus_1 in October through the
// writer (the apply path the HTTP handler uses, without HTTP), then closes
// October.
func seedBench(b *testing.B) *env {
	e := newEnv(b)
	p := e.Server.Providers["default"]
	submit := func(id string, body []byte, at time.Time) {
		h := http.Header{}
		p.Scheme.Sign(h, body, p.Keys[0], id, "", at)
		sum := sha256.Sum256(body)
		d := &custody.Delivery{Provider: "default", EventID: id, EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
			SignatureHeaders: fmt.Sprintf("Webhook-Id: %s\nWebhook-Timestamp: %s\nWebhook-Signature: %s\n",
				h.Get("Webhook-Id"), h.Get("Webhook-Timestamp"), h.Get("Webhook-Signature")),
			Source: custody.SourceWebhook, HandlerVersion: "bench", ReceivedAt: at,
			Attempt: custody.Attempt{RemoteAddr: "203.0.113.7:443", UserAgent: "Svix-Webhooks/1.0", StatusCode: 200}}
		d.Classify(e.Server.Mapper)
		if err := e.Writer.Submit(context.Background(), d); err != nil {
			b.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range benchEvents {
		id := fmt.Sprintf("msg_%05d", i)
		at := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * 20 * time.Minute)
		body := body("default", id, "cus_1", "api_requests", "1", at.Format(time.RFC3339))
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			submit(id, body, at)
			if i%10 == 0 {
				submit(id, body, at.Add(time.Minute)) // a retry: a duplicate attempt
			}
		}()
	}
	wg.Wait()
	e.Clock.Set(time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC))
	e.close("2026-10")
	return e
}

func BenchmarkTraceInvoiceLine(b *testing.B) {
	e := seedBench(b)
	tracer := e.tracer(nil)
	b.ResetTimer()
	for b.Loop() {
		tr, err := tracer.Trace(context.Background(), "invoice:1/1")
		if err != nil || len(tr.Rows) != benchEvents || tr.Summary.Bodies.Valid != benchEvents {
			b.Fatalf("%v: %d rows", err, len(tr.Rows))
		}
	}
	b.ReportMetric(float64(benchEvents), "events/op")
}

func BenchmarkTraceCustomerMonth(b *testing.B) {
	e := seedBench(b)
	tracer := e.tracer(nil)
	oct, _ := ledger.MonthPeriod("2026-10", time.UTC)
	b.ResetTimer()
	for b.Loop() {
		if _, err := tracer.Customer(context.Background(), "cus_1", oct); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchEvents), "events/op")
}

// BenchmarkExportBundle is the zip alone, from a trace already built.
func BenchmarkExportBundle(b *testing.B) {
	e := seedBench(b)
	tracer := e.tracer(nil)
	tr, err := tracer.Trace(context.Background(), "invoice:1/1")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := tracer.Verifier.WriteBundle(io.Discard, tr); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchEvents), "events/op")
}

// BenchmarkReferenceVerifyOnly is the same-run reference: re-verifying the
// stored bodies alone (one receipt read and one HMAC each), the floor any
// trace of these events pays.
func BenchmarkReferenceVerifyOnly(b *testing.B) {
	e := seedBench(b)
	v := e.tracer(nil).Verifier
	type rec struct {
		Body    []byte `db:"body"`
		Headers string `db:"signature_headers"`
	}
	b.ResetTimer()
	for b.Loop() {
		var rs []rec
		if err := e.DB.Read.Select(&rs, `SELECT body, signature_headers FROM receipts`); err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if got := v.signature(&stored{provider: "default", body: r.Body}, r.Headers); got.Status != Valid {
				b.Fatal(got)
			}
		}
	}
	b.ReportMetric(float64(benchEvents), "events/op")
}
