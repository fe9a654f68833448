package invoice_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/schema"
)

// A preview is the close, computed from a read-only snapshot: it runs while
// another transaction holds the write lock (and, on PostgreSQL, the chain
// head a close locks), stores nothing, and shows what the close then
// makes: the same close and invoice ids (the next after the highest), late
// lines, amounts and digests.
func TestPreviewIsTheCloseWithoutTheWriteLock(t *testing.T) {
	e := newEnv(t)
	pr := moneyPricing(t)
	e.SetClock(ts("2026-05-10T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("500"), At: ts("2026-05-09T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("7"), At: ts("2026-05-09T00:00:00Z")})
	if _, err := invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: month(t, "2026-05", "UTC"), All: true, Meters: invMeters,
		Now: at("2026-06-02T00:00:00Z"), Pricing: pr}); err != nil {
		t.Fatal(err)
	}
	// June's usage, and May's late usage that June's invoice bills.
	e.SetClock(ts("2026-06-10T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("101000"), At: ts("2026-06-09T00:00:00Z")},
		row{Customer: "c1", Meter: "api", Qty: q("3"), At: ts("2026-05-20T00:00:00Z")})

	req := invoice.CloseRequest{Period: month(t, "2026-06", "UTC"), Customer: "c1", Meters: invMeters, Now: at("2026-07-02T00:00:00Z"), Pricing: pr}
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- e.DB.CloseTx(context.Background(), func(*schema.CloseTx) error {
			close(held)
			<-release
			return schema.ErrRollback
		})
	}()
	<-held
	ctx, cancel := context.WithTimeout(e.Ctx, 10*time.Second)
	preview, err := invoice.Preview(ctx, e.DB, req)
	cancel()
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatalf("a preview while the write lock is held: %v", err)
	}
	if n := e.Count("period_closes"); n != 1 {
		t.Errorf("the preview stored a close: %d closes", n)
	}
	if len(preview.Invoices) != 1 || len(preview.Invoices[0].Lines) != 2 || !preview.Invoices[0].Lines[1].Late {
		t.Fatalf("preview: %+v", preview.Invoices)
	}
	if inv := preview.Invoices[0]; inv.CloseID != 2 || inv.ID != 3 {
		t.Errorf("the preview shows close %d, invoice %d; want 2 and 3 (the next after May's)", inv.CloseID, inv.ID)
	}
	closed, err := invoice.Close(e.Ctx, e.DB, req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(preview)
	want, _ := json.Marshal(closed)
	if string(got) != string(want) {
		t.Errorf("the preview:\n%s\nthe close then:\n%s", got, want)
	}
	// A closed period previews as its closed invoice.
	again, err := invoice.Preview(e.Ctx, e.DB, req)
	if err != nil || !again.Existing || len(again.Invoices) != 1 || again.Invoices[0].ID != 3 {
		t.Errorf("the preview of a closed period: %+v, %v", again, err)
	}
	if _, err := invoice.Preview(e.Ctx, e.DB, invoice.CloseRequest{Period: req.Period, Meters: invMeters}); err == nil {
		t.Error("a preview of no customer and not all")
	}
}
