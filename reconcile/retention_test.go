package reconcile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/schema"
)

const retention30_60 = "retention:\n  payload: 30d\n  keys: 60d\n"

// retentionFixture stores, through the receiver, stripe events at three ages:
// 70 days (past keys), 40 days (past payload) and 10 days (kept whole), plus a
// failed event at 70 days and an ignored one at 40 days.
func retentionFixture(t *testing.T, e *env) {
	t.Helper()
	post := func(age time.Duration, body []byte) {
		e.Clock.Set(testNow.Add(-age))
		if code, r := e.post("stripe", "", "", body); code != 200 || r["duplicate"] != false {
			t.Fatalf("webhook: %d %v", code, r)
		}
	}
	day := 24 * time.Hour
	n := 0
	for _, age := range []time.Duration{70 * day, 40 * day, 10 * day} {
		for k := 0; k < 2; k++ {
			post(age, stripeEventJSON(n, testNow.Add(-age)))
			n++
		}
	}
	post(70*day, []byte(`{"id":"evt_failed","object":"event","type":"billing.meter_event","created":1,"data":{"object":{"customer":"cus_1"}}}`))
	post(40*day, []byte(`{"id":"evt_ignored","object":"event","type":"customer.created","created":1,"data":{}}`))
	e.Clock.Set(testNow)
	if _, err := e.DB.Write.Exec(`INSERT INTO redelivery_requests (provider, event_id, delivery_id, requested_at, status_code)
		VALUES ('github', 'g_old', '1', ?, 202), ('github', 'g_new', '2', ?, 202)`,
		testNow.Add(-70*day).UnixMilli(), testNow.Add(-day).UnixMilli()); err != nil {
		t.Fatal(err)
	}
}

