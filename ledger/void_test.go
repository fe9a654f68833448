package ledger_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
)

var voidMeters = ledger.NewMeters([]ledger.Meter{
	{Name: "api", Aggregation: ledger.AggSum, Unit: "requests"},
	{Name: "calls", Aggregation: ledger.AggCount},
	{Name: "seats", Aggregation: ledger.AggMax, Unit: "seats"},
})

// void voids an event the way `hookledger void` does: one op through the writer.
func (e *env) void(eventID, reason string) (*custody.VoidEvent, error) {
	v := &custody.VoidEvent{Void: ledger.Void{Provider: "test", EventID: eventID, Reason: reason, Actor: "alice"}, Meters: voidMeters}
	return v, e.Writer.Submit(e.ctx, v)
}

func (e *env) countRows(kind string) int {
	e.T.Helper()
	var n int
	if err := e.DB.Read.Get(&n, `SELECT COUNT(*) FROM metered_usage WHERE kind = ?`, kind); err != nil {
		e.T.Fatal(err)
	}
	return n
}

func TestVoidInOpenPeriodNetsOut(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.setClock(ts("2026-10-20T00:00:00Z"))
	e.write(
		row{customer: "c1", meter: "api", qty: q("1000"), at: ts("2026-10-05T00:00:00Z")}, // evt_000001: the wrong one
		row{customer: "c1", meter: "api", qty: q("7"), at: ts("2026-10-06T00:00:00Z")},
		row{customer: "c1", meter: "calls", qty: q("3"), at: ts("2026-10-06T00:00:00Z")}, // evt_000003
		row{customer: "c1", meter: "calls", qty: q("4"), at: ts("2026-10-07T00:00:00Z")},
	)
	v, err := e.void("evt_000001", "milliseconds sent as seconds")
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Rows) != 1 {
		t.Fatalf("void rows: %+v", v.Rows)
	}
	r := v.Rows[0]
	if r.Kind != ledger.KindVoid || r.Ref != "row:1" || !r.Quantity.Equal(q("-1000")) || r.Customer != "c1" ||
		r.OccurredAt != ts("2026-10-05T00:00:00Z").UnixMilli() || r.Reason != "milliseconds sent as seconds (by alice)" {
		t.Fatalf("void row: %+v", r)
	}
	if _, err := e.void("evt_000003", "test event"); err != nil {
		t.Fatal(err)
	}
	oct := month(t, "2026-10", "UTC")
	rep := e.query(ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: voidMeters})
	got := map[string]ledger.UsageLine{}
	for _, l := range rep.Lines {
		got[l.Meter] = l
	}
	if l := got["api"]; !l.Quantity.Equal(q("7")) || l.Adjustments != 1 {
		t.Fatalf("api after void: %+v", l)
	}
	if l := got["calls"]; !l.Quantity.Equal(q("1")) { // count: one row of two voided
		t.Fatalf("calls after void: %+v", l)
	}
	res := e.closePeriod(t, ledger.CloseRequest{Period: oct, All: true, Meters: voidMeters, Now: at("2026-11-02T00:00:00Z")})
	wantLines(t, byCustomer(res.Invoices)["c1"], map[string]string{"api 2026-10": "7", "calls 2026-10": "1"})
	if p, err := ledger.Verify(e.ctx, e.DB); err != nil || p.First() != nil {
		t.Fatalf("verify: %v %v", p.First(), err)
	}

	// Voiding twice is refused, and writes nothing.
	_, err = e.void("evt_000001", "again")
	if !errors.Is(err, ledger.ErrAlreadyVoided) || !strings.Contains(err.Error(), "voided by row 5") {
		t.Fatalf("second void: %v", err)
	}
	if n := e.countRows(ledger.KindVoid); n != 2 {
		t.Fatalf("%d void rows, want 2", n)
	}
}

