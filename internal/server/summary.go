package server

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookledger/hookledger/receiver"
)

// DefaultLogSummary is how often serve logs its deliveries as one line per
// provider (--log-summary): the per-delivery lines are at debug, so the log
// grows with time, not traffic.
const DefaultLogSummary = time.Minute

// deliverySummary counts the deliveries of each provider between two of its
// lines: what arrived, what was stored (and stored failed: a mapping to
// fix), what was refused and why, and how long the replies took (p99 and
// the slowest).
type deliverySummary struct {
	mu    sync.Mutex
	now   map[string]*providerTally
	began time.Time // of what now counts
}

type providerTally struct {
	requests int
	outcomes map[string]int // inserted, duplicate, payload_mismatch, rejected, …
	failed   int            // new receipts stored failed (their mapping did not apply)
	reasons  map[string]int // why deliveries were rejected
	slowest  time.Duration
	latency  [latencyBuckets]int
}

// The replies' latencies are counted in buckets growing by a quarter from
// 100 µs (the last one holds everything above 90 s): the p99 a summary
// logs is its bucket's upper bound, at most a quarter above the true one,
// in constant memory however many deliveries a minute holds.
const (
	latencyBuckets = 64
	latencyFirst   = 100 * time.Microsecond
	latencyGrowth  = 1.25
)

// bucketOf is the bucket of d.
func bucketOf(d time.Duration) int {
	b, bound := 0, float64(latencyFirst)
	for b < latencyBuckets-1 && float64(d) > bound {
		b++
		bound *= latencyGrowth
	}
	return b
}

// p99 is the upper bound of the bucket holding the 99th percentile.
func (t *providerTally) p99() time.Duration {
	want, seen, bound := (t.requests*99+99)/100, 0, float64(latencyFirst)
	for b := range t.latency {
		if seen += t.latency[b]; seen >= want {
			return min(time.Duration(bound), t.slowest)
		}
		bound *= latencyGrowth
	}
	return t.slowest
}

// Observe counts one delivery (receiver.Server.Observe).
func (s *deliverySummary) Observe(o receiver.Observation) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.now == nil {
		s.now = map[string]*providerTally{}
	}
	if s.began.IsZero() {
		s.began = time.Now()
	}
	t := s.now[o.Provider]
	if t == nil {
		t = &providerTally{outcomes: map[string]int{}, reasons: map[string]int{}}
		s.now[o.Provider] = t
	}
	t.requests++
	t.outcomes[o.Outcome]++
	if o.Stored == "failed" {
		t.failed++
	}
	if o.Reason != "" {
		t.reasons[o.Reason]++
	}
	t.slowest = max(t.slowest, o.Latency)
	t.latency[bucketOf(o.Latency)]++
}

// flush logs what was counted since the first delivery after the last
// flush (since), one line per provider that had deliveries: at info, or at warn when some were rejected (an
// operator at warn still sees refusals, summed).
func (s *deliverySummary) flush(log *slog.Logger) {
	s.mu.Lock()
	counted, began := s.now, s.began
	s.now, s.began = nil, time.Time{}
	s.mu.Unlock()
	for _, provider := range slices.Sorted(maps.Keys(counted)) {
		t := counted[provider]
		attrs := []any{"provider", provider, "since", began.UTC().Format(time.RFC3339), "requests", t.requests}
		for _, o := range slices.Sorted(maps.Keys(t.outcomes)) {
			attrs = append(attrs, o, t.outcomes[o])
		}
		if t.failed > 0 {
			attrs = append(attrs, "failed", t.failed)
		}
		level := slog.LevelInfo
		if len(t.reasons) > 0 {
			level = slog.LevelWarn
			attrs = append(attrs, "reasons", reasonText(t.reasons))
		}
		attrs = append(attrs, "p99_ms", float64(t.p99().Microseconds())/1000, "slowest_ms", float64(t.slowest.Microseconds())/1000)
		log.Log(context.Background(), level, "deliveries", attrs...)
	}
}

// reasonText is "bad_signature:3 queue_full:1", the most frequent first.
func reasonText(reasons map[string]int) string {
	keys := slices.SortedFunc(maps.Keys(reasons), func(a, b string) int {
		return cmp.Or(cmp.Compare(reasons[b], reasons[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s:%d", k, reasons[k])
	}
	return strings.Join(parts, " ")
}

// startSummary logs s every interval until stop, which logs what the last,
// partial, interval counted. interval 0: never (stop does nothing).
func startSummary(log *slog.Logger, s *deliverySummary, every time.Duration) (stop func()) {
	if every <= 0 {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.flush(log)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
		s.flush(log)
	}
}
