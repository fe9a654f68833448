package invoice_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

var voidMeters = ledger.NewMeters([]ledger.Meter{
	{Name: "api", Aggregation: ledger.AggSum, Unit: "requests"},
	{Name: "calls", Aggregation: ledger.AggCount},
	{Name: "seats", Aggregation: ledger.AggMax, Unit: "seats"},
})

// void voids an event the way `hookledger void` does: one op through the writer.
func (e *env) void(eventID, reason string) (*custody.VoidEvent, error) {
	v := &custody.VoidEvent{Void: ledger.Void{Provider: "test", EventID: eventID, Reason: reason, Actor: "alice"}, Meters: voidMeters}
	return v, e.Writer.Submit(e.Ctx, v)
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
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("1000"), At: ts("2026-10-05T00:00:00Z")}, // evt_000001: the wrong one
		row{Customer: "c1", Meter: "api", Qty: q("7"), At: ts("2026-10-06T00:00:00Z")},
		row{Customer: "c1", Meter: "calls", Qty: q("3"), At: ts("2026-10-06T00:00:00Z")}, // evt_000003
		row{Customer: "c1", Meter: "calls", Qty: q("4"), At: ts("2026-10-07T00:00:00Z")},
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
	rep := e.Query(ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: voidMeters})
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
	res := e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Meters: voidMeters, Now: at("2026-11-02T00:00:00Z")})
	wantLines(t, byCustomer(res.Invoices)["c1"], map[string]string{"api 2026-10": "7", "calls 2026-10": "1"})
	if p, err := invoice.Verify(e.Ctx, e.DB); err != nil || p.First() != nil {
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
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("1000"), At: ts("2026-10-05T00:00:00Z")},
		row{Customer: "c1", Meter: "api", Qty: q("7"), At: ts("2026-10-06T00:00:00Z")},
	)
	oct := month(t, "2026-10", "UTC")
	res := e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Meters: voidMeters, Now: at("2026-11-02T00:00:00Z")})
	wantLines(t, byCustomer(res.Invoices)["c1"], map[string]string{"api 2026-10": "1007"})
	e.SetClock(ts("2026-11-03T00:00:00Z"))
	if _, err := e.void("evt_000001", "milliseconds sent as seconds"); err != nil {
		t.Fatal(err)
	}
	late, err := invoice.LateUsage(e.Ctx, e.DB, "c1", voidMeters)
	if err != nil || len(late) != 1 || !late[0].Quantity.Equal(q("-1000")) {
		t.Fatalf("late usage: %+v %v", late, err)
	}
	nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: voidMeters, Now: at("2026-12-02T00:00:00Z")})
	c1 := byCustomer(nov.Invoices)["c1"]
	wantLines(t, c1, map[string]string{"api 2026-10*": "-1000"})
	if l := c1.Lines[0]; l.Adjustments != 1 || l.Rows != 0 {
		t.Fatalf("late void line: %+v", l)
	}
	if p, err := invoice.Verify(e.Ctx, e.DB); err != nil || p.First() != nil {
		t.Fatalf("verify: %v %v", p.First(), err)
	}
}

func TestVoidRefusals(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "seats", Qty: q("4"), At: ts("2026-10-05T00:00:00Z")})
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
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("5"), At: ts("2026-10-05T00:00:00Z")})
	if _, err := e.void("evt_000001", "test event"); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_000001"}`)
	sum := sha256.Sum256(body)
	d := &custody.Delivery{Provider: "test", EventID: "evt_000001", EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
		Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: ts("2026-10-21T00:00:00Z"), Status: custody.StatusApplied,
		Rows:    []ledger.UsageRow{{Customer: "c1", Meter: "api", Quantity: q("5"), OccurredAt: ts("2026-10-05T00:00:00Z"), Properties: "{}"}},
		Attempt: custody.Attempt{StatusCode: 200}}
	if err := e.Writer.Submit(e.Ctx, d); err != nil {
		t.Fatal(err)
	}
	if d.Outcome != custody.OutcomeDuplicate {
		t.Fatalf("redelivery outcome %s", d.Outcome)
	}
	if u, v := e.countRows(ledger.KindUsage), e.countRows(ledger.KindVoid); u != 1 || v != 1 {
		t.Fatalf("usage %d, void %d rows; want 1 and 1", u, v)
	}
	oct := month(t, "2026-10", "UTC")
	if rep := e.Query(ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: voidMeters}); len(rep.Lines) != 1 || rep.Lines[0].Quantity.Sign() != 0 {
		t.Fatalf("usage after redelivery: %+v", rep.Lines)
	}
}

