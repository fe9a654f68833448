package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/metrics"
)

// A burst of storage errors gives one ERROR line per interval, each with the
// number of errors it stands for; every error is counted in the metric; the
// first commit afterwards logs the recovery, and the next failure is logged
// at once again. (The failure itself is real in
// custody.TestFullDatabaseIsAStorageError; here the clock is.)
func TestStorageErrorsAreRateLimitedAndCounted(t *testing.T) {
	var buf bytes.Buffer
	met := metrics.New(metrics.Options{})
	s := newStorageErrorLog(slog.New(slog.NewJSONHandler(&buf, nil)), met)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	s.limit.Now = func() time.Time { return now }
	full := errors.New("insert receipt default/evt_1: database or disk is full (13)")

	lines := func() []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if l != "" && json.Unmarshal([]byte(l), &m) == nil {
				out = append(out, m)
			}
		}
		return out
	}
	for range 50 { // one burst, within one interval
		s.Observe("delivery", full)
		now = now.Add(100 * time.Millisecond)
	}
	if got := lines(); len(got) != 1 || got[0]["level"] != "ERROR" || got[0]["errors_since_last_line"] != 1.0 ||
		!strings.Contains(got[0]["error"].(string), "disk is full") || got[0]["op"] != "delivery" {
		t.Fatalf("after a burst of 50 within %v: %v; want one ERROR line for the first", storageErrorLogEvery, got)
	}
	now = now.Add(storageErrorLogEvery)
	s.Observe("commit", full)
	got := lines()
	if len(got) != 2 || got[1]["errors_since_last_line"] != 50.0 {
		t.Fatalf("the next line: %v; want it to carry the 50 errors since the first line", got)
	}
	counted := func(op string) float64 {
		mfs, err := met.Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "hookledger_storage_errors_total" {
				continue
			}
			for _, m := range mf.Metric {
				if m.Label[0].GetValue() == op {
					return m.Counter.GetValue()
				}
			}
		}
		t.Fatalf("no hookledger_storage_errors_total{op=%q}", op)
		return 0
	}
	if d, c, b := counted("delivery"), counted("commit"), counted("begin"); d != 50 || c != 1 || b != 0 {
		t.Errorf("hookledger_storage_errors_total: delivery %v, commit %v, begin %v; want 50, 1, 0", d, c, b)
	}

	s.Committed()
	got = lines()
	if len(got) != 3 || got[2]["level"] != "INFO" || got[2]["errors"] != 51.0 {
		t.Fatalf("after a commit: %v; want an INFO recovery line counting 51 errors", got[len(got)-1])
	}
	s.Committed() // nothing to recover from: no line
	now = now.Add(time.Second)
	s.Observe("delivery", full) // a new failure is logged at once
	if got = lines(); len(got) != 4 || got[3]["level"] != "ERROR" || got[3]["errors_since_last_line"] != 1.0 {
		t.Fatalf("a failure after recovery: %v; want an ERROR line at once", got[len(got)-1])
	}
}
