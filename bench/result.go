package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Result summarises a run. Latencies are in milliseconds.
type Result struct {
	URL         string  `json:"url"`
	Requests    int     `json:"requests"`
	Events      int     `json:"events"`
	Duplicates  int     `json:"duplicates"`
	Connections int     `json:"connections"`
	Seconds     float64 `json:"seconds"`
	RPS         float64 `json:"requests_per_second"`
	// Batch is the events per request of a run against the ingest API (0: webhooks).
	Batch int `json:"batch,omitempty"`
	// EventsPerSecond counts the deliveries (events and duplicates) in
	// requests answered 2xx: each was durable when its answer came.
	EventsPerSecond float64 `json:"events_per_second"`
	Latency         Latency `json:"latency_ms"`
	// LoadCPUPerRequest is the load generator's own CPU time (user and
	// system) per request during the timed run, in microseconds: on a machine
	// it shares with the receiver, what the load itself costs. 0 where the
	// platform does not report it.
	LoadCPUPerRequest float64        `json:"load_cpu_us_per_request,omitempty"`
	Status            map[string]int `json:"status"` // HTTP status code, or "error" for a transport failure
	FirstError        string         `json:"first_error,omitempty"`
	Verify            *Report        `json:"verify,omitempty"`
}

// Latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// OK reports whether every request was answered 2xx.
func (r *Result) OK() bool {
	for code, n := range r.Status {
		if n > 0 && !strings.HasPrefix(code, "2") {
			return false
		}
	}
	return true
}

func summarize(p *Plan, latency []time.Duration, status []int, elapsed time.Duration) Result {
	r := Result{
		URL:         p.URL,
		Requests:    len(latency),
		Batch:       p.Batch,
		Events:      len(p.Events),
		Duplicates:  len(p.deliveries) - len(p.Events),
		Connections: p.Connections,
		Seconds:     elapsed.Seconds(),
		RPS:         float64(len(latency)) / elapsed.Seconds(),
		Status:      map[string]int{},
	}
	for _, code := range status {
		key := "error"
		if code != 0 {
			key = strconv.Itoa(code)
		}
		r.Status[key]++
	}
	r.Latency = latencyOf(slices.Clone(latency))
	return r
}

// latencyOf summarises ds, which it sorts.
func latencyOf(ds []time.Duration) Latency {
	slices.Sort(ds)
	return Latency{P50: ms(Percentile(ds, 50)), P90: ms(Percentile(ds, 90)), P99: ms(Percentile(ds, 99)), Max: ms(Percentile(ds, 100))}
}

// Percentile returns the nearest-rank percentile p (0 < p <= 100) of sorted.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p/100*float64(len(sorted)) + 0.999999)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// WriteText prints r for a person.
func (r *Result) WriteText(w io.Writer) {
	fmt.Fprintf(w, "%s\n", r.URL)
	if r.Batch > 0 {
		fmt.Fprintf(w, "  requests     %d of up to %d events (%d events + %d duplicates) over %d connections in %.2fs\n",
			r.Requests, r.Batch, r.Events, r.Duplicates, r.Connections, r.Seconds)
	} else {
		fmt.Fprintf(w, "  requests     %d (%d events + %d duplicates) over %d connections in %.2fs\n",
			r.Requests, r.Events, r.Duplicates, r.Connections, r.Seconds)
	}
	fmt.Fprintf(w, "  throughput   %.0f requests/s, %.0f durable events/s\n", r.RPS, r.EventsPerSecond)
	fmt.Fprintf(w, "  latency      p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n",
		r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max)
	if r.LoadCPUPerRequest > 0 {
		fmt.Fprintf(w, "  load CPU     %.0f µs per request (this load generator's own user+system time)\n", r.LoadCPUPerRequest)
	}
	codes := make([]string, 0, len(r.Status))
	for code := range r.Status {
		codes = append(codes, code)
	}
	slices.Sort(codes)
	parts := make([]string, len(codes))
	for i, code := range codes {
		parts[i] = fmt.Sprintf("%s: %d", code, r.Status[code])
	}
	fmt.Fprintf(w, "  status       %s\n", strings.Join(parts, ", "))
	if r.FirstError != "" {
		fmt.Fprintf(w, "  first error  %s\n", r.FirstError)
	}
	if v := r.Verify; v != nil {
		verdict := "OK"
		if !v.OK() {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "  verify       %s: %d/%d events in the ledger exactly once, quantities match; "+
			"%d receipts, %d attempts (%d inserted, %d duplicate); duplicates added %d rows\n",
			verdict, v.ExactlyOnce, v.Events, v.Receipts, v.Attempts, v.Inserted, v.Duplicate, v.ExtraRows)
		for _, p := range v.Problems {
			fmt.Fprintf(w, "    - %s\n", p)
		}
	}
}
