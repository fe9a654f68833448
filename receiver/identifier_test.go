package receiver_test

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// An event id, customer or meter longer than ledger.MaxIdentifierBytes is
// bad input on both backends: never a storage error retried forever
// (PostgreSQL's btree indexes refuse entries over about 2.7 KB, which was a
// 503 for every retry). A webhook whose event id is too long is a 400 that
// writes nothing (it cannot be a receipt's key); one whose customer or meter
// is too long is kept failed, like any payload the mapping cannot read; an
// ingest batch rejects such an event alone and stores the others.
func TestOverlongIdentifiersAreBadInput(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := &env{testenv.New(t, testenv.Options{Backend: backend})}
		long := incompressible(3000)
		atLimit := strings.Repeat("k", ledger.MaxIdentifierBytes)

		// Webhooks.
		r := e.Send(long, testenv.UsageBody("cus_1", "api_requests", "1"))
		if r.Code != 400 || !strings.Contains(r.Body.Error, "event id: is 3000 bytes, longer than the 1024 bytes") {
			t.Errorf("3 KB event id: %d %+v, want 400 naming the limit", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{0, 0, 0} {
			t.Fatalf("the refused event id wrote receipts, attempts, usage = %v", got)
		}
		for _, c := range []struct{ id, customer, meter, want string }{
			{"evt_long_customer", long, "api_requests", "customer: is 3000 bytes"},
			{"evt_long_meter", "cus_1", long, "meter: is 3000 bytes"},
		} {
			r := e.Send(c.id, testenv.UsageBody(c.customer, c.meter, "1"))
			if r.Code != 200 || r.Body.Status != custody.StatusFailed || !strings.Contains(r.Body.Error, c.want) {
				t.Errorf("%s: %d %+v, want 200 failed with %q", c.id, r.Code, r.Body, c.want)
			}
			// A retry is a duplicate of the kept receipt, not another failure to store it.
			if r := e.Send(c.id, testenv.UsageBody(c.customer, c.meter, "1")); r.Code != 200 || !r.Body.Duplicate {
				t.Errorf("%s again: %d %+v, want a 200 duplicate", c.id, r.Code, r.Body)
			}
		}
		if r := e.Send(atLimit, testenv.UsageBody(atLimit, "api_requests", "2")); r.Code != 200 || r.Body.Status != custody.StatusApplied {
			t.Errorf("event id and customer of exactly %d bytes: %d %+v", ledger.MaxIdentifierBytes, r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{3, 5, 1} {
			t.Errorf("receipts, attempts, usage = %v, want [3 5 1]", got)
		}
		if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE status = 'failed' AND error LIKE '%longer than the 1024 bytes%'`); n != 2 {
			t.Errorf("%d failed receipts name the limit, want 2", n)
		}

		// The ingest API: each over-long event is rejected with its reason,
		// the rest of the batch is stored.
		key, _ := e.CreateKey("app", 0, 0)
		resp := e.PostEvents(key, ingest.MediaCloudEventBatch, testenv.Batch(
			testenv.CloudEvent("app", "e1", "cus_2", "api_requests", "3"),
			testenv.CloudEvent("app", long, "cus_2", "api_requests", "100"),
			testenv.CloudEvent(long, "e2", "cus_2", "api_requests", "100"),
			testenv.CloudEvent("app", "e3", long, "api_requests", "100"),
			testenv.CloudEvent("app", "e4", "cus_2", "api_requests", "4"),
		))
		if resp.Code != 200 {
			t.Fatalf("batch: %d %s", resp.Code, resp.Raw)
		}
		want := []struct{ outcome, reason, err string }{
			{"applied", "", ""},
			{"rejected", ingest.RejectBadID, "id: is 3000 bytes"},
			{"rejected", ingest.RejectBadSource, "source: is 3000 bytes"},
			{"rejected", ingest.RejectBadSubject, "subject: is 3000 bytes"},
			{"applied", "", ""},
		}
		for i, w := range want {
			got := resp.Reply.Results[i]
			if got.Outcome != w.outcome || got.Reason != w.reason || !strings.Contains(got.Error, w.err) {
				t.Errorf("event %d: %+v, want %s %s %q", i, got, w.outcome, w.reason, w.err)
			}
		}
		// id and source each within the limit, but not the receipt key they make together.
		half := strings.Repeat("h", ledger.MaxIdentifierBytes/2+1)
		resp = e.PostEvents(key, ingest.MediaCloudEventBatch, testenv.Batch(testenv.CloudEvent(half, half, "cus_2", "api_requests", "100")))
		if got := resp.Reply.Results; resp.Code != 200 || len(got) != 1 || got[0].Reason != ingest.RejectBadID ||
			!strings.Contains(got[0].Error, "id and source: is 1027 bytes") {
			t.Errorf("long source and id together: %d %s", resp.Code, resp.Raw)
		}
		if got := e.Rows(); got != [3]int{5, 7, 3} {
			t.Errorf("receipts, attempts, usage = %v, want [5 7 3]", got)
		}
		if got := e.Totals(); got["cus_2"] != 7_000_000 {
			t.Errorf("totals %v, want cus_2 at 7", got)
		}
	})
}

// incompressible is n bytes of random hex: PostgreSQL compresses an index
// entry before it compares it with the limit, so a repeated character would
// fit where a real, random id does not.
func incompressible(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