// A void racing redeliveries of the same event (and a second void) through
// the writer: whatever order the batches take, the event has one usage row
// and one void row, and nets to zero.
func TestConcurrentVoidAndRedeliveryNeverDoubleCount(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	body := []byte(`{"id":"evt_race"}`)
	sum := sha256.Sum256(body)
	delivery := func() *custody.Delivery {
		return &custody.Delivery{Provider: "test", EventID: "evt_race", EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
			Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: ts("2026-10-05T00:00:00Z"), Status: custody.StatusApplied,
			Rows:    []ledger.UsageRow{{Customer: "c1", Meter: "api", Quantity: q("9"), OccurredAt: ts("2026-10-05T00:00:00Z"), Properties: "{}"}},
			Attempt: custody.Attempt{StatusCode: 200}}
	}
	if err := e.Writer.Submit(e.Ctx, delivery()); err != nil {
		t.Fatal(err)
	}
	const redeliveries = 40
	ops := make([]custody.Op, 0, redeliveries+2)
	voids := []*custody.VoidEvent{
		{Void: ledger.Void{Provider: "test", EventID: "evt_race", Reason: "race one", Actor: "a"}, Meters: voidMeters},
		{Void: ledger.Void{Provider: "test", EventID: "evt_race", Reason: "race two", Actor: "b"}, Meters: voidMeters},
	}
	for i := range redeliveries {
		ops = append(ops, delivery())
		if i == redeliveries/3 {
			ops = append(ops, voids[0])
		}
		if i == 2*redeliveries/3 {
			ops = append(ops, voids[1])
		}
	}
	// Submitted from one goroutine each, so the writer's batches mix them
	// in whatever order they arrive.
	errs := make(chan error, len(ops))
	for _, op := range ops {
		go func() { errs <- e.Writer.Submit(e.Ctx, op) }()
	}
	var voided, refused int
	for range ops {
		switch err := <-errs; {
		case err == nil:
		case errors.Is(err, ledger.ErrAlreadyVoided):
			refused++
		default:
			t.Fatal(err)
		}
	}
	for _, v := range voids {
		if len(v.Rows) > 0 {
			voided++
		}
	}
	if voided != 1 || refused != 1 {
		t.Fatalf("%d voids succeeded, %d refused; want 1 and 1", voided, refused)
	}
	if u, v := e.countRows(ledger.KindUsage), e.countRows(ledger.KindVoid); u != 1 || v != 1 {
		t.Fatalf("usage %d, void %d rows; want 1 and 1", u, v)
	}
	oct := month(t, "2026-10", "UTC")
	if rep := e.Query(ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: voidMeters}); len(rep.Lines) != 1 || rep.Lines[0].Quantity.Sign() != 0 {
		t.Fatalf("usage after the race: %+v", rep.Lines)
	}
	if p, err := invoice.Verify(e.Ctx, e.DB); err != nil || p.First() != nil {
		t.Fatalf("verify: %v %v", p.First(), err)
	}
}

var amendMapper = ledger.NewMapper([]ledger.Mapping{{Type: "usage.recorded", Customer: ledger.Field{Path: "data.customer"},
	Meter: ledger.Field{Path: "data.meter"}, Quantity: ledger.Field{Path: "data.quantity"}, OccurredAt: ledger.Field{Path: "data.at"}}},
	[]string{"api", "calls", "seats"})

// deliver stores one mapped event as a webhook would.
func (e *env) deliver(id, body string) {
	e.T.Helper()
	sum := sha256.Sum256([]byte(body))
	d := &custody.Delivery{Provider: "test", EventID: id, EventType: "usage.recorded", Body: []byte(body), BodySHA256: sum[:],
		Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: e.Now(), Attempt: custody.Attempt{StatusCode: 200}}
	d.Classify(amendMapper)
	if err := e.Writer.Submit(e.Ctx, d); err != nil || d.StoredStatus != custody.StatusApplied {
		e.T.Fatalf("deliver %s: %v %s %s", id, err, d.StoredStatus, d.Error)
	}
}