func TestVoidInClosedPeriodIsBilledLate(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.setClock(ts("2026-10-20T00:00:00Z"))
	e.write(
		row{customer: "c1", meter: "api", qty: q("1000"), at: ts("2026-10-05T00:00:00Z")},
		row{customer: "c1", meter: "api", qty: q("7"), at: ts("2026-10-06T00:00:00Z")},
	)
	oct := month(t, "2026-10", "UTC")
	res := e.closePeriod(t, ledger.CloseRequest{Period: oct, All: true, Meters: voidMeters, Now: at("2026-11-02T00:00:00Z")})
	wantLines(t, byCustomer(res.Invoices)["c1"], map[string]string{"api 2026-10": "1007"})
	e.setClock(ts("2026-11-03T00:00:00Z"))
	if _, err := e.void("evt_000001", "milliseconds sent as seconds"); err != nil {
		t.Fatal(err)
	}
	late, err := ledger.LateUsage(e.ctx, e.DB, "c1", voidMeters)
	if err != nil || len(late) != 1 || !late[0].Quantity.Equal(q("-1000")) {
		t.Fatalf("late usage: %+v %v", late, err)
	}
	nov := e.closePeriod(t, ledger.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: voidMeters, Now: at("2026-12-02T00:00:00Z")})
	c1 := byCustomer(nov.Invoices)["c1"]
	wantLines(t, c1, map[string]string{"api 2026-10*": "-1000"})
	if l := c1.Lines[0]; l.Adjustments != 1 || l.Rows != 0 {
		t.Fatalf("late void line: %+v", l)
	}
	if p, err := ledger.Verify(e.ctx, e.DB); err != nil || p.First() != nil {
		t.Fatalf("verify: %v %v", p.First(), err)
	}
}

func TestVoidRefusals(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.setClock(ts("2026-10-20T00:00:00Z"))
	e.write(row{customer: "c1", meter: "seats", qty: q("4"), at: ts("2026-10-05T00:00:00Z")})
	e.ignored("evt_ignored")
	for _, tc := range []struct {
		id, reason string
		want       error
		text       string
	}{
		{"evt_000001", "wrong", ledger.ErrBadVoid, "only sum and count meters"},
		{"evt_ignored", "wrong", ledger.ErrBadVoid, "no usage rows"},
		{"evt_nope", "wrong", ledger.ErrBadVoid, "no usage rows"},
		{"evt_000001", " ", ledger.ErrBadVoid, "a reason is required"},
	} {
		_, err := e.void(tc.id, tc.reason)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("void %s: %v, want %q", tc.id, err, tc.text)
		}
	}
	if n := e.countRows(ledger.KindVoid); n != 0 {
		t.Fatalf("refused voids wrote %d rows", n)
	}
}

// A voided event delivered again is a duplicate: its receipt stays, so it is
// never applied again, and the ledger keeps one usage and one void row.
func TestVoidedEventRedeliveredIsDuplicate(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.setClock(ts("2026-10-20T00:00:00Z"))
	e.write(row{customer: "c1", meter: "api", qty: q("5"), at: ts("2026-10-05T00:00:00Z")})
	if _, err := e.void("evt_000001", "test event"); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_000001"}`)
	sum := sha256.Sum256(body)
	d := &custody.Delivery{Provider: "test", EventID: "evt_000001", EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
		Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: ts("2026-10-21T00:00:00Z"), Status: custody.StatusApplied,
		Rows:    []ledger.UsageRow{{Customer: "c1", Meter: "api", Quantity: q("5"), OccurredAt: ts("2026-10-05T00:00:00Z"), Properties: "{}"}},
		Attempt: custody.Attempt{StatusCode: 200}}
	if err := e.Writer.Submit(e.ctx, d); err != nil {
		t.Fatal(err)
	}
	if d.Outcome != custody.OutcomeDuplicate {
		t.Fatalf("redelivery outcome %s", d.Outcome)
	}
	if u, v := e.countRows(ledger.KindUsage), e.countRows(ledger.KindVoid); u != 1 || v != 1 {
		t.Fatalf("usage %d, void %d rows; want 1 and 1", u, v)
	}
	oct := month(t, "2026-10", "UTC")
	if rep := e.query(ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: voidMeters}); len(rep.Lines) != 1 || rep.Lines[0].Quantity.Sign() != 0 {
		t.Fatalf("usage after redelivery: %+v", rep.Lines)
	}
}
