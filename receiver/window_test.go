package receiver_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// usageAt is the generic usage event dated at.
func usageAt(at string) []byte {
	return []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1,"occurred_at":"` + at + `"}}`)
}

// An event dated far from the time it was received (a clock at zero, a
// timestamp in the wrong unit) is not applied in silence: with the default
// window its receipt is kept failed with the reason (the time, the bound,
// the key), the sender gets its 2xx, no usage row is written, and a replay
// after widening the window applies it. The ingest API's events are judged
// by the same mapping, on both backends alike.
func TestEventTimeOutsideTheWindowIsFailed(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := &env{testenv.New(t, testenv.Options{Backend: backend})}
		for _, c := range []struct{ id, at, want string }{
			{"evt_2099", "2099-01-01T00:00:00Z", "occurred_at: 2099-01-01T00:00:00Z is 26330d12h0m0s after the event was received (2026-11-29T12:00:00Z); usage[0].max_future allows 7d"},
			{"evt_1971", "1971-01-01T00:00:00Z", "occurred_at: 1971-01-01T00:00:00Z is 20421d12h0m0s before the event was received (2026-11-29T12:00:00Z); usage[0].max_past allows 3650d"},
		} {
			r := e.Send(c.id, usageAt(c.at))
			if r.Code != 200 || r.Body.Status != custody.StatusFailed || !strings.HasPrefix(r.Body.Error, c.want) {
				t.Errorf("%s: %d %+v, want 200 failed with %q", c.id, r.Code, r.Body, c.want)
			}
			if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_id = $1 AND status = 'failed' AND error LIKE $2`, c.id, c.want+"%"); n != 1 {
				t.Errorf("%s: %d failed receipts with the reason, want 1", c.id, n)
			}
		}
		// Within the window (the default's week ahead, a year behind): applied.
		for id, at := range map[string]string{"evt_now": "2026-11-29T10:00:00Z", "evt_ahead": "2026-12-02T10:00:00Z", "evt_sept": "2025-09-03T10:00:00Z"} {
			if r := e.Send(id, usageAt(at)); r.Code != 200 || r.Body.Status != custody.StatusApplied {
				t.Errorf("%s at %s: %d %+v, want applied", id, at, r.Code, r.Body)
			}
		}
		if got := e.Rows(); got != [3]int{5, 5, 3} {
			t.Errorf("receipts, attempts, usage = %v, want [5 5 3]", got)
		}

		// The ingest API: an event whose time is 1970 is kept failed, the
		// rest of the batch applied.
		key, _ := e.CreateKey("app", 0, 0)
		zero, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": "e0", "source": "app", "type": "usage.recorded",
			"subject": "cus_2", "time": "1970-01-01T00:00:00Z", "data": map[string]any{"meter": "api_requests", "quantity": 5}})
		resp := e.PostEvents(key, ingest.MediaCloudEventBatch, testenv.Batch(zero, testenv.CloudEvent("app", "e1", "cus_2", "api_requests", "1")))
		if got := resp.Reply.Results; resp.Code != 200 || len(got) != 2 || got[0].Outcome != "failed" ||
			!strings.Contains(got[0].Error, "occurred_at: 1970-01-01T00:00:00Z is 20786d12h0m0s before the event was received (2026-11-29T12:00:00Z); usage[0].max_past allows 3650d") ||
			got[1].Outcome != "applied" {
			t.Errorf("ingest batch: %d %s", resp.Code, resp.Raw)
		}
		if got := e.Rows(); got != [3]int{7, 7, 4} {
			t.Errorf("after the ingest batch: receipts, attempts, usage = %v, want [7 7 4]", got)
		}

		// Widened (here: turned off), a replay applies what was refused.
		wide := e.Config.Usage[0]
		wide.MaxFuture, wide.MaxPast = ledger.Bound{Text: config.BoundOff}, ledger.Bound{Text: config.BoundOff}
		m := ledger.NewMapper([]ledger.Mapping{wide}, e.Config.MeterNames())
		for _, provider := range []string{"default", "api:app"} {
			rep, err := custody.ReplayReceipts(t.Context(), e.DB, e.Writer, m, "test+wide", custody.ReplayFilter{Provider: provider, Status: custody.StatusFailed})
			if want := map[string]int{"default": 2, "api:app": 1}[provider]; err != nil || rep.Applied != want {
				t.Errorf("replay %s: %+v %v, want %d applied", provider, rep, err, want)
			}
		}
		if got := e.Rows(); got != [3]int{7, 7, 7} {
			t.Errorf("after the replay: receipts, attempts, usage = %v, want [7 7 7]", got)
		}
		if n := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE occurred_at IN ($1, $2, $3)`,
			time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), time.Date(1971, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), int64(0)); n != 3 {
			t.Errorf("%d rows at the refused times after the replay, want 3", n)
		}
	})
}

// The window is measured from the receipt's received_at, not the clock: a
// receipt replayed a year after it arrived (its mapping fixed for another
// reason) is judged as its first application was, so replays and reconciles
// of old but legitimate events still apply.
func TestReplayJudgesTheWindowAtReceipt(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := &env{testenv.New(t, testenv.Options{Backend: backend, Edits: []func(*config.Config){func(c *config.Config) {
			c.Usage[0].MaxFuture = ledger.Bound{Text: "5m", Max: 5 * time.Minute}
			c.Usage[0].MaxPast = ledger.Bound{Text: "35d", Max: 35 * 24 * time.Hour}
		}}})}
		// Stripe's bounds: 4 minutes ahead and 34 days behind are applied,
		// 6 minutes ahead and 36 days behind are not.
		for id, c := range map[string]struct {
			at     string
			status custody.Status
		}{
			"ahead4m": {"2026-11-29T12:04:00Z", custody.StatusApplied},
			"ahead6m": {"2026-11-29T12:06:00Z", custody.StatusFailed},
			"past34d": {"2026-10-26T12:00:00Z", custody.StatusApplied},
			"past36d": {"2026-10-24T12:00:00Z", custody.StatusFailed},
		} {
			if r := e.Send(id, usageAt(c.at)); r.Code != 200 || r.Body.Status != c.status {
				t.Errorf("%s: %d %+v, want %s", id, r.Code, r.Body, c.status)
			}
		}
		// 20 days old when it arrives, but its quantity is where the
		// mapping does not look: failed for that.
		body := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","count":3,"occurred_at":"2026-11-09T12:00:00Z"}}`)
		if r := e.Send("evt_count", body); r.Code != 200 || r.Body.Status != custody.StatusFailed || !strings.Contains(r.Body.Error, "quantity") {
			t.Fatalf("evt_count: %d %+v", r.Code, r.Body)
		}
		e.Clock.Add(365 * 24 * time.Hour)
		fixed := e.Config.Usage[0]
		fixed.Quantity = ledger.Field{Path: "data.count"}
		m := ledger.NewMapper([]ledger.Mapping{fixed}, e.Config.MeterNames())
		rep, err := custody.ReplayReceipts(t.Context(), e.DB, e.Writer, m, "test+fixed", custody.ReplayFilter{Provider: "default", EventID: "evt_count"})
		if err != nil || rep.Applied != 1 {
			t.Fatalf("replay a year later: %+v %v, want applied (20 days old at receipt)", rep, err)
		}
	})
}
