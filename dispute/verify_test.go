package dispute

import (
	"context"
	"crypto/sha256"
	"github.com/hookledger/hookledger/internal/testenv"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
)

func eventOf(t *testing.T, tr *Trace, id string) EventView {
	t.Helper()
	for _, ev := range tr.Events {
		if ev.EventID == id {
			return ev
		}
	}
	t.Fatalf("event %s not in trace %s", id, tr.Target)
	return EventView{}
}

// A body deleted some other way than by retention.payload is evidence gone:
// a problem, never "pruned by retention".
func TestBodyDeletedByHandIsMissing(t *testing.T) {
	testenv.SQLiteOnly(t, "edits rows in SQLite's dialect")
	for _, edit := range []struct{ name, sql string }{
		{"body only", `UPDATE receipts SET body = NULL WHERE event_id = 'evt_b'`},
		// As a prune does, but no prune covers the receipt.
		{"body and signature headers", `UPDATE receipts SET body = NULL, signature_headers = '' WHERE event_id = 'evt_b'`},
	} {
		t.Run(edit.name, func(t *testing.T) {
			e := seedLine(t)
			e.Exec(edit.sql)
			tr := e.trace("invoice:1/1")
			ev := eventOf(t, tr, "evt_b")
			if v := ev.Verification; v.Status != Invalid || v.Text != "body missing" || !strings.Contains(v.Detail, "no retention.payload prune covers it") {
				t.Errorf("receipt: %+v", v)
			}
			for _, a := range ev.Attempts {
				if a.Signature.Status != Invalid {
					t.Errorf("attempt %d: %+v", a.ID, a.Signature)
				}
			}
			if s := tr.Summary.Bodies; s.Pruned != 0 || s.Invalid != 1 || len(tr.Summary.Problems) != 1 {
				t.Errorf("bodies %+v, problems %v", s, tr.Summary.Problems)
			}
		})
	}
}

