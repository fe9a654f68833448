package schema

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSchemaVersion(t *testing.T) {
	ctx := context.Background()
	ms, err := Migrations()
	if err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), FileName)
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old, _ := openAt(t, 2)
	current := filepath.Join(t.TempDir(), FileName)
	if db, err := Open(ctx, current, Options{}); err != nil {
		t.Fatal(err)
	} else {
		db.Close()
	}
	for _, c := range []struct {
		name    string
		path    string
		version int
		pending int
	}{
		{"never migrated", empty, 0, len(ms)},
		{"at migration 2", old, 2, len(ms) - 2},
		{"current", current, ms[len(ms)-1].Version, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, err := Open(ctx, c.path, Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if v, err := db.SchemaVersion(ctx); err != nil || v != c.version {
				t.Errorf("SchemaVersion = %d, %v; want %d", v, err, c.version)
			}
			if p, err := db.PendingMigrations(ctx); err != nil || len(p) != c.pending {
				t.Errorf("PendingMigrations = %d, %v; want %d", len(p), err, c.pending)
			}
		})
	}
}

// A read-only open does not migrate: a dry run of reconcile on a database
// from before migration 3 finds no checkpoint and no redelivery request,
// decided by the schema version rather than by an error's text.
func TestReconcileStateOfAnOlderDatabase(t *testing.T) {
	ctx := context.Background()
	path, _ := openAt(t, 2)
	db, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if cp, found, err := db.Checkpoint(ctx, "stripe"); err != nil || found || cp != (Checkpoint{}) {
		t.Errorf("Checkpoint = %+v, %v, %v; want none", cp, found, err)
	}
	if ids, err := db.RedeliveriesRequested(ctx, "stripe", []string{"evt_1"}); err != nil || ids != nil {
		t.Errorf("RedeliveriesRequested = %v, %v; want none", ids, err)
	}
	if ids, err := db.ReceiptsPresent(ctx, "stripe", []string{"evt_1"}); err != nil || ids != nil {
		t.Errorf("ReceiptsPresent = %v, %v; want none", ids, err)
	}
}

// On a database at the current version a missing table is damage, and an
// error, never an empty answer.
func TestMissingTableOfTheCurrentSchemaIsAnError(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), FileName), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Write.MustExec(`DROP TABLE reconcile_checkpoints`)
	db.Write.MustExec(`DROP TABLE redelivery_requests`)
	if _, _, err := db.Checkpoint(ctx, "stripe"); err == nil {
		t.Error("Checkpoint without its table: no error")
	}
	if _, err := db.RedeliveriesRequested(ctx, "stripe", []string{"evt_1"}); err == nil {
		t.Error("RedeliveriesRequested without its table: no error")
	}
}

// A dispute of many events reads them maxEventIDs at a time, in one snapshot.
func TestEventReceiptsAndAttemptsInChunks(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), FileName), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	n := 2*maxEventIDs + 7
	var ids []string
	tx := db.Write.MustBegin()
	for i := range n {
		id := fmt.Sprintf("evt_%04d", i)
		ids = append(ids, id)
		tx.MustExec(`INSERT INTO receipts (id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
			handler_version, source, received_at, processed_at, prev_hash, row_hash)
			VALUES (?, 'p', ?, 't', X'7B7D', X'01', 'h', 'applied', '', 'v1', 'webhook', ?, ?, X'00', X'00')`, i+1, id, i, i)
		// Two attempts of each event: the first, signed with a timestamp, then a duplicate.
		tx.MustExec(`INSERT INTO delivery_attempts (provider, event_id, received_at, remote_addr, user_agent, request_id,
			body_sha256, signature_headers, signature_age_ms, outcome, status_code) VALUES
			('p', ?, ?, '', '', '', X'01', '', ?, 'inserted', 200), ('p', ?, ?, '', '', '', X'01', '', NULL, 'duplicate', 200)`,
			id, i, i, id, i+1)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(ids), "evt_missing")
	err = db.View(ctx, func(s *ReadTx) error {
		rs, err := s.EventReceipts(ctx, "p", want)
		if err != nil {
			return err
		}
		if len(rs) != n {
			t.Errorf("%d receipts, want %d", len(rs), n)
		}
		got := map[string]bool{}
		for _, r := range rs {
			got[r.EventID] = true
			if r.Pruned || string(r.Body) != "{}" || r.SignatureHeaders != "h" {
				t.Errorf("receipt %+v", r)
				break
			}
		}
		if len(got) != n || got["evt_missing"] {
			t.Errorf("%d distinct receipts", len(got))
		}
		as, err := s.EventAttempts(ctx, "p", want)
		if err != nil {
			return err
		}
		if len(as) != 2*n {
			t.Fatalf("%d attempts, want %d", len(as), 2*n)
		}
		for i := 0; i < len(as); i += 2 {
			first, second := as[i], as[i+1]
			if first.EventID != second.EventID || first.ID >= second.ID || first.Outcome != "inserted" ||
				first.SignatureAgeMS == nil || second.SignatureAgeMS != nil {
				t.Fatalf("attempts %+v, %+v", first, second)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// CountRows counts hookledger's own tables and refuses any other name, which
// would otherwise reach the query text.
func TestCountRows(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), FileName), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n, err := db.CountRows(ctx, "chain_head"); err != nil || n != 1 {
		t.Fatalf("chain_head: %d %v, want its one row", n, err)
	}
	if n, err := db.CountRows(ctx, "receipts"); err != nil || n != 0 {
		t.Fatalf("receipts: %d %v", n, err)
	}
	for _, name := range []string{"sqlite_schema", "receipts; DROP TABLE receipts", ""} {
		if _, err := db.CountRows(ctx, name); err == nil || !strings.Contains(err.Error(), "is not one of hookledger's tables") {
			t.Errorf("CountRows(%q): %v, want a refusal", name, err)
		}
	}
}

// A read-only open of a database from before 0023 lists its pushes (which
// cancel nothing) and has no Stripe invoice states, without an error.
func TestStripeReadsOfADatabaseBefore0023(t *testing.T) {
	ctx := context.Background()
	path, raw := openAt(t, 22)
	raw.MustExec(`INSERT INTO stripe_pushes (identifier, source, ledger_id, customer_id, meter, event_name, stripe_customer,
		period_start, quantity, total, value, pushed, timestamp, created_at)
		VALUES ('hl_1', 'usage', 1, 'cus_1', 'api_requests', 'api_requests', 'cus_1', 0, '3', '3', 3, '3', 0, 0)`)
	raw.MustExec(`INSERT INTO outbox (push_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
		VALUES (1, 'stripe', 'hl_1', 'pending', 0, 0, 0)`)
	raw.Close()
	db, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ps, err := db.StripePushes(ctx, StripePushFilter{})
	if err != nil || len(ps) != 1 || ps[0].Identifier != "hl_1" || ps[0].Cancels != "" || ps[0].Total != "3" {
		t.Fatalf("StripePushes = %+v, %v; want hl_1, cancelling nothing", ps, err)
	}
	states, pushed, err := db.StripeInvoiceStatesOf(ctx, []int64{1})
	if err != nil || len(states) != 0 || len(pushed) != 0 {
		t.Errorf("StripeInvoiceStatesOf = %v, %v, %v; want none", states, pushed, err)
	}
	if us, err := db.UnlinkedStripeInvoiceStates(ctx); err != nil || us != nil {
		t.Errorf("UnlinkedStripeInvoiceStates = %v, %v; want none", us, err)
	}
}