func TestPruneKeepsTombstonesAndTheLedger(t *testing.T) {
	e := newEnv(t, envOptions{retention: retention30_60})
	retentionFixture(t, e)
	pruneBatch = 2 // several batches per status
	t.Cleanup(func() { pruneBatch = 500 })
	ctx := context.Background()
	p := Retention{Payload: e.Config.Retention.Payload.Duration, Keys: e.Config.Retention.Keys.Duration}
	usageRows, usage := e.Int(`SELECT COUNT(*) FROM metered_usage`), e.usageSum("stripe")
	var digest []byte
	if err := e.DB.Read.Get(&digest, `SELECT body_sha256 FROM receipts WHERE event_id = 'evt_002'`); err != nil {
		t.Fatal(err)
	}

	dry, err := Prune(ctx, e.DB, e.Writer, p, testNow, true)
	if err != nil {
		t.Fatal(err)
	}
	if dry.BodiesPruned != 5 || dry.KeysDeleted != 2 || dry.FailedKept != 1 || dry.RedeliveryRequestsDeleted != 1 {
		t.Errorf("dry run %+v", dry)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE body IS NULL`); n != 0 {
		t.Fatalf("dry run pruned %d bodies", n)
	}

	rep, err := Prune(ctx, e.DB, e.Writer, p, testNow, false)
	if err != nil {
		t.Fatal(err)
	}
	if rep.BodiesPruned != 5 || rep.KeysDeleted != 2 || rep.FailedKept != 1 || rep.RedeliveryRequestsDeleted != 1 {
		t.Errorf("prune %+v", rep)
	}
	// 70 days: applied receipts and their attempts are gone; the failed one is whole.
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_id IN ('evt_000', 'evt_001')`); n != 0 {
		t.Errorf("receipts past keys: %d", n)
	}
	if n := len(e.EventAttempts("stripe", "evt_000", "evt_001")); n != 0 {
		t.Errorf("attempts of deleted receipts: %d", n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_id = 'evt_failed' AND status = 'failed' AND body IS NOT NULL`); n != 1 {
		t.Errorf("failed receipt not kept whole")
	}
	// 40 days: tombstones with digest and time, no body, no signature headers.
	var tomb struct {
		Body       []byte `db:"body"`
		Sum        []byte `db:"body_sha256"`
		Headers    string `db:"signature_headers"`
		ReceivedAt int64  `db:"received_at"`
		Status     string `db:"status"`
	}
	if err := e.DB.Read.Get(&tomb, `SELECT body, body_sha256, signature_headers, received_at, status FROM receipts WHERE event_id = 'evt_002'`); err != nil {
		t.Fatal(err)
	}
	if tomb.Body != nil || tomb.Headers != "" || !bytes.Equal(tomb.Sum, digest) || tomb.Status != "applied" ||
		tomb.ReceivedAt != testNow.Add(-40*24*time.Hour).UnixMilli() {
		t.Errorf("tombstone %+v", tomb)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE body IS NULL`); n != 3 {
		t.Errorf("tombstones = %d, want 3", n)
	}
	// 10 days: whole.
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_id IN ('evt_004', 'evt_005') AND body IS NOT NULL`); n != 2 {
		t.Errorf("recent bodies pruned")
	}
	// The ledger is untouched.
	if n := e.Int(`SELECT COUNT(*) FROM metered_usage`); n != usageRows || e.usageSum("stripe") != usage {
		t.Errorf("ledger changed: %d rows, total %s", n, e.usageSum("stripe"))
	}
	if n := e.Int(`SELECT COUNT(*) FROM redelivery_requests`); n != 1 {
		t.Errorf("redelivery requests = %d, want the recent one", n)
	}

	// The prune is logged with its cutoffs.
	if n := e.Int(`SELECT COUNT(*) FROM prune_runs WHERE bodies_pruned = 5 AND keys_deleted = 2 AND pruned_at = ?
		AND ledger_head_id = (SELECT MAX(id) FROM metered_usage) AND payload_before = ? AND keys_before = ?`,
		testNow.UnixMilli(), testNow.Add(-30*24*time.Hour).UnixMilli(), testNow.Add(-60*24*time.Hour).UnixMilli()); n != 1 {
		t.Errorf("prune_runs rows matching = %d", n)
	}

	// A second prune finds nothing more, and logs nothing.
	again, err := Prune(ctx, e.DB, e.Writer, p, testNow, false)
	if err != nil || again.BodiesPruned != 0 || again.KeysDeleted != 0 {
		t.Errorf("second prune %+v %v", again, err)
	}
	if n := e.Int(`SELECT COUNT(*) FROM prune_runs`); n != 1 {
		t.Errorf("prune_runs = %d after a prune that changed nothing", n)
	}

	// The receipts chain excuses what retention deleted (receipts 1 and 2,
	// recorded in the same transaction), and nothing above it.
	if n := e.Int(`SELECT receipts_pruned_through FROM chain_head`); n != 2 {
		t.Errorf("receipts_pruned_through = %d, want 2", n)
	}
	// So are the bodies it cleared: the chain head records the cutoff.
	if n := e.Int(`SELECT payload_pruned_before FROM chain_head`); int64(n) != testNow.Add(-30*24*time.Hour).UnixMilli() {
		t.Errorf("payload_pruned_before = %d, want the payload cutoff", n)
	}
	if rep, err := invoice.Verify(ctx, e.DB); err != nil || rep.First() != nil {
		t.Fatalf("verify after prune: %v %v", rep.First(), err)
	}
	// A body deleted by hand, past what retention covers, is not excused.
	var kept struct {
		Body    []byte `db:"body"`
		Headers string `db:"signature_headers"`
	}
	if err := e.DB.Read.Get(&kept, `SELECT body, signature_headers FROM receipts WHERE event_id = 'evt_004'`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Write.Exec(`UPDATE receipts SET body = NULL, signature_headers = '' WHERE event_id = 'evt_004'`); err != nil {
		t.Fatal(err)
	}
	vrep, err := invoice.Verify(ctx, e.DB)
	if p := vrep.First(); err != nil || p == nil || p.Table != "receipts" || !strings.Contains(p.Msg, "no retention.payload prune covers it") {
		t.Fatalf("a body deleted by hand: %v %v", p, err)
	}
	if _, err := e.DB.Write.Exec(`UPDATE receipts SET body = ?, signature_headers = ? WHERE event_id = 'evt_004'`, kept.Body, kept.Headers); err != nil {
		t.Fatal(err)
	}
	if _, err := e.DB.Write.Exec(`DELETE FROM receipts WHERE event_id = 'evt_003'`); err != nil {
		t.Fatal(err)
	}
	// The receipt chain reports the gap (and the usage row, whose receipt
	// is gone, is reported too: it names its receipt by id since 0015).
	vrep, err = invoice.Verify(ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	var gap bool
	for _, c := range vrep.Checks {
		for _, p := range c.Problems {
			gap = gap || p.Table == "receipts" && strings.Contains(p.Msg, "receipt 4 is missing")
		}
	}
	if !gap {
		t.Fatalf("a receipt deleted above what retention deleted: no gap reported, first problem %v", vrep.First())
	}
}

// A body changed after it arrived is evidence: prune keeps its receipt
// whole and says so, and prunes the others.
func TestPruneKeepsTamperedBodies(t *testing.T) {
	e := newEnv(t, envOptions{retention: retention30_60})
	retentionFixture(t, e)
	ctx := context.Background()
	tamper := `UPDATE receipts SET body = ? WHERE event_id IN ('evt_000', 'evt_002')`
	if _, err := e.DB.Write.Exec(tamper, []byte(`{"id":"evt_000","edited":true}`)); err != nil {
		t.Fatal(err)
	}
	p := Retention{Payload: e.Config.Retention.Payload.Duration, Keys: e.Config.Retention.Keys.Duration}
	rep, err := Prune(ctx, e.DB, e.Writer, p, testNow, false)
	if err != nil {
		t.Fatal(err)
	}
	// evt_000 is past both cutoffs and evt_002 past the payload's: each is
	// kept, and counted once.
	if rep.TamperedKept != 2 || rep.BodiesPruned != 3 || rep.KeysDeleted != 1 {
		t.Errorf("prune %+v", rep)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_id IN ('evt_000', 'evt_002') AND body IS NOT NULL AND signature_headers != ''`); n != 2 {
		t.Errorf("tampered receipts kept whole: %d, want 2", n)
	}
	vrep, err := invoice.Verify(ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	var changed int
	for _, c := range vrep.Checks {
		for _, p := range c.Problems {
			if strings.Contains(p.Msg, "the body was changed after it was received") {
				changed++
			}
		}
	}
	if changed != 2 {
		t.Errorf("verify reports %d changed bodies, want 2: %v", changed, vrep.First())
	}
}

func TestRedeliveryOfPrunedEventIsDuplicate(t *testing.T) {
	e := newEnv(t, envOptions{retention: retention30_60})
	retentionFixture(t, e)
	ctx := context.Background()
	if _, err := Prune(ctx, e.DB, e.Writer, Retention{Payload: 30 * 24 * time.Hour, Keys: 60 * 24 * time.Hour}, testNow, false); err != nil {
		t.Fatal(err)
	}
	rows, usage, attempts := e.Int(`SELECT COUNT(*) FROM metered_usage`), e.usageSum("stripe"), e.Attempts()

	// The 40-day-old event arrives again (a manual resend): its key is kept for 60 days.
	body := stripeEventJSON(2, testNow.Add(-40*24*time.Hour))
	code, r := e.post("stripe", "", "", body)
	if code != 200 || r["duplicate"] != true || r["accepted"] != true || r["status"] != "applied" {
		t.Fatalf("redelivery of a pruned event: %d %v", code, r)
	}
	if e.Int(`SELECT COUNT(*) FROM metered_usage`) != rows || e.usageSum("stripe") != usage {
		t.Errorf("a pruned event's redelivery changed the ledger")
	}
	sum := sha256.Sum256(body)
	if n := e.CountAttempts(func(a schema.Attempt) bool {
		return a.EventID == "evt_002" && a.Outcome == "duplicate" && bytes.Equal(a.BodySHA256, sum[:])
	}); n != 1 {
		t.Errorf("duplicate attempt not recorded (%d)", n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_id = 'evt_002' AND body IS NULL`); n != 1 {
		t.Errorf("the redelivery brought the body back: pruned data must stay pruned")
	}

	// Same id, other bytes: a mismatch, kept out of the ledger and listed by the audit.
	other := []byte(`{"id":"evt_002","object":"event","type":"billing.meter_event","created":1,"data":{"object":{"customer":"cus_9","value":100}}}`)
	if code, r := e.post("stripe", "", "", other); code != 200 || r["duplicate"] != true {
		t.Fatalf("mismatch: %d %v", code, r)
	}
	if e.Int(`SELECT COUNT(*) FROM metered_usage`) != rows {
		t.Errorf("mismatching body changed the ledger")
	}
	if n := e.Attempts(); n != attempts+2 {
		t.Errorf("attempts %d, want %d", n, attempts+2)
	}
	ms, err := Mismatches(ctx, e.DB, MismatchFilter{Provider: "stripe"})
	if err != nil {
		t.Fatal(err)
	}
	otherSum := sha256.Sum256(other)
	if len(ms) != 1 || ms[0].EventID != "evt_002" || ms[0].OriginalSource != "webhook" ||
		!bytes.Equal(ms[0].OriginalSHA256, sum[:]) || !bytes.Equal(ms[0].DuplicateSHA256, otherSum[:]) ||
		!ms[0].OriginalTime.Equal(testNow.Add(-40*24*time.Hour)) || !ms[0].DuplicateTime.Equal(testNow) {
		t.Errorf("mismatches %+v", ms)
	}
	if ms, err := Mismatches(ctx, e.DB, MismatchFilter{Provider: "github"}); err != nil || len(ms) != 0 {
		t.Errorf("provider filter: %+v (err %v)", ms, err)
	}
	if ms, err := Mismatches(ctx, e.DB, MismatchFilter{Since: testNow.Add(time.Second)}); err != nil || len(ms) != 0 {
		t.Errorf("since filter: %+v (err %v)", ms, err)
	}
}

func TestPruneStorageFailureIsReported(t *testing.T) {
	e := newEnv(t, envOptions{retention: retention30_60})
	retentionFixture(t, e)
	e.Writer.Close()
	rep, err := Prune(context.Background(), e.DB, e.Writer, Retention{Payload: 30 * 24 * time.Hour}, testNow, false)
	if err == nil || rep.BodiesPruned != 0 {
		t.Fatalf("err %v report %+v", err, rep)
	}
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE body IS NULL`); n != 0 {
		t.Errorf("pruned %d with a closed writer", n)
	}
}