func TestAmendToAnotherCustomerMovesExactlyTheQuantity(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.deliver("evt_a", `{"data":{"customer":"c1","meter":"api","quantity":12.5,"at":"2026-10-05T00:00:00Z"}}`)
	e.deliver("evt_b", `{"data":{"customer":"c1","meter":"api","quantity":3,"at":"2026-10-06T00:00:00Z"}}`)
	e.deliver("evt_c", `{"data":{"customer":"c2","meter":"api","quantity":4,"at":"2026-10-06T00:00:00Z"}}`)
	oct := month(t, "2026-10", "UTC")
	totals := func() map[string]string {
		m := map[string]string{}
		for _, l := range e.Query(ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: voidMeters}).Lines {
			m[l.Customer] = l.Quantity.String()
		}
		return m
	}
	before := totals()
	a := &custody.AmendEvent{Void: ledger.Void{Provider: "test", EventID: "evt_a", Reason: "wrong customer", Actor: "alice"},
		Mapper: amendMapper, Meters: voidMeters, HandlerVersion: "test",
		Edit: func(b []byte) ([]byte, error) {
			return []byte(strings.Replace(string(b), `"customer":"c1"`, `"customer":"c2"`, 1)), nil
		}}
	if err := e.Writer.Submit(e.Ctx, a); err != nil {
		t.Fatal(err)
	}
	after := totals()
	if before["c1"] != "15.5" || before["c2"] != "4" || after["c1"] != "3" || after["c2"] != "16.5" {
		t.Fatalf("totals before %v, after %v", before, after)
	}
	if d := a.Amended; d.EventID != "evt_a~amend" || d.Outcome != custody.OutcomeInserted || len(a.Voids) != 1 {
		t.Fatalf("amended %+v, voids %+v", d, a.Voids)
	}
	rows, err := invoice.EventRows(e.Ctx, e.DB, "test", "evt_a~amend")
	if err != nil || len(rows) != 1 || rows[0].Ref != "event:test/evt_a" || rows[0].Customer != "c2" ||
		rows[0].OccurredAt != ts("2026-10-05T00:00:00Z").UnixMilli() || !rows[0].Quantity.Equal(q("12.5")) {
		t.Fatalf("amended rows: %+v %v", rows, err)
	}
	// The original's trace shows its row and the void that names it.
	orig, err := invoice.EventRows(e.Ctx, e.DB, "test", "evt_a")
	if err != nil || len(orig) != 2 || orig[1].Kind != ledger.KindVoid || orig[1].Ref != fmt.Sprintf("row:%d", orig[0].ID) {
		t.Fatalf("original's rows: %+v %v", orig, err)
	}
	// Amending again is refused as a second void, and writes nothing.
	if err := e.Writer.Submit(e.Ctx, a); !errors.Is(err, ledger.ErrAlreadyVoided) {
		t.Fatalf("second amend: %v", err)
	}
	if got := totals(); got["c1"] != "3" || got["c2"] != "16.5" {
		t.Fatalf("totals after a refused amend: %v", got)
	}
	if p, err := invoice.Verify(e.Ctx, e.DB); err != nil || p.First() != nil {
		t.Fatalf("verify: %v %v", p.First(), err)
	}
}

// verify finds a void that does not compensate its row, and a row voided
// twice, even when the rows are correctly chained (appended through the
// writer by hand, past VoidEvent's checks).
func TestVerifyChecksVoids(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("5"), At: ts("2026-10-05T00:00:00Z")})
	bad := func(r ledger.Row) {
		r.Kind, r.Meter, r.Properties, r.Reason, r.OccurredAt = ledger.KindVoid, "api", "{}", "hand-made", ts("2026-10-05T00:00:00Z").UnixMilli()
		if r.Customer == "" {
			r.Customer = "c1"
		}
		err := e.Writer.Submit(e.Ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
			r.RecordedAt = tx.Now()
			return tx.Append(ctx, &r)
		}))
		if err != nil {
			t.Fatal(err)
		}
	}
	bad(ledger.Row{EventID: ledger.VoidEventID("test", "evt_000001"), Ref: "row:1", Quantity: q("-5")}) // row 2: right
	bad(ledger.Row{EventID: "void:other", Ref: "row:1", Quantity: q("-5")})                             // row 3: twice
	bad(ledger.Row{EventID: "void:x", Ref: "row:99", Quantity: q("-5")})                                // row 4: no such row
	bad(ledger.Row{EventID: "void:y", Ref: "row:2", Quantity: q("5")})                                  // row 5: voids a void
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	var c ledger.CheckResult
	for _, ch := range rep.Checks {
		if ch.Name == "voids" {
			c = ch
		}
	}
	want := []string{"voids row 1, which row 2 voided already", "voids row 99, which does not exist", "voids row 2, which is not a usage row"}
	if c.Checked != 4 || len(c.Problems) != len(want) {
		t.Fatalf("voids check: %+v", c)
	}
	for i, w := range want {
		if p := c.Problems[i]; p.ID != int64(i+3) || !strings.Contains(p.Msg, w) {
			t.Errorf("problem %d: %+v, want row %d: %q", i, p, i+3, w)
		}
	}
}

