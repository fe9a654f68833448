package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/receiver"
)

// The summary is one line per provider that had deliveries, with each
// outcome's count, the refusals by reason (most frequent first) and the
// slowest reply; at warn when some were refused. A flush starts a new count,
// and a provider with nothing to say says nothing.
func TestDeliverySummary(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var s deliverySummary
	for _, o := range []receiver.Observation{
		{Provider: "acme", Outcome: "inserted", Code: 200, Latency: 2 * time.Millisecond},
		{Provider: "acme", Outcome: "duplicate", Code: 200, Latency: 9 * time.Millisecond},
		{Provider: "acme", Outcome: "inserted", Stored: "failed", Code: 200, Latency: time.Millisecond},
		{Provider: "shop", Outcome: "rejected", Reason: "bad_signature", Code: 401, Latency: time.Millisecond},
		{Provider: "shop", Outcome: "rejected", Reason: "queue_full", Code: 503, Latency: 3 * time.Millisecond},
		{Provider: "shop", Outcome: "rejected", Reason: "bad_signature", Code: 401, Latency: time.Millisecond},
		{Provider: "shop", Outcome: "inserted", Code: 200, Latency: time.Millisecond},
	} {
		s.Observe(o)
	}
	s.flush(log)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		lines = append(lines, m)
	}
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per provider:\n%s", len(lines), buf.String())
	}
	acme, shop := lines[0], lines[1]
	if acme["provider"] != "acme" || acme["level"] != "INFO" || acme["requests"] != 3.0 || acme["inserted"] != 2.0 ||
		acme["duplicate"] != 1.0 || acme["failed"] != 1.0 || acme["slowest_ms"] != 9.0 || acme["p99_ms"] != 9.0 || acme["reasons"] != nil {
		t.Errorf("acme: %v", acme)
	}
	if shop["provider"] != "shop" || shop["level"] != "WARN" || shop["requests"] != 4.0 || shop["rejected"] != 3.0 ||
		shop["reasons"] != "bad_signature:2 queue_full:1" {
		t.Errorf("shop: %v", shop)
	}
	if _, err := time.Parse(time.RFC3339, acme["since"].(string)); err != nil {
		t.Errorf("since %v: %v", acme["since"], err)
	}
	buf.Reset()
	s.flush(log)
	if buf.Len() != 0 {
		t.Errorf("a flush with nothing counted logged:\n%s", buf.String())
	}
}

// startSummary logs every interval and once more when stopped; 0 never.
func TestStartSummary(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	s := &deliverySummary{}
	stop := startSummary(log, s, 0)
	s.Observe(receiver.Observation{Provider: "acme", Outcome: "inserted"})
	stop()
	if buf.Len() != 0 {
		t.Errorf("--log-summary 0 logged:\n%s", buf.String())
	}
	stop = startSummary(log, s, time.Hour)
	stop() // the partial interval: acme's one delivery, counted before
	if !strings.Contains(buf.String(), "msg=deliveries provider=acme") || !strings.Contains(buf.String(), "requests=1 inserted=1") {
		t.Errorf("stop logged:\n%s", buf.String())
	}
}

// The p99 is its bucket's upper bound, never above the slowest, at most a
// quarter above the true one.
func TestSummaryP99(t *testing.T) {
	var tally providerTally
	for i := range 1000 {
		d := time.Millisecond
		if i >= 985 {
			d = 40 * time.Millisecond // the slowest 1.5%
		}
		tally.requests++
		tally.slowest = max(tally.slowest, d)
		tally.latency[bucketOf(d)]++
	}
	if p := tally.p99(); p < 40*time.Millisecond || p > 50*time.Millisecond {
		t.Errorf("p99 %s, want 40 ms (its bucket's bound, at most a quarter above)", p)
	}
	var fast providerTally
	for range 100 {
		fast.requests++
		fast.slowest = 2 * time.Millisecond
		fast.latency[bucketOf(2*time.Millisecond)]++
	}
	if p := fast.p99(); p != 2*time.Millisecond {
		t.Errorf("p99 %s of replies of 2 ms, want 2 ms (never above the slowest)", p)
	}
	if b := bucketOf(time.Hour); b != latencyBuckets-1 {
		t.Errorf("an hour in bucket %d, want the last", b)
	}
}
