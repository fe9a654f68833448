package metrics

import (
	"testing"
	"time"
)

func TestForwardGaugesMatchRows(t *testing.T) {
	db := openDB(t)
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	m := New(Options{})
	f := m.WatchForward(db, []string{"app", "idle"}, nil)
	f.ObserveAttempt("app", "delivered", 30*time.Millisecond)
	f.ObserveAttempt("app", "retry", time.Second)
	f.ObserveAttempt("unknown", "retry", time.Second) // not configured: not counted
	f.SetConcurrencyLimit("app", 8)
	f.SetConcurrencyLimit("app", 24) // the relay raised it
	f.SetConcurrencyLimit("unknown", 8)
	for i, status := range []string{"pending", "pending", "dead", "delivered"} {
		id := "evt_" + string(rune('a'+i))
		addReceipt(t, db, id, "applied", now)
		since := now.Add(-time.Duration(10*(i+1)) * time.Minute)
		if _, err := db.Write.Exec(`INSERT INTO outbox (receipt_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
			VALUES ((SELECT id FROM receipts WHERE event_id = ?), 'app', ?, ?, ?, ?, ?)`, id, "msg_"+id, status,
			since.UnixMilli(), since.UnixMilli(), now.UnixMilli()); err != nil {
			t.Fatal(err)
		}
	}
	mfs := scrape(t, m)
	for _, c := range []struct {
		name   string
		labels L
		want   float64
	}{
		{"hookledger_forward_pending", L{"destination": "app"}, 2},
		{"hookledger_forward_dead", L{"destination": "app"}, 1},
		{"hookledger_forward_pending", L{"destination": "idle"}, 0},
		{"hookledger_forward_oldest_pending_age_seconds", L{"destination": "idle"}, 0},
		{"hookledger_forward_attempts_total", L{"destination": "app", "outcome": "delivered"}, 1},
		{"hookledger_forward_attempts_total", L{"destination": "app", "outcome": "retry"}, 1},
		{"hookledger_forward_attempts_total", L{"destination": "app", "outcome": "dead"}, 0},
		{"hookledger_forward_stats_up", nil, 1},
		{"hookledger_forward_concurrency_limit", L{"destination": "app"}, 24},
	} {
		if got := value(t, mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// The oldest pending message became pending 20 minutes before now (evt_b).
	if got := value(t, mfs, "hookledger_forward_oldest_pending_age_seconds", L{"destination": "app"}); got < 1200 {
		t.Errorf("oldest pending age %v, want at least 1200", got)
	}
	for _, name := range []string{"hookledger_forward_attempts_total", "hookledger_forward_concurrency_limit"} {
		if find(mfs, name, L{"destination": "unknown"}) != nil {
			t.Errorf("an unconfigured destination got a series of %s", name)
		}
	}
	if h := find(mfs, "hookledger_forward_attempt_duration_seconds", L{"destination": "app"}); h == nil || h.Histogram.GetSampleCount() != 2 {
		t.Errorf("latency histogram: %v", h)
	}
	var nilForward *Forward
	nilForward.ObserveAttempt("app", "delivered", time.Second) // no panic
	nilForward.SetConcurrencyLimit("app", 8)
}
