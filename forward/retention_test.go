package forward_test

import (
	"context"
	"crypto/sha256"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/reconcile"
)

// Retention prunes delivered messages after retention.delivered, and keeps
// the receipt (body and key) of any message not yet delivered, whatever
// retention.payload and retention.keys say.
func TestRetentionKeepsWhatTheOutboxNeeds(t *testing.T) {
	a, b := newApp(t), newApp(t)
	e, relay := env(t, destination("ok", a.srv.URL, oldSecret), destination("later", b.srv.URL, oldSecret))
	ctx := context.Background()
	if err := forward.SetPaused(ctx, e.Writer, "later", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		e.Send(evtID(i), testenv.UsageBody("cus_1", "api_requests", "1"))
	}
	await.Eventually(t, 5*time.Second, "ok did not get its messages", func() bool {
		return e.Int(`SELECT COUNT(*) FROM outbox WHERE destination = 'ok' AND status = 'delivered'`) == 3
	})
	policy := reconcile.Retention{Payload: time.Hour, Keys: 24 * time.Hour, Delivered: time.Hour}
	later := time.Now().Add(48 * time.Hour)
	rep, err := reconcile.Prune(ctx, e.DB, e.Writer, policy, later, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeliveredPruned != 3 || rep.BodiesPruned != 0 || rep.KeysDeleted != 0 {
		t.Errorf("prune: %+v, want 3 delivered messages pruned and every receipt kept (later still needs them)", rep)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE body IS NOT NULL`); n != 3 {
		t.Errorf("%d receipts with their body, want 3", n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM outbox_attempts`); n != 0 {
		t.Errorf("%d attempts left of pruned messages", n)
	}
	// Delivered at last, the receipts may go.
	if err := forward.SetPaused(ctx, e.Writer, "later", false, time.Now()); err != nil {
		t.Fatal(err)
	}
	relay.Kick()
	await.Eventually(t, 5*time.Second, "later did not get its messages", func() bool { return outboxCount(e, "delivered") == 3 })
	rep, err = reconcile.Prune(ctx, e.DB, e.Writer, policy, later, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeliveredPruned != 3 || rep.KeysDeleted != 3 {
		t.Errorf("second prune: %+v, want 3 messages and 3 receipts", rep)
	}
	if n := e.Count("outbox"); n != 0 {
		t.Errorf("%d outbox rows left", n)
	}
	// Dry run of a database with nothing left to prune.
	if rep, err := reconcile.Prune(ctx, e.DB, e.Writer, policy, later, true); err != nil || rep.DeliveredPruned != 0 {
		t.Errorf("dry run: %+v %v", rep, err)
	}
}

// Every source of deliveries gets outbox rows, not only webhooks: a
// reconciled event submitted to the writer is forwarded too.
func TestReconciledEventForwarded(t *testing.T) {
	a := newApp(t)
	e, _ := env(t, destination("app", a.srv.URL, oldSecret))
	body := testenv.UsageBody("cus_1", "api_requests", "1")
	d := &custody.Delivery{Provider: "default", EventID: "evt_reconciled", EventType: "usage.recorded", Body: body,
		BodySHA256: sha(body), Source: custody.SourceReconcile, HandlerVersion: "test", ReceivedAt: time.Now()}
	d.Classify(e.Mapper())
	if err := e.Writer.Submit(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	await.Eventually(t, 5*time.Second, "the reconciled event was not forwarded", func() bool {
		count, _ := a.byEvent()
		return count["evt_reconciled"] == 1
	})
	// A delivery applied inside another op (not submitted itself) gets its
	// outbox rows too: Apply routes what Submit did not.
	inner := &custody.Delivery{Provider: "default", EventID: "evt_inner", EventType: "usage.recorded", Body: body,
		BodySHA256: sha(body), Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: time.Now()}
	inner.Classify(e.Mapper())
	if err := e.Writer.Submit(context.Background(), custody.OpFunc(inner.Apply)); err != nil {
		t.Fatal(err)
	}
	if n := e.Int(`SELECT COUNT(*) FROM outbox o JOIN receipts r ON r.id = o.receipt_id WHERE r.event_id = 'evt_inner'`); n != 1 {
		t.Errorf("a delivery applied inside another op: %d outbox rows, want 1", n)
	}
}

func sha(b []byte) []byte { s := sha256.Sum256(b); return s[:] }

// A destination removed from the config keeps its messages: status still
// lists it, as removed, with its backlog.
func TestRemovedDestinationKeepsMessages(t *testing.T) {
	a := newApp(t)
	e, relay := env(t, destination("gone", a.srv.URL, oldSecret))
	if err := forward.SetPaused(context.Background(), e.Writer, "gone", true, time.Now()); err != nil {
		t.Fatal(err)
	}
	e.Send("evt_kept", testenv.UsageBody("cus_1", "api_requests", "1"))
	relay.Close()
	st, err := forward.Status(context.Background(), e.DB, nil, nil, time.Now()) // the config no longer names it
	if err != nil || len(st) != 1 || st[0].Destination != "gone" || st[0].Configured || st[0].Pending != 1 {
		t.Fatalf("status: %+v %v, want gone listed as not configured with 1 pending", st, err)
	}
	if err := forward.CheckDestination(context.Background(), e.DB, nil, "gone"); err != nil {
		t.Errorf("a removed destination with messages is unknown to the CLI: %v", err)
	}
}

// The writer wakes the relay only after batches that wrote outbox rows: a
// duplicate, or an event no destination selects, wakes nobody.
func TestAfterOutboxOnlyForNewMessages(t *testing.T) {
	var kicks atomic.Int64
	d := destination("app", "http://127.0.0.1:1/", oldSecret)
	d.Events.Types = []string{"usage.*"}
	e := testenv.New(t, testenv.Options{RealTime: true,
		Edits:  []func(*config.Config){func(c *config.Config) { c.Destinations = []config.Destination{d} }},
		Writer: func(w *custody.Writer) { w.AfterOutbox = func() { kicks.Add(1) } }})
	e.Send("evt_1", testenv.UsageBody("cus_1", "api_requests", "1"))
	e.Send("evt_1", testenv.UsageBody("cus_1", "api_requests", "1"))
	e.Send("evt_2", []byte(`{"type":"invoice.paid"}`))
	if n := kicks.Load(); n != 1 {
		t.Errorf("%d wake-ups, want 1 (the duplicate and the unselected event write no message)", n)
	}
	if n := e.Count("outbox"); n != 1 {
		t.Errorf("%d outbox rows, want 1", n)
	}
}
