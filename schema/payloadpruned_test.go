package schema

import (
	"context"
	"os"
	"testing"
)

// Migration 0010 starts the chain head's payload mark from the prunes the
// previous release recorded: a body it pruned stays pruned, one gone
// without a recorded prune is missing, and every row is kept.
func TestPayloadPrunedMigration(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "sqlite" && os.Getenv("HOOKLEDGER_TEST_BACKEND") == "postgres" {
				t.Skip("ran in the SQLite pass")
			}
			testPayloadPrunedMigration(t, backend)
		})
	}
}

func testPayloadPrunedMigration(t *testing.T, backend string) {
	ctx := context.Background()
	path, old := previousRelease(t, backend, versionPayloadPruned)
	fillPreviousRelease(t, old) // github d-2 (received at 2000) has no body and no signature headers
	old.MustExec(`INSERT INTO receipts (id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
		handler_version, source, received_at, processed_at, prev_hash, row_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		11, "github", "d-3", "ping", nil, []byte{4}, "", "ignored", "", "v1", "webhook", 5000, 5001, []byte{0xcc}, []byte{0xdd})
	// The prune that cleared d-2's body, with bodies received before 2500.
	old.MustExec(`INSERT INTO prune_runs (pruned_at, payload_before, keys_before, bodies_pruned, keys_deleted, ledger_head_id)
		VALUES (?, ?, ?, ?, ?, ?)`, 3000, 2500, nil, 1, 0, 0)
	queries := []string{receiptsAt8, `SELECT * FROM prune_runs ORDER BY id`}
	before := dumps(t, old, queries)
	old.Close()

	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(ctx); err != nil || v < versionPayloadPruned {
		t.Fatalf("version %d (%v), want at least %d", v, err, versionPayloadPruned)
	}
	keptRows(t, db.Write, queries, before)
	var mark int64
	if err := db.Read.Get(&mark, `SELECT payload_pruned_before FROM chain_head WHERE id = 1`); err != nil || mark != 2500 {
		t.Errorf("payload_pruned_before = %d (%v), want 2500", mark, err)
	}
	err = db.View(ctx, func(tx *ReadTx) error {
		rs, err := tx.EventReceipts(ctx, "github", []string{"d-2", "d-3"})
		if err != nil {
			return err
		}
		pruned := map[string]bool{}
		for _, r := range rs {
			if r.Body != nil {
				t.Errorf("%s has a body", r.EventID)
			}
			pruned[r.EventID] = r.Pruned
		}
		if len(rs) != 2 || !pruned["d-2"] || pruned["d-3"] {
			t.Errorf("pruned %v, want d-2 pruned and d-3 not", pruned)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write.Exec(`UPDATE chain_head SET payload_pruned_before = 0 WHERE id = 1`); err == nil {
		t.Error("the payload mark moved back")
	}
}
