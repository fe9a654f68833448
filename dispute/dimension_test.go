package dispute

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// The trace of a line of a meter priced by model names the model and holds
// only that model's rows.
func TestDimensionalLineTrace(t *testing.T) {
	e := newEnv(t)
	for i, m := range []string{"gpt-4o", "o1-mini", "gpt-4o"} {
		q, err := ledger.ParseRowQuantity("5")
		if err != nil {
			t.Fatal(err)
		}
		body := fmt.Appendf(nil, `{"model":%q}`, m)
		sum := sha256.Sum256(body)
		at := time.Date(2026, 9, 3+i, 10, 0, 0, 0, time.UTC)
		d := &custody.Delivery{Provider: "default", EventID: fmt.Sprintf("evt_m%d", i), EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
			Source: custody.SourceWebhook, HandlerVersion: "test-1", ReceivedAt: at, Status: custody.StatusApplied,
			Rows: []ledger.UsageRow{{Customer: "cus_1", Meter: "api_requests", Quantity: q, OccurredAt: at, Properties: fmt.Sprintf(`{"model":%q}`, m)}}}
		if err := e.Writer.Submit(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	unit := pricing.MustDecimal("1")
	plan := pricing.Plan{Name: "ai", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{{Meter: "api_requests", By: "model",
		Default: &pricing.Price{Model: pricing.Unit, Unit: &unit}}}}
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.NewCatalog([]pricing.Plan{plan})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := ledger.MonthPeriod("2026-09", time.UTC)
	res, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: p, All: true, Meters: ledger.NewMeters(e.Config.Meters),
		Now: e.Now, Pricing: &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("ai", nil)}})
	if err != nil {
		t.Fatal(err)
	}
	inv := res.Invoices[0]
	tr := e.trace(Target{Kind: KindLine, Invoice: inv.ID, Line: 1}.String())
	if len(tr.Invoices) != 1 || len(tr.Invoices[0].Lines) != 1 {
		t.Fatalf("trace: %+v", tr.Invoices)
	}
	l := tr.Invoices[0].Lines[0]
	if l.Dimension != "model=gpt-4o" || !l.OK || len(l.RowIDs) != 2 || !l.Quantity.Equal(ledger.TotalOf(10_000_000)) {
		t.Errorf("gpt-4o's line in the trace: dimension %q, ok %v, rows %v, quantity %s", l.Dimension, l.OK, l.RowIDs, l.Quantity)
	}
	for _, r := range tr.Rows {
		if r.ID == 2 {
			t.Errorf("the trace of gpt-4o's line holds o1-mini's row %d", r.ID)
		}
	}
	var text bytes.Buffer
	if err := WriteTable(&text, tr); err != nil {
		t.Fatal(err)
	}
	if want := "api_requests model=gpt-4o"; !strings.Contains(text.String(), want) {
		t.Errorf("the trace's text lacks %q:\n%s", want, text.String())
	}
}
