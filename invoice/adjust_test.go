package invoice_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// adjust appends an adjustment the way `hookledger adjust` does: through the
// writer, so it joins the hash chain.
func (e *env) adjust(a ledger.Adjustment) (*ledger.Row, error) {
	if err := a.Validate(invMeters); err != nil {
		return nil, err
	}
	var out *ledger.Row
	err := e.Writer.Submit(e.Ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		r, err := a.Row(ctx, tx.Refs(), tx.Now())
		if err != nil {
			return err
		}
		out = r
		return tx.Append(ctx, r)
	}))
	return out, err
}

func TestAdjustmentsChangeTotalsAndKeepOriginals(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("10"), At: ts("2026-10-05T00:00:00Z")},
		row{Customer: "c1", Meter: "seats", Qty: q("4"), At: ts("2026-10-05T00:00:00Z")},
		row{Customer: "c2", Meter: "api", Qty: q("6"), At: ts("2026-10-06T00:00:00Z")},
	)
	oct := month(t, "2026-10", "UTC")
	r, err := e.adjust(ledger.Adjustment{Customer: "c1", Meter: "api", Quantity: q("-2.5"), Reason: "duplicate batch", Ref: "row:1"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Kind != ledger.KindAdjustment || r.OccurredAt != ts("2026-10-05T00:00:00Z").UnixMilli() || r.Ref != "row:1" || r.Reason != "duplicate batch" {
		t.Fatalf("adjustment row: %+v", r)
	}
	if _, err := e.adjust(ledger.Adjustment{Customer: "c1", Meter: "seats", Quantity: q("-1"), Reason: "seat removed late", Ref: "event:test/evt_000002"}); err != nil {
		t.Fatal(err)
	}
	rep := e.Query(ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: invMeters})
	got := map[string]ledger.UsageLine{}
	for _, l := range rep.Lines {
		got[l.Customer+" "+l.Meter] = l
	}
	if l := got["c1 api"]; !l.Quantity.Equal(q("7.5")) || l.Events != 1 || l.Adjustments != 1 {
		t.Fatalf("c1 api: %+v", l)
	}
	if l := got["c1 seats"]; !l.Quantity.Equal(q("3")) { // max 4, adjusted by -1
		t.Fatalf("c1 seats: %+v", l)
	}
	if l := got["c2 api"]; !l.Quantity.Equal(q("6")) {
		t.Fatalf("c2 api: %+v", l)
	}
	// The original row is untouched and still in the ledger.
	var orig int64
	if err := e.DB.Read.Get(&orig, `SELECT quantity FROM metered_usage WHERE id = 1`); err != nil || !ledger.TotalOf(ledger.Quantity(orig)).Equal(q("10")) {
		t.Fatalf("original row: %d %v", orig, err)
	}

	// Close October, then correct it: the adjustment is late for October
	// and the next invoice bills it naming October.
	e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Meters: invMeters, Now: at("2026-11-02T00:00:00Z")})
	e.SetClock(ts("2026-11-03T00:00:00Z"))
	inv, err := invoice.ListInvoices(e.Ctx, e.DB, invoice.InvoiceFilter{Customer: "c2"})
	if err != nil || len(inv) != 1 {
		t.Fatalf("c2 invoices: %+v %v", inv, err)
	}
	if _, err := e.adjust(ledger.Adjustment{Customer: "c2", Meter: "api", Quantity: q("-6"), Reason: "goodwill credit", Ref: "invoice:" + strconv.FormatInt(inv[0].ID, 10)}); err != nil {
		t.Fatal(err)
	}
	nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: invMeters, Now: at("2026-12-02T00:00:00Z")})
	c2 := byCustomer(nov.Invoices)["c2"]
	wantLines(t, c2, map[string]string{"api 2026-10*": "-6"})
	if l := c2.Lines[0]; l.Adjustments != 1 || l.Rows != 0 {
		t.Fatalf("late adjustment line: %+v", l)
	}
	if p, err := invoice.Verify(e.Ctx, e.DB); err != nil || p.First() != nil {
		t.Fatalf("verify: %v %v", p.First(), err)
	}
}

func TestAdjustmentErrors(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: time.Now()})
	ok := ledger.Adjustment{Customer: "c1", Meter: "api", Quantity: q("-1"), Reason: "r"}
	for _, tc := range []struct {
		name string
		edit func(*ledger.Adjustment)
		want string
	}{
		{"no reason", func(a *ledger.Adjustment) { a.Reason = "  " }, "reason is required"},
		{"zero", func(a *ledger.Adjustment) { a.Quantity = ledger.Total{} }, "must not be zero"},
		{"no customer", func(a *ledger.Adjustment) { a.Customer = "" }, "customer is required"},
		{"no meter", func(a *ledger.Adjustment) { a.Meter = "" }, "meter is required"},
		{"undeclared meter", func(a *ledger.Adjustment) { a.Meter = "gpu" }, "not declared"},
		{"bad ref", func(a *ledger.Adjustment) { a.Ref = "receipt:1" }, "want event:"},
		{"bad row ref", func(a *ledger.Adjustment) { a.Ref = "row:x" }, "positive number"},
		{"bad event ref", func(a *ledger.Adjustment) { a.Ref = "event:nope" }, "PROVIDER/EVENT_ID"},
		{"missing row", func(a *ledger.Adjustment) { a.Ref = "row:99" }, "not found"},
		{"missing invoice", func(a *ledger.Adjustment) { a.Ref = "invoice:5" }, "not found"},
		{"missing event", func(a *ledger.Adjustment) { a.Ref = "event:test/evt_x" }, "not found"},
		{"other customer", func(a *ledger.Adjustment) { a.Customer = "c9"; a.Ref = "row:1" }, "belongs to customer"},
		{"long customer", func(a *ledger.Adjustment) { a.Customer = strings.Repeat("c", 3000) }, "customer: is 3000 bytes, longer than the 1024"},
		{"long meter", func(a *ledger.Adjustment) { a.Meter = strings.Repeat("m", 1025) }, "meter: is 1025 bytes"},
		{"control character", func(a *ledger.Adjustment) { a.Customer = "c\x00" }, "customer: contains a control character"},
	} {
		a := ok
		tc.edit(&a)
		_, err := e.adjust(a)
		if !errors.Is(err, ledger.ErrBadAdjustment) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	var n int
	if err := e.DB.Read.Get(&n, `SELECT COUNT(*) FROM metered_usage`); err != nil || n != 1 {
		t.Fatalf("failed adjustments wrote rows: %d %v", n, err)
	}
}
