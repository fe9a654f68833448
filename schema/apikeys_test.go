package schema

import (
	"context"
	"errors"
	"strings"
	"testing"
)

func TestAPIKeysMigrationKeepsReceiptsAndAdmitsSourceAPI(t *testing.T) {
	ctx := context.Background()
	path, old := openAt(t, versionAPIKeys-1)
	fillCustody(t, old)
	old.MustExec(`INSERT INTO receipts (id, provider, event_id, event_type, body, body_sha256, status, handler_version, source,
		received_at, processed_at, prev_hash, row_hash) VALUES (11, 'stripe', 'evt_h', 't', X'7B7D', X'05', 'applied', 'v1', 'replay', 5, 6, X'AA', X'BB')`)
	// An outbox message (0007) points at a receipt by id: the rebuilt table must keep it pointing.
	old.MustExec(`INSERT INTO outbox (receipt_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
		VALUES (7, 'crm', 'msg_1', 'pending', 1, 1, 1)`)
	queries := []string{receiptsAt8, `SELECT * FROM delivery_attempts ORDER BY id`, `SELECT * FROM replays ORDER BY id`,
		// 0007's columns: 0018 adds push_id after them.
		`SELECT id, receipt_id, destination, message_id, status, attempts, created_at, pending_since, next_attempt_at,
			last_attempt_at, delivered_at, last_status, last_error FROM outbox ORDER BY id`}
	before := dumps(t, old, queries)
	old.Close()

	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keptRows(t, db.Write, queries, before)
	db.Write.MustExec(`INSERT INTO receipts (provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
		VALUES ('api:app', 'app#e1', X'00', 'applied', 'v', 'api', 0, 0)`)
	for _, bad := range []string{
		`INSERT INTO receipts (provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
			VALUES ('p', 'e2', X'00', 'applied', 'v', 'email', 0, 0)`,
		`UPDATE receipts SET source = 'api' WHERE id = 7`, // the custody-facts trigger came back
		`INSERT INTO delivery_attempts (provider, event_id, received_at, body_sha256, outcome, status_code)
			VALUES ('stripe', 'evt_missing', 0, X'00', 'duplicate', 200)`, // the foreign key still points at receipts
		`INSERT INTO outbox (receipt_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
			VALUES (99, 'crm', 'msg_2', 'pending', 1, 1, 1)`, // and the outbox's
	} {
		if _, err := db.Write.Exec(bad); err == nil {
			t.Errorf("accepted: %s", bad)
		}
	}
	// Deleting a receipt still cascades to its outbox messages.
	db.Write.MustExec(`DELETE FROM receipts WHERE id = 7`)
	var left int
	db.Write.Get(&left, `SELECT COUNT(*) FROM outbox`)
	if left != 0 {
		t.Errorf("%d outbox rows left after their receipt was deleted, want 0", left)
	}
	var idx int
	db.Write.Get(&idx, `SELECT COUNT(*) FROM sqlite_schema WHERE type = 'index' AND name = 'receipts_status'`)
	if idx != 1 {
		t.Error("index receipts_status is missing after the rebuild")
	}
}

func TestAPIKeyRows(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, t.TempDir()+"/"+FileName, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	k, err := db.InsertAPIKey(ctx, APIKey{Name: "app", Prefix: "hl_abcdefgh", SHA256: []byte("0123456789abcdef0123456789abcdef"), RateLimit: 2, CreatedAt: 1})
	if err != nil || k.ID != 1 {
		t.Fatalf("insert: %+v %v", k, err)
	}
	if _, err := db.InsertAPIKey(ctx, APIKey{Name: "other", Prefix: "x", SHA256: k.SHA256, CreatedAt: 2}); err == nil {
		t.Error("two keys with one hash")
	}
	got, err := db.APIKeyBySHA256(ctx, k.SHA256)
	if err != nil || got.Name != "app" || got.RateLimit != 2 || got.RevokedAt != nil {
		t.Fatalf("lookup: %+v %v", got, err)
	}
	if _, err := db.APIKeyBySHA256(ctx, []byte("nope")); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown hash: %v, want ErrNotFound", err)
	}
	if r, err := db.RevokeAPIKey(ctx, 1, 50); err != nil || r.RevokedAt == nil || *r.RevokedAt != 50 {
		t.Fatalf("revoke: %+v %v", r, err)
	}
	if _, err := db.RevokeAPIKey(ctx, 1, 60); !errors.Is(err, ErrRevoked) {
		t.Errorf("second revoke: %v, want ErrRevoked", err)
	}
	if _, err := db.RevokeAPIKey(ctx, 9, 60); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke of no key: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{`DELETE FROM api_keys`, `UPDATE api_keys SET revoked_at = NULL`, `UPDATE api_keys SET name = 'x'`} {
		if _, err := db.Write.Exec(bad); err == nil || !strings.Contains(err.Error(), "API key") {
			t.Errorf("%s: %v, want refused", bad, err)
		}
	}
	ks, err := db.APIKeys(ctx)
	if err != nil || len(ks) != 1 || *ks[0].RevokedAt != 50 {
		t.Fatalf("list: %+v %v", ks, err)
	}
}

// BenchmarkAPIKeyLookup is what an uncached key check costs serve: one probe
// of api_keys' unique index on the read pool (ingest.Keyring caches it for
// ingest.key_cache).
//
//	go test -run '^$' -bench APIKeyLookup ./schema/
func BenchmarkAPIKeyLookup(b *testing.B) {
	ctx := context.Background()
	db, err := Open(ctx, b.TempDir()+"/"+FileName, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var sums [][]byte
	for i := range 100 {
		sum := make([]byte, 32)
		sum[0], sum[1] = byte(i), 7
		if _, err := db.InsertAPIKey(ctx, APIKey{Name: "k", Prefix: "hl_", SHA256: sum, CreatedAt: 1}); err != nil {
			b.Fatal(err)
		}
		sums = append(sums, sum)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := db.APIKeyBySHA256(ctx, sums[i%len(sums)]); err != nil {
			b.Fatal(err)
		}
	}
}
