package server

import (
	"log/slog"
	"sync"
	"time"

	"github.com/hookledger/hookledger/metrics"
)

// rateLimitedLog paces the log lines of a condition that can recur many times
// a second (a full disk fails every commit; a dead replica every attempt):
// the first occurrence is logged at once, then at most one line per Every,
// each carrying how many occurrences it stands for. The journal stays
// readable and the condition stays visible for as long as it lasts.
type rateLimitedLog struct {
	Every time.Duration
	Now   func() time.Time // default time.Now

	mu    sync.Mutex
	since time.Time // first occurrence since the condition last cleared; zero while clear
	last  time.Time // last line
	n     int       // occurrences not yet reported by a line
	total int       // occurrences since the condition began
}

func (l *rateLimitedLog) now() time.Time {
	if l.Now != nil {
		return l.Now()
	}
	return time.Now()
}

// Allow records one occurrence. ok says to log a line now; n is the number
// of occurrences that line stands for (this one and those suppressed since
// the previous line), since when the condition began.
func (l *rateLimitedLog) Allow() (n int, since time.Time, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.since.IsZero() {
		l.since = now
	}
	l.n++
	l.total++
	if !l.last.IsZero() && now.Sub(l.last) < l.Every {
		return 0, l.since, false
	}
	n, l.n, l.last = l.n, 0, now
	return n, l.since, true
}

// Recover clears the condition. was says it was holding; total counts its
// occurrences, since when it began. The next occurrence is logged at once.
func (l *rateLimitedLog) Recover() (total int, since time.Time, was bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.since.IsZero() {
		return 0, time.Time{}, false
	}
	total, since = l.total, l.since
	l.since, l.last, l.n, l.total = time.Time{}, time.Time{}, 0, 0
	return total, since, true
}

// storageErrorLogEvery rate-limits the ERROR line for storage failures.
const storageErrorLogEvery = 10 * time.Second

// storageErrorLog is serve's custody.Writer.OnStorageError: every failure
// is counted (hookledger_storage_errors_total{op}) and logged at ERROR, at
// most one line per storageErrorLogEvery with the number of failures since
// the previous line; the first commit after a run of failures logs the
// recovery. Without it a full disk shows only as INFO delivery lines with a
// 503 each.
type storageErrorLog struct {
	log   *slog.Logger
	met   *metrics.Metrics
	limit rateLimitedLog
}

func newStorageErrorLog(log *slog.Logger, met *metrics.Metrics) *storageErrorLog {
	return &storageErrorLog{log: log, met: met, limit: rateLimitedLog{Every: storageErrorLogEvery}}
}

// Observe records one storage failure.
func (s *storageErrorLog) Observe(op string, err error) {
	s.met.StorageError(op)
	if n, since, ok := s.limit.Allow(); ok {
		s.log.Error("storage error: deliveries get 503 (their senders retry) until it clears; check free disk space and the disk",
			"op", op, "error", err.Error(), "errors_since_last_line", n, "failing_since", since.UTC().Format(time.RFC3339))
	}
}

// Committed records a successful commit, which ends a run of failures.
func (s *storageErrorLog) Committed() {
	if n, since, was := s.limit.Recover(); was {
		s.log.Info("storage recovered: commits succeed again", "errors", n, "failed_for", time.Since(since).Round(time.Millisecond).String())
	}
}