func TestVerificationStates(t *testing.T) {
	testenv.SQLiteOnly(t, "edits rows in SQLite's dialect")
	e := seedLine(t)

	t.Run("altered body is invalid", func(t *testing.T) {
		e.Exec(`UPDATE receipts SET body = CAST(REPLACE(CAST(body AS TEXT), '"quantity":3', '"quantity":30') AS BLOB) WHERE event_id = 'evt_a'`)
		ev := eventOf(t, e.trace("invoice:1/1"), "evt_a")
		if ev.Verification.Status != Invalid || ev.Verification.Text != "invalid" || !strings.Contains(ev.Verification.Detail, "changed after it was received") {
			t.Errorf("receipt: %+v", ev.Verification)
		}
		if ev.Attempts[0].Signature.Status != Invalid {
			t.Errorf("attempt: %+v", ev.Attempts[0].Signature)
		}
		// Rewriting the receipt's digest to match does not help: the
		// attempt that inserted it recorded the original digest.
		var b []byte
		if err := e.DB.Read.Get(&b, `SELECT body FROM receipts WHERE event_id = 'evt_a'`); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		e.Exec(`DROP TRIGGER receipts_custody_facts_no_update`) // as someone with the file would
		e.Exec(`UPDATE receipts SET body_sha256 = ? WHERE event_id = 'evt_a'`, sum[:])
		ev = eventOf(t, e.trace("invoice:1/1"), "evt_a")
		if ev.Verification.Status != Invalid || !strings.Contains(ev.Verification.Detail, "the receipt was rewritten") {
			t.Errorf("receipt with a rewritten digest: %+v", ev.Verification)
		}
	})

	t.Run("pruned body is pruned, not invalid", func(t *testing.T) {
		e.PruneBody("default", "evt_b")
		tr := e.trace("invoice:1/1")
		ev := eventOf(t, tr, "evt_b")
		if ev.Verification.Status != Pruned || ev.Verification.Text != "body pruned by retention" || ev.Receipt.BodyBytes != nil || !ev.Receipt.BodyPruned {
			t.Errorf("receipt: %+v %+v", ev.Verification, ev.Receipt)
		}
		for _, a := range ev.Attempts {
			if a.Signature.Status != Pruned {
				t.Errorf("attempt %d: %+v", a.ID, a.Signature)
			}
		}
		if s := tr.Summary.Bodies; s.Pruned != 1 || s.Invalid != 1 || s.Valid != 1 {
			t.Errorf("bodies: %+v", s)
		}
	})

	t.Run("rotated-away secret is not verifiable", func(t *testing.T) {
		rotated := func(s map[string]string) { s["default"] = "whsec_" + strings.Repeat("QUJD", 8) }
		tr, err := e.tracer(rotated).Trace(context.Background(), "default:evt_c")
		if err != nil {
			t.Fatal(err)
		}
		v := tr.Events[0].Verification
		if v.Status != NotVerifiable || v.Text != "not verifiable (no current secret matches)" || !strings.Contains(v.Detail, "rotated") {
			t.Errorf("receipt: %+v", v)
		}
		if tr.Events[0].Attempts[0].Signature.Status != NotVerifiable || len(tr.Summary.Problems) != 0 {
			t.Errorf("attempt %+v, problems %v", tr.Events[0].Attempts[0].Signature, tr.Summary.Problems)
		}
	})

	t.Run("old and new secret: the old one verifies", func(t *testing.T) {
		tr := e.trace("default:evt_c")
		if v := tr.Events[0].Verification; v.Status != Valid || v.Secret != 1 {
			t.Fatalf("%+v", v)
		}
		// Edit the YAML so default has two secrets, the old one second.
		cfg := testConfig(t, e.Dir, nil)
		for i := range cfg.Providers {
			if cfg.Providers[i].Name == "default" {
				p := &cfg.Providers[i]
				p.Secrets = append([]config.Secret{{Value: "whsec_" + strings.Repeat("QUJD", 8)}}, p.Secrets...)
			}
		}
		v, err := NewVerifier(cfg.Providers)
		if err != nil {
			t.Fatal(err)
		}
		tr, err = (&Tracer{DB: e.DB, Verifier: v}).Trace(context.Background(), "default:evt_c")
		if err != nil {
			t.Fatal(err)
		}
		if v := tr.Events[0].Verification; v.Status != Valid || v.Secret != 2 || !strings.Contains(v.Detail, "secret 2 of 2") {
			t.Errorf("%+v", v)
		}
	})

	t.Run("provider gone from the config", func(t *testing.T) {
		v, err := NewVerifier(e.Config.Providers[1:]) // without default
		if err != nil {
			t.Fatal(err)
		}
		tr, err := (&Tracer{DB: e.DB, Verifier: v}).Trace(context.Background(), "default:evt_c")
		if err != nil {
			t.Fatal(err)
		}
		if v := tr.Events[0].Verification; v.Status != NotVerifiable || !strings.Contains(v.Text, "provider not configured") {
			t.Errorf("%+v", v)
		}
	})

	t.Run("signature headers that no longer parse", func(t *testing.T) {
		e.Exec(`UPDATE receipts SET signature_headers = 'Webhook-Id: evt_c' || char(10) WHERE event_id = 'evt_c'`)
		v := eventOf(t, e.trace("default:evt_c"), "evt_c").Verification
		if v.Status != NotVerifiable || !strings.Contains(v.Text, "signature headers unreadable") {
			t.Errorf("%+v", v)
		}
	})
}

func TestPayloadMismatchAttempt(t *testing.T) {
	e := newEnv(t)
	e.send("default", "evt_x", "cus_1", "3", "2026-10-20T10:00:00Z")
	e.Clock.Add(time.Second)
	// Same id, different body: authenticated, answered 2xx, not applied.
	if code := e.deliver("default", "evt_x", body("default", "evt_x", "cus_1", "api_requests", "300", "2026-10-20T10:00:00Z")); code != http.StatusOK {
		t.Fatalf("mismatch delivery: %d", code)
	}
	tr := e.trace("default:evt_x")
	ev := tr.Events[0]
	if ev.Verification.Status != Valid || len(ev.Attempts) != 2 || custody.Outcome(ev.Attempts[1].Outcome) != custody.OutcomePayloadMismatch {
		t.Fatalf("%+v", ev)
	}
	if s := ev.Attempts[1].Signature; s.Status != NotVerifiable || !strings.Contains(s.Detail, "different body") {
		t.Errorf("mismatch attempt: %+v", s)
	}
	if tr.Summary.PayloadMismatches != 1 || tr.Summary.UsageRows != 1 || tr.Rows[0].Quantity.String() != "3" {
		t.Errorf("summary %+v rows %+v", tr.Summary, tr.Rows)
	}
}