// A bulk amend (amend --remap after a mapping fix) stopped halfway, with one
// event failing inside its op, resumes from a fresh selection: every event
// is voided and amended exactly once, the failed one whole, and running the
// first run's ops again voids nothing twice.
func TestInterruptedBulkAmendResumesWithoutVoidingTwice(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	for i := range 6 {
		e.deliver(fmt.Sprintf("evt_%d", i), fmt.Sprintf(`{"data":{"customer":"c1","account":"acct_%d","meter":"api","quantity":%d,"at":"2026-10-0%dT00:00:00Z"}}`, i%2, i+1, i+1))
	}
	// The fixed mapping bills the account, not the customer field.
	fixed := ledger.NewMapper([]ledger.Mapping{{Type: "usage.recorded", Customer: ledger.Field{Path: "data.account"},
		Meter: ledger.Field{Path: "data.meter"}, Quantity: ledger.Field{Path: "data.quantity"}, OccurredAt: ledger.Field{Path: "data.at"}}},
		[]string{"api", "calls", "seats"})
	oct := month(t, "2026-10", "UTC")
	window := schema.LedgerFilter{From: oct.Start.UnixMilli(), To: oct.End.UnixMilli()}
	tmpl := custody.AmendEvent{Void: ledger.Void{Reason: "mapping fixed", Actor: "ops"}, Mapper: fixed, Meters: voidMeters, HandlerVersion: "test-2"}
	remap := func(ids []string, failOn string) []custody.Op {
		t.Helper()
		plan, err := custody.PlanRemap(e.Ctx, e.DB, "test", ids, tmpl, time.UTC)
		if err != nil || len(plan.Refused) != 0 {
			t.Fatalf("plan: %+v %v", plan, err)
		}
		var ops []custody.Op
		for _, a := range plan.Ops {
			ops = append(ops, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
				if err := a.Apply(ctx, tx); err != nil {
					return err
				}
				if a.Void.EventID == failOn { // after its void and its amendment were written
					return errors.New("disk on fire")
				}
				return nil
			}))
		}
		return ops
	}
	first, err := ledger.SelectEvents(e.Ctx, e.DB, "test", window)
	if err != nil || len(first) != 6 {
		t.Fatalf("selected %v %v", first, err)
	}
	stale := remap(first, "")
	// The run stops after four events; the third failed.
	res, err := custody.CorrectAll(e.Ctx, e.Writer, remap(first, "evt_2")[:4])
	if err != nil || res.Corrected != 3 || len(res.Failed) != 1 {
		t.Fatalf("first run: %+v %v", res, err)
	}
	if n := e.countRows(ledger.KindVoid); n != 3 {
		t.Fatalf("after the first run: %d void rows, want 3 (the failed event wrote nothing)", n)
	}
	// Resumed: the selection holds the events not voided and the three
	// amendments, which the current mapping maps as they are.
	rest, err := ledger.SelectEvents(e.Ctx, e.DB, "test", window)
	if err != nil || strings.Join(rest, " ") != "evt_2 evt_4 evt_5 evt_0~amend evt_1~amend evt_3~amend" {
		t.Fatalf("resumed selection %v %v", rest, err)
	}
	if res, err := custody.CorrectAll(e.Ctx, e.Writer, remap(rest, "")); err != nil || res.Corrected != 3 || len(res.Failed) != 0 {
		t.Fatalf("resumed run: %+v %v", res, err)
	}
	// The first run's plan run again (a second operator resuming it):
	// every event is voided already, nothing is written.
	if res, err := custody.CorrectAll(e.Ctx, e.Writer, stale); err != nil || res.AlreadyVoided != 6 || res.Corrected != 0 {
		t.Fatalf("stale run: %+v %v", res, err)
	}
	left, err := ledger.SelectEvents(e.Ctx, e.DB, "test", window)
	if err != nil || len(left) != 6 || len(remap(left, "")) != 0 {
		t.Fatalf("left after resuming: %v %v", left, err)
	}
	if u, v := e.countRows(ledger.KindUsage), e.countRows(ledger.KindVoid); u != 12 || v != 6 {
		t.Fatalf("usage %d, void %d rows; want 12 and 6", u, v)
	}
	got := map[string]string{}
	for _, l := range e.Query(ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: voidMeters}).Lines {
		got[l.Customer] = l.Quantity.String()
	}
	if got["c1"] != "0" || got["acct_0"] != "9" || got["acct_1"] != "12" { // 1+3+5 and 2+4+6
		t.Fatalf("totals after the remap: %v", got)
	}
	if p, err := invoice.Verify(e.Ctx, e.DB); err != nil || p.First() != nil {
		t.Fatalf("verify: %v %v", p.First(), err)
	}
}
