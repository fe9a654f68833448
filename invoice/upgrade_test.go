package invoice_test

import (
	"bytes"
	"crypto/sha256"
	"github.com/hookledger/hookledger/internal/testenv"
	"path/filepath"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// openVersion4 writes a database as hookledger with migrations 0001-0004
// left it: receipts with real bodies and digests, a pruned body, a gap where
// retention deleted receipt 3, a failed receipt that a replay applied, and
// the ledger rows of the applied ones, chained.
func openVersion4(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), schema.FileName)
	db, err := sqlx.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	db.MustExec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	for _, m := range ms {
		if m.Version > 4 {
			break
		}
		db.MustExec(m.SQL)
		db.MustExec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name)
	}
	receipts := []struct {
		id             int64
		event, typ     string
		body           []byte // nil: pruned
		status, source string
	}{
		{1, "evt_1", "usage.recorded", []byte(`{"id":"evt_1"}`), "applied", "webhook"},
		{2, "evt_2", "customer.updated", []byte(`{"id":"evt_2"}`), "ignored", "webhook"},
		{4, "evt_4", "usage.recorded", []byte(`{"id":"evt_4"}`), "applied", "reconcile"},
		{5, "evt_5", "customer.updated", nil, "ignored", "webhook"},
	}
	for _, r := range receipts {
		sum := sha256.Sum256(r.body)
		if r.body == nil {
			sum = sha256.Sum256([]byte(`{"id":"evt_5"}`))
		}
		db.MustExec(`INSERT INTO receipts (id, provider, event_id, event_type, body, body_sha256, status, handler_version, source, received_at, processed_at)
			VALUES (?, 'test', ?, ?, ?, ?, ?, 'v1', ?, ?, ?)`, r.id, r.event, r.typ, r.body, sum[:], r.status, r.source, r.id*1000, r.id*1000)
		db.MustExec(`INSERT INTO delivery_attempts (provider, event_id, received_at, body_sha256, outcome, status_code) VALUES ('test', ?, ?, ?, 'inserted', 200)`,
			r.event, r.id*1000, sum[:])
	}
	db.MustExec(`INSERT INTO replays (provider, event_id, replayed_at, from_status, to_status, from_handler_version, handler_version)
		VALUES ('test', 'evt_4', 4500, 'failed', 'applied', 'v0', 'v1')`)
	db.MustExec(`INSERT INTO prune_runs (pruned_at, payload_before, keys_before, bodies_pruned, keys_deleted, ledger_head_id) VALUES (6000, 5500, 3500, 1, 1, 1)`)
	prev := ledger.GenesisHash
	for i, event := range []string{"evt_1", "evt_4"} {
		r := ledger.Row{ID: int64(i + 1), Kind: ledger.KindUsage, Provider: "test", EventID: event, Customer: "c1", Meter: "api",
			Quantity: q("2"), Properties: "{}", OccurredAt: 100, RecordedAt: 200}
		r.RowHash = r.Hash(prev)
		db.MustExec(`INSERT INTO metered_usage
			(id, kind, provider, event_id, customer_id, meter, quantity, properties, reason, ref, occurred_at, recorded_at, prev_hash, row_hash)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, r.ID, r.Kind, r.Provider, r.EventID, r.Customer, r.Meter, r.Quantity.Micro().Int64(), r.Properties,
			r.Reason, r.Ref, r.OccurredAt, r.RecordedAt, prev, r.RowHash)
		prev = r.RowHash
	}
	return path
}

func TestUpgradeChainsExistingReceipts(t *testing.T) {
	testenv.SQLiteOnly(t, "migrates a SQLite database made by an older release")
	path := openVersion4(t)
	e := newEnvAt(t, filepath.Dir(path)) // schema.Open migrates
	defer e.Close()

	// The chain the migration must have written, from the stored facts
	// alone: id order, across the gap, receipt 4 as first stored (failed).
	want := ledger.Chain{LastHash: ledger.GenesisHash}
	for _, l := range []ledger.ReceiptLink{
		{ID: 1, EventID: "evt_1", EventType: "usage.recorded", Status: "applied", Source: "webhook", ReceivedAt: 1000},
		{ID: 2, EventID: "evt_2", EventType: "customer.updated", Status: "ignored", Source: "webhook", ReceivedAt: 2000},
		{ID: 4, EventID: "evt_4", EventType: "usage.recorded", Status: "failed", Source: "reconcile", ReceivedAt: 4000},
		{ID: 5, EventID: "evt_5", EventType: "customer.updated", Status: "ignored", Source: "webhook", ReceivedAt: 5000},
	} {
		l.Provider = "test"
		sum := sha256.Sum256([]byte(`{"id":"` + l.EventID + `"}`))
		l.BodySHA256 = sum[:]
		l.PrevHash = want.LastHash
		l.RowHash = l.Hash(l.PrevHash)
		var prev, got []byte
		if err := e.DB.Read.QueryRowx(`SELECT prev_hash, row_hash FROM receipts WHERE id = ?`, l.ID).Scan(&prev, &got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(prev, l.PrevHash) || !bytes.Equal(got, l.RowHash) {
			t.Fatalf("receipt %d: prev %x row %x, want %x %x", l.ID, prev, got, l.PrevHash, l.RowHash)
		}
		want.Advance(&l)
	}
	h, err := ledger.LoadHead(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	var ledgerHash []byte
	e.DB.Read.Get(&ledgerHash, `SELECT row_hash FROM metered_usage WHERE id = 2`)
	if h.Receipts.LastID != 5 || !bytes.Equal(h.Receipts.LastHash, want.LastHash) || h.Ledger.LastID != 2 || !bytes.Equal(h.Ledger.LastHash, ledgerHash) {
		t.Fatalf("head after the migration: %+v", h)
	}
	if rep := verified(t, e); rep.First() != nil {
		t.Fatalf("verify after the upgrade:\n%s", problems(rep))
	}

	// The writer carries on from the migrated head.
	e.Write(row{Customer: "c1", Meter: "api", Qty: q("1"), At: ts("2026-10-05T00:00:00Z")})
	anchors := head(t, e)
	if anchors[0].ID != 3 || anchors[1].ID != 6 {
		t.Fatalf("head after a write: %v", anchors)
	}
	if rep := verifiedWith(t, e, anchors); rep.First() != nil {
		t.Fatalf("verify after writing on the upgraded database:\n%s", problems(rep))
	}

	// The guards: custody facts and the head cannot be changed by mistake;
	// what replay and retention change still can be.
	for _, bad := range []string{
		`UPDATE receipts SET body_sha256 = x'00' WHERE id = 1`,
		`UPDATE receipts SET received_at = 0 WHERE id = 1`,
		`DELETE FROM chain_head`,
		`UPDATE chain_head SET receipt_id = 1`,
	} {
		if _, err := e.DB.Write.Exec(bad); err == nil {
			t.Errorf("accepted: %s", bad)
		}
	}
	for _, ok := range []string{
		`UPDATE receipts SET status = 'ignored', error = '', handler_version = 'v2', processed_at = 1 WHERE id = 2`,
		`UPDATE receipts SET body = NULL, signature_headers = '' WHERE id = 2`,
	} {
		if _, err := e.DB.Write.Exec(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