func TestReconciledAndDeletedReceipts(t *testing.T) {
	e := newEnv(t)
	// A reconciled event comes from the provider's API: no webhook signature.
	b := body("stripe", "evt_r", "cus_1", "api_requests", "2", "2026-10-20T10:00:00Z")
	sum := sha256.Sum256(b)
	d := &custody.Delivery{Provider: "stripe", EventID: "evt_r", EventType: "usage.recorded", Body: b, BodySHA256: sum[:],
		Source: custody.SourceReconcile, HandlerVersion: "test-1", ReceivedAt: e.Now(),
		Attempt: custody.Attempt{RemoteAddr: "reconcile:stripe", UserAgent: "hookledger-reconcile"}}
	d.Classify(e.Server.Mapper)
	if err := e.Writer.Submit(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	ev := e.trace("stripe:evt_r").Events[0]
	if ev.Verification.Status != NotVerifiable || !strings.Contains(ev.Verification.Text, "reconciliation") || ev.Receipt.Source != "reconcile" {
		t.Errorf("reconciled: %+v", ev.Verification)
	}

	// retention.keys deletes the receipt (attempts cascade); the row stays.
	e.send("default", "evt_old", "cus_1", "1", "2026-10-20T10:00:00Z")
	e.Exec(`DELETE FROM receipts WHERE event_id = 'evt_old'`)
	tr := e.trace("default:evt_old")
	ev = tr.Events[0]
	if ev.Receipt != nil || ev.Verification.Status != Pruned || len(ev.Attempts) != 0 || len(tr.Rows) != 1 {
		t.Errorf("deleted receipt: %+v, rows %+v", ev, tr.Rows)
	}
}

// The trace checks each receipt's chain link, which covers the status it was
// stored with: a replay changes the status, and the receipt still verifies.
func TestReplayedReceiptKeepsItsLink(t *testing.T) {
	e := newEnv(t)
	e.send("default", "evt_r", "cus_1", `"three"`, "2026-10-20T10:00:00Z") // a quantity the mapping refuses: failed
	r := &custody.Replay{Provider: "default", EventID: "evt_r", Mapper: ledger.NewMapper(nil, nil), HandlerVersion: "replayed"}
	if err := e.Writer.Submit(context.Background(), r); err != nil || r.Outcome != custody.ReplayIgnored {
		t.Fatalf("replay: %v %s", err, r.Outcome)
	}
	if n := e.Int(`SELECT COUNT(*) FROM replays WHERE from_status = 'failed' AND to_status = 'ignored'`); n != 1 {
		t.Fatalf("%d replays from failed to ignored, want 1", n)
	}
	ev := eventOf(t, e.trace("default:evt_r"), "evt_r")
	if ev.Receipt.Status != "ignored" || ev.Verification.Status != Valid {
		t.Errorf("replayed receipt %s: %+v", ev.Receipt.Status, ev.Verification)
	}
	if e.DB.Postgres() {
		return // the tampering below is in SQLite's dialect
	}
	// Its custody facts rewritten, the link no longer holds.
	e.Exec(`DROP TRIGGER receipts_custody_facts_no_update`)
	e.Exec(`UPDATE receipts SET event_type = 'other' WHERE event_id = 'evt_r'`)
	ev = eventOf(t, e.trace("default:evt_r"), "evt_r")
	if ev.Verification.Status != Invalid || !strings.Contains(ev.Verification.Detail, "the receipt was rewritten") {
		t.Errorf("rewritten receipt: %+v", ev.Verification)
	}
}
