package invoice_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
)

// ignored stores a receipt whose event type has no mapping, through the
// writer like a webhook would.
func (e *env) ignored(id string) {
	e.T.Helper()
	body := fmt.Appendf(nil, `{"id":%q,"type":"customer.updated"}`, id)
	sum := sha256.Sum256(body)
	d := &custody.Delivery{Provider: "test", EventID: id, EventType: "customer.updated", Body: body, BodySHA256: sum[:],
		Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: e.Now(), Status: custody.StatusIgnored,
		Attempt: custody.Attempt{StatusCode: 200}}
	if err := e.Writer.Submit(context.Background(), d); err != nil {
		e.T.Fatal(err)
	}
}

// seedWithTail is seedForVerify (five usage events, an invoice over them)
// plus what arrived after the invoice: an ignored receipt and two more usage
// events, each in its own batch.
func seedWithTail(t *testing.T) (*env, string) {
	e, dir := seedForVerify(t)
	e.SetClock(ts("2026-11-03T00:00:00Z"))
	e.ignored("ign_1")                                                                      // receipt 6
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-11-02T00:00:00Z")}) // receipt 7, row 6
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("4"), At: ts("2026-11-02T01:00:00Z")}) // receipt 8, row 7
	return e, dir
}

func problems(rep *invoice.VerifyReport) string {
	var b strings.Builder
	for _, c := range rep.Checks {
		for _, p := range c.Problems {
			fmt.Fprintf(&b, "%s: %v\n", c.Name, p)
		}
	}
	return b.String()
}

// truncateTail deletes the newest usage rows with their receipts and
// delivery attempts, as someone with the file would: nothing links to the
// deleted rows, and no invoice covers them.
var truncateTail = []string{
	`DROP TRIGGER metered_usage_no_delete`,
	`DELETE FROM metered_usage WHERE id > 5`,
	`DELETE FROM delivery_attempts WHERE event_id IN ('evt_000006', 'evt_000007')`,
	`DELETE FROM receipts WHERE event_id IN ('evt_000006', 'evt_000007')`,
}

func TestVerifyDetectsTruncatedTail(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedWithTail(t)
	defer e.Close()
	if rep := verified(t, e); rep.First() != nil {
		t.Fatalf("intact database:\n%s", problems(rep))
	}
	tamper(t, dir, truncateTail...)
	rep := verified(t, e)
	got := problems(rep)
	if !strings.Contains(got, "ledger rows 6 to 7 are missing") || !strings.Contains(got, "receipts 7 to 8 are missing") {
		t.Fatalf("a truncated tail must be reported for both chains:\n%s", got)
	}
}

func TestVerifyDetectsDeletedIgnoredReceipt(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedWithTail(t)
	defer e.Close()
	// Not the newest: the next receipt's link breaks.
	tamper(t, dir, `DELETE FROM delivery_attempts WHERE event_id = 'ign_1'`, `DELETE FROM receipts WHERE event_id = 'ign_1'`)
	p := verified(t, e).First()
	if p == nil || p.Table != "receipts" || p.ID != 7 || !strings.Contains(p.Msg, "receipt 6 is missing") {
		t.Fatalf("deleted ignored receipt: %+v", p)
	}
}

func TestVerifyDetectsDeletedNewestIgnoredReceipt(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedWithTail(t)
	defer e.Close()
	e.ignored("ign_2") // receipt 9, the newest
	tamper(t, dir, `DELETE FROM delivery_attempts WHERE event_id = 'ign_2'`, `DELETE FROM receipts WHERE event_id = 'ign_2'`)
	p := verified(t, e).First()
	if p == nil || p.Table != "receipts" || p.ID != 9 || !strings.Contains(p.Msg, "receipt 9 is missing") {
		t.Fatalf("deleted newest ignored receipt: %+v", p)
	}
}

func TestVerifyDetectsEditedBody(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedWithTail(t)
	defer e.Close()
	tamper(t, dir, `UPDATE receipts SET body = CAST('{"id":"evt_000003","quantity":200}' AS BLOB) WHERE event_id = 'evt_000003'`)
	p := verified(t, e).First()
	if p == nil || p.Table != "receipts" || p.ID != 3 || !strings.Contains(p.Error(), "receipts row 3") ||
		!strings.Contains(p.Msg, "test/evt_000003") || !strings.Contains(p.Msg, "body was changed") {
		t.Fatalf("edited body: %+v", p)
	}
}

// A status is not in the receipt's hash once a replay has changed it; the
// replays table must then lead from the status the receipt was stored with
// (hashed) to the one it has now.
func TestVerifyDetectsStatusChangedOutsideAReplay(t *testing.T) {
	testenv.SQLiteOnly(t, "tampers in SQLite's dialect")
	e, dir := seedWithTail(t)
	defer e.Close()
	body := []byte(`{"id":"bad_1","type":"usage.recorded","data":{}}`)
	sum := sha256.Sum256(body)
	if err := e.Writer.Submit(e.Ctx, &custody.Delivery{Provider: "test", EventID: "bad_1", EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
		Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: e.Now(), Status: custody.StatusFailed,
		Error: "no customer", Attempt: custody.Attempt{StatusCode: 200}}); err != nil {
		t.Fatal(err)
	}
	m := ledger.NewMapper([]ledger.Mapping{{Type: "usage.recorded", Customer: ledger.Field{Path: "data.customer"},
		Meter: ledger.Field{Path: "data.meter"}, Quantity: ledger.Field{Path: "data.quantity"}}}, nil)
	replay := &custody.Replay{Provider: "test", EventID: "bad_1", Mapper: m, HandlerVersion: "test2"}
	if err := e.Writer.Submit(e.Ctx, replay); err != nil || replay.Outcome != custody.ReplayFailed {
		t.Fatalf("replay: %v %s", err, replay.Outcome)
	}
	if rep := verified(t, e); rep.First() != nil {
		t.Fatalf("after a replay:\n%s", problems(rep))
	}
	// failed -> ignored hides the event from `replay --status failed`.
	tamper(t, dir, `UPDATE receipts SET status = 'ignored' WHERE event_id = 'bad_1'`)
	p := verified(t, e).First()
	if p == nil || p.Check != "receipt status" || p.ID != 9 || !strings.Contains(p.Msg, `has status "ignored", but its last replay`) {
		t.Fatalf("status changed after a replay: %+v", p)
	}
	// Never replayed: the status is the hashed one.
	tamper(t, dir, `UPDATE receipts SET status = 'failed' WHERE event_id = 'ign_1'`)
	rep := verified(t, e)
	if c := rep.Checks[4]; c.Name != "receipt chain" || len(c.Problems) != 1 || c.Problems[0].ID != 6 || !strings.Contains(c.Problems[0].Msg, "status failed") {
		t.Fatalf("status changed without a replay: %+v", c)
	}
}
