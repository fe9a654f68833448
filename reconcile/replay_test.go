package reconcile

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// fixedMapper is the test config's mapping with the stripe quantity path corrected.
func (e *env) fixedMapper() *ledger.Mapper {
	usage := append([]ledger.Mapping(nil), e.Config.Usage...)
	usage[0].Quantity = ledger.Field{Path: "data.object.value"}
	return ledger.NewMapper(usage, e.Config.MeterNames())
}

func (e *env) verifyLedger() {
	e.T.Helper()
	rep, err := invoice.Verify(context.Background(), e.DB)
	if err != nil {
		e.T.Fatal(err)
	}
	if p := rep.First(); p != nil {
		e.T.Errorf("ledger verify: %v", p)
	}
}

func TestReplayAfterMappingFix(t *testing.T) {
	// The deployed mapping reads a quantity path the events do not have.
	e := newEnv(t, envOptions{quantityPath: "data.object.amount"})
	var want ledger.Quantity
	for i := 0; i < 6; i++ {
		body := stripeEventJSON(i, testNow.Add(-time.Hour))
		if code, r := e.post("stripe", "", "", body); code != 200 || r["status"] != string(custody.StatusFailed) {
			t.Fatalf("webhook %d: %d %v", i, code, r)
		}
		want += ledger.Quantity(i%7+1) * ledger.Scale
	}
	if e.Int(`SELECT COUNT(*) FROM metered_usage`) != 0 {
		t.Fatal("failed events wrote usage")
	}
	ctx := context.Background()
	fixed := e.fixedMapper()
	rep, err := custody.ReplayReceipts(ctx, e.DB, e.Writer, fixed, "v2", custody.ReplayFilter{Provider: "stripe", Status: "failed"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Selected != 6 || rep.Applied != 6 || rep.StillFailed+rep.AlreadyApplied+rep.Errors != 0 {
		t.Fatalf("report %+v", rep)
	}
	if got := e.usageSum("stripe"); got != want {
		t.Errorf("usage %s, want %s", got, want)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE status = 'applied' AND error = '' AND handler_version = 'v2'
		AND source = 'webhook' AND processed_at = ?`, testNow.UnixMilli()); n != 6 {
		t.Errorf("replayed receipts = %d", n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM replays WHERE from_status = 'failed' AND to_status = 'applied'
		AND from_handler_version = 'test' AND handler_version = 'v2'`); n != 6 {
		t.Errorf("replay records = %d", n)
	}
	// The default occurred_at of a replayed row is the original receipt time,
	// here the mapping's created path: unchanged by the replay's later clock.
	var occurred int64
	if err := e.DB.Read.Get(&occurred, `SELECT MIN(occurred_at) FROM metered_usage`); err != nil || occurred != testNow.Add(-time.Hour).UnixMilli() {
		t.Errorf("occurred_at %d (%v)", occurred, err)
	}
	e.verifyLedger()

	// Replaying an applied event adds nothing, by id or by status.
	rows := e.Int(`SELECT COUNT(*) FROM metered_usage`)
	rep, err = custody.ReplayReceipts(ctx, e.DB, e.Writer, fixed, "v3", custody.ReplayFilter{Provider: "stripe", EventID: "evt_000"})
	if err != nil || rep.AlreadyApplied != 1 || rep.Applied != 0 {
		t.Fatalf("err %v report %+v", err, rep)
	}
	rep, err = custody.ReplayReceipts(ctx, e.DB, e.Writer, fixed, "v3", custody.ReplayFilter{Provider: "stripe", Status: "failed"})
	if err != nil || rep.Selected != 0 {
		t.Fatalf("err %v report %+v", err, rep)
	}
	if n := e.Int(`SELECT COUNT(*) FROM metered_usage`); n != rows {
		t.Errorf("usage rows %d -> %d", rows, n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE handler_version = 'v3'`); n != 0 {
		t.Errorf("an applied receipt was rewritten")
	}
}

func TestReplayRacesApplyOnce(t *testing.T) {
	e := newEnv(t, envOptions{quantityPath: "data.object.amount"})
	body := stripeEventJSON(3, testNow.Add(-time.Hour))
	if code, _ := e.post("stripe", "", "", body); code != 200 {
		t.Fatal(code)
	}
	fixed := e.fixedMapper()
	ops := make([]*custody.Replay, 20)
	var wg sync.WaitGroup
	for i := range ops {
		ops[i] = &custody.Replay{Provider: "stripe", EventID: "evt_003", Mapper: fixed, HandlerVersion: "v2"}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.Writer.Submit(context.Background(), ops[i]); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	outcomes := map[custody.ReplayOutcome]int{}
	for _, op := range ops {
		outcomes[op.Outcome]++
	}
	if outcomes[custody.ReplayApplied] != 1 || outcomes[custody.ReplayAlreadyApplied] != 19 {
		t.Errorf("outcomes %v", outcomes)
	}
	if n := e.Int(`SELECT COUNT(*) FROM metered_usage`); n != 1 {
		t.Errorf("usage rows = %d, want 1", n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM replays`); n != 1 {
		t.Errorf("replays = %d, want 1", n)
	}
}

func TestReplayOutcomes(t *testing.T) {
	e := newEnv(t, envOptions{quantityPath: "data.object.amount"})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		e.post("stripe", "", "", stripeEventJSON(i, testNow.Add(-time.Hour)))
	}
	e.post("stripe", "", "", []byte(`{"id":"evt_other","object":"event","type":"customer.created","created":1,"data":{}}`))
	broken := e.Mapper()

	t.Run("still failing keeps the receipt failed with the new error", func(t *testing.T) {
		rep, err := custody.ReplayReceipts(ctx, e.DB, e.Writer, broken, "v2", custody.ReplayFilter{Provider: "stripe", Status: "failed"})
		if err != nil || rep.StillFailed != 3 || len(rep.Failures) != 3 || !strings.Contains(rep.Failures[0].Error, "quantity") {
			t.Fatalf("err %v report %+v", err, rep)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE status = 'failed' AND handler_version = 'v2'`); n != 3 {
			t.Errorf("failed receipts with the new version = %d", n)
		}
		if n := e.Int(`SELECT COUNT(*) FROM replays WHERE to_status = 'failed'`); n != 3 {
			t.Errorf("replay records = %d", n)
		}
	})
	t.Run("ignored stays ignored without a mapping", func(t *testing.T) {
		rep, err := custody.ReplayReceipts(ctx, e.DB, e.Writer, broken, "v2", custody.ReplayFilter{Provider: "stripe", Status: "ignored"})
		if err != nil || rep.Selected != 1 || rep.Ignored != 1 {
			t.Fatalf("err %v report %+v", err, rep)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE provider = 'stripe' AND event_id = 'evt_other' AND status = 'ignored'`); n != 1 {
			t.Errorf("ignored receipts for evt_other = %d, want 1 (still ignored)", n)
		}
		if n := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE provider = 'stripe' AND event_id = 'evt_other'`); n != 0 {
			t.Errorf("usage rows for the ignored evt_other = %d, want 0", n)
		}
	})
	t.Run("since selects by receipt time", func(t *testing.T) {
		rep, err := custody.ReplayReceipts(ctx, e.DB, e.Writer, broken, "v2",
			custody.ReplayFilter{Provider: "stripe", Status: "failed", Since: testNow.Add(time.Minute)})
		if err != nil || rep.Selected != 0 {
			t.Fatalf("err %v report %+v", err, rep)
		}
	})
	t.Run("unknown event", func(t *testing.T) {
		rep, err := custody.ReplayReceipts(ctx, e.DB, e.Writer, broken, "v2", custody.ReplayFilter{Provider: "stripe", EventID: "evt_nope"})
		if err != nil || rep.NotFound != 1 {
			t.Fatalf("err %v report %+v", err, rep)
		}
	})
	t.Run("bad status", func(t *testing.T) {
		_, err := custody.ReplayReceipts(ctx, e.DB, e.Writer, broken, "v2", custody.ReplayFilter{Provider: "stripe", Status: "applied"})
		if err == nil || !strings.Contains(err.Error(), "failed or ignored") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("a pruned body cannot be replayed", func(t *testing.T) {
		if _, err := e.DB.Write.Exec(`UPDATE receipts SET body = NULL WHERE event_id = 'evt_001'`); err != nil {
			t.Fatal(err)
		}
		if n := e.Int(`SELECT COUNT(*) FROM metered_usage`); n != 0 {
			t.Fatalf("usage rows before the replay = %d, want 0 (every event failed or was ignored)", n)
		}
		rep, err := custody.ReplayReceipts(ctx, e.DB, e.Writer, e.fixedMapper(), "v3", custody.ReplayFilter{Provider: "stripe", Status: "failed"})
		if err != nil || rep.Pruned != 1 || rep.Applied != 2 {
			t.Fatalf("err %v report %+v", err, rep)
		}
		// Only evt_000 (value 1) and evt_002 (value 3) reached the ledger.
		if n := e.Int(`SELECT COUNT(*) FROM metered_usage`); n != 2 {
			t.Errorf("usage rows = %d, want 2 (the pruned event added none)", n)
		}
		if got, want := e.usageSum("stripe"), ledger.Quantity(4)*ledger.Scale; got != want {
			t.Errorf("usage %s, want %s", got, want)
		}
		if n := e.Int(`SELECT COUNT(*) FROM metered_usage WHERE event_id = 'evt_001'`); n != 0 {
			t.Errorf("usage rows for the pruned evt_001 = %d, want 0", n)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE provider = 'stripe' AND event_id = 'evt_001' AND status = 'failed'`); n != 1 {
			t.Errorf("failed receipts for the pruned evt_001 = %d, want 1 (still failed)", n)
		}
	})
	t.Run("storage errors are counted and returned", func(t *testing.T) {
		e2 := newEnv(t, envOptions{quantityPath: "data.object.amount"})
		e2.post("stripe", "", "", stripeEventJSON(1, testNow))
		e2.Writer.Close()
		rep, err := custody.ReplayReceipts(ctx, e2.DB, e2.Writer, e2.fixedMapper(), "v2", custody.ReplayFilter{Provider: "stripe", Status: "failed"})
		if err == nil || rep.Errors != 1 || !strings.Contains(err.Error(), fmt.Sprint(custody.ErrClosed)) {
			t.Fatalf("err %v report %+v", err, rep)
		}
	})
}
