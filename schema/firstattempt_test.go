package schema

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"
)

// previousRelease makes a database of backend as the release before
// migration version left it (every migration below version applied), and
// returns its path (or URL) and a handle on it.
func previousRelease(t *testing.T, backend string, version int) (string, *sqlx.DB) {
	t.Helper()
	if backend == "sqlite" {
		return openAt(t, version-1)
	}
	server := os.Getenv("HOOKLEDGER_TEST_POSTGRES")
	if server == "" {
		if os.Getenv("HOOKLEDGER_CI") != "" {
			t.Fatal("HOOKLEDGER_TEST_POSTGRES is not set")
		}
		t.Skip("HOOKLEDGER_TEST_POSTGRES is not set")
	}
	var b [6]byte
	rand.Read(b[:])
	name := "hookledger_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	url, err := CreatePostgresDatabase(ctx, server, name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := DropPostgresDatabase(context.Background(), server, name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	db := sqlx.NewDb(sql.OpenDB(rebindConnector{stdlib.GetConnector(*cfg)}), pgDriverName)
	t.Cleanup(func() { db.Close() })
	ms, err := migrationsIn(postgresMigrationFiles, "migrations/postgres")
	if err != nil {
		t.Fatal(err)
	}
	db.MustExec(`CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`)
	for _, m := range ms {
		if m.Version >= version {
			break
		}
		db.MustExec(m.SQL)
		db.MustExec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name)
	}
	return url, db
}

// oldAttempts are the attempts the previous release stored: each first
// attempt is a delivery_attempts row.
var oldAttempts = []Attempt{
	{ID: 3, Provider: "stripe", EventID: "evt_1", ReceivedAt: 1000, RemoteAddr: "10.0.0.1:1", UserAgent: "Stripe/1.0", RequestID: "r1",
		BodySHA256: []byte{1}, SignatureHeaders: "Stripe-Signature: t=1,v1=aa", SignatureAgeMS: ptr(40), Outcome: "inserted", StatusCode: 200},
	{ID: 4, Provider: "stripe", EventID: "evt_1", ReceivedAt: 1500, RemoteAddr: "10.0.0.1:2", UserAgent: "Stripe/1.0", RequestID: "r2",
		BodySHA256: []byte{3}, SignatureHeaders: "Stripe-Signature: t=2,v1=bb", Outcome: "payload_mismatch", StatusCode: 200},
	{ID: 5, Provider: "github", EventID: "d-2", ReceivedAt: 2000, BodySHA256: []byte{2}, Outcome: "inserted"},
	{ID: 6, Provider: "stripe", EventID: "evt_1", ReceivedAt: 1600, RemoteAddr: "10.0.0.1:3", UserAgent: "Stripe/1.0", RequestID: "r3",
		BodySHA256: []byte{1}, SignatureHeaders: "Stripe-Signature: t=3,v1=cc", SignatureAgeMS: ptr(0), Outcome: "duplicate", StatusCode: 200},
}

func ptr(n int64) *int64 { return &n }

// beginBatch opens db's writer and begins a batch on it; the test's cleanup
// closes the writer.
func beginBatch(t *testing.T, db *DB) Batch {
	t.Helper()
	w, err := db.OpenWriter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	b, err := w.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fillPreviousRelease writes two receipts (one applied and replayed, with a
// payload mismatch and a duplicate; one reconciled, ignored and pruned) and
// their attempts with the previous release's columns, bound as arguments so
// that either backend reads the same statements.
func fillPreviousRelease(t *testing.T, db *sqlx.DB) {
	t.Helper()
	for _, r := range []Receipt{
		{ID: 7, Provider: "stripe", EventID: "evt_1", EventType: "invoice.paid", Body: []byte("{}"), BodySHA256: []byte{1},
			SignatureHeaders: "Stripe-Signature: t=1,v1=aa", Status: "applied", HandlerVersion: "v1", Source: "webhook",
			ReceivedAt: 1000, ProcessedAt: 1001, PrevHash: []byte{0xaa}, RowHash: []byte{0xbb}},
		{ID: 9, Provider: "github", EventID: "d-2", EventType: "ping", BodySHA256: []byte{2}, Status: "ignored", Error: "no mapping",
			HandlerVersion: "v1", Source: "reconcile", ReceivedAt: 2000, ProcessedAt: 2001, PrevHash: []byte{0xbb}, RowHash: []byte{0xcc}},
	} {
		db.MustExec(`INSERT INTO receipts (id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error,
			handler_version, source, received_at, processed_at, prev_hash, row_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Provider, r.EventID, r.EventType, r.Body, r.BodySHA256, r.SignatureHeaders, r.Status, r.Error,
			r.HandlerVersion, r.Source, r.ReceivedAt, r.ProcessedAt, r.PrevHash, r.RowHash)
	}
	for _, a := range oldAttempts {
		db.MustExec(`INSERT INTO delivery_attempts (id, provider, event_id, received_at, remote_addr, user_agent, request_id,
			body_sha256, signature_headers, signature_age_ms, outcome, status_code) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.Provider, a.EventID, a.ReceivedAt, a.RemoteAddr, a.UserAgent, a.RequestID, a.BodySHA256, a.SignatureHeaders,
			signatureAge(a.SignatureAgeMS), a.Outcome, a.StatusCode)
	}
	db.MustExec(`INSERT INTO replays (provider, event_id, replayed_at, from_status, to_status, from_handler_version, handler_version)
		VALUES ('stripe', 'evt_1', 3000, 'failed', 'applied', 'v0', 'v1')`)
	if onPostgres(db) { // the ids were given: move the identity past them, as the release's own inserts would have
		db.MustExec(`SELECT setval(pg_get_serial_sequence('delivery_attempts', 'id'), 6)`)
	}
}

// readAttempts reads the attempts of both fixture receipts and evt_new
// through EventAttempts, as the dispute trace does.
func readAttempts(t *testing.T, db *DB) []Attempt {
	t.Helper()
	var out []Attempt
	err := db.View(context.Background(), func(tx *ReadTx) error {
		for _, k := range []struct {
			provider string
			ids      []string
		}{{"stripe", []string{"evt_1", "evt_new"}}, {"github", []string{"d-2"}}} {
			as, err := tx.EventAttempts(context.Background(), k.provider, k.ids)
			if err != nil {
				return err
			}
			out = append(out, as...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameAttempts(t *testing.T, when string, got, want []Attempt) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s: attempts\n got  %s\n want %s", when, showAttempts(got), showAttempts(want))
	}
}

func showAttempts(as []Attempt) string {
	s := ""
	for _, a := range as {
		age := "nil"
		if a.SignatureAgeMS != nil {
			age = fmt.Sprint(*a.SignatureAgeMS)
		}
		s += fmt.Sprintf("\n  {%d %s/%s at %d %q %q %q %x %q age %s %s %d}", a.ID, a.Provider, a.EventID, a.ReceivedAt, a.RemoteAddr,
			a.UserAgent, a.RequestID, a.BodySHA256, a.SignatureHeaders, age, a.Outcome, a.StatusCode)
	}
	return s
}

// A database of the previous release keeps every row as it was, and its
// attempts read back exactly as that release showed them; new deliveries
// keep their first attempt in the receipt, and both kinds read together.
func TestFirstAttemptMigrationKeepsOldAttempts(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "sqlite" && os.Getenv("HOOKLEDGER_TEST_BACKEND") == "postgres" {
				t.Skip("ran in the SQLite pass")
			}
			testFirstAttemptMigration(t, backend)
		})
	}
}

func testFirstAttemptMigration(t *testing.T, backend string) {
	ctx := context.Background()
	path, old := previousRelease(t, backend, versionFirstAttempt)
	fillPreviousRelease(t, old)
	queries := []string{receiptsAt8, `SELECT * FROM delivery_attempts ORDER BY id`, `SELECT * FROM replays ORDER BY id`}
	before := dumps(t, old, queries)
	old.Close()

	// This binary's reader on the unmigrated database (a read-only open
	// does not migrate) shows what the previous release showed.
	ro, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	// Per event in id order: the rows as they are.
	want := []Attempt{oldAttempts[0], oldAttempts[1], oldAttempts[3], oldAttempts[2]}
	sameAttempts(t, "read-only, before migrating", readAttempts(t, ro), want)
	if n, err := ro.CountAttempts(ctx); err != nil || n != 4 {
		t.Errorf("read-only, before migrating: CountAttempts %d (%v), want 4", n, err)
	}
	ro.Close()

	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(ctx); err != nil || v < versionFirstAttempt {
		t.Fatalf("version %d (%v), want at least %d", v, err, versionFirstAttempt)
	}
	keptRows(t, db.Write, queries, before)
	var inline int
	db.Write.Get(&inline, `SELECT COUNT(*) FROM receipts WHERE status_code IS NOT NULL OR remote_addr != '' OR user_agent != ''
		OR request_id != '' OR signature_age_ms IS NOT NULL`)
	if inline != 0 {
		t.Errorf("%d old receipts hold an inline attempt, want none: their first attempt is a row", inline)
	}
	sameAttempts(t, "after migrating", readAttempts(t, db), want)

	// New deliveries: a new event (its attempt inline), its redelivery, and
	// a redelivery of the old event.
	b := beginBatch(t, db)
	newReceipt := Receipt{ID: 10, Provider: "stripe", EventID: "evt_new", EventType: "invoice.paid", Body: []byte(`{"a":1}`),
		BodySHA256: []byte{4}, SignatureHeaders: "Stripe-Signature: t=5,v1=dd", Status: "applied", HandlerVersion: "v2",
		Source: "webhook", ReceivedAt: 5000, ProcessedAt: 5001, PrevHash: []byte{0xcc}, RowHash: []byte{0xdd}}
	first := Attempt{Provider: "stripe", EventID: "evt_new", ReceivedAt: 5000, RemoteAddr: "10.0.0.9:1", UserAgent: "Stripe/2.0",
		RequestID: "r9", BodySHA256: []byte{4}, SignatureHeaders: newReceipt.SignatureHeaders, SignatureAgeMS: ptr(12), Outcome: "inserted", StatusCode: 200}
	redelivery := Attempt{Provider: "stripe", EventID: "evt_new", ReceivedAt: 6000, RemoteAddr: "10.0.0.9:2", UserAgent: "Stripe/2.0",
		RequestID: "r10", BodySHA256: []byte{4}, SignatureHeaders: "Stripe-Signature: t=6,v1=ee", Outcome: "duplicate", StatusCode: 200}
	oldRedelivery := Attempt{Provider: "stripe", EventID: "evt_1", ReceivedAt: 6500, RemoteAddr: "10.0.0.1:4", UserAgent: "Stripe/2.0",
		RequestID: "r11", BodySHA256: []byte{1}, SignatureHeaders: "Stripe-Signature: t=7,v1=ff", SignatureAgeMS: ptr(3), Outcome: "duplicate", StatusCode: 200}
	if ok, err := b.InsertReceipt(ctx, newReceipt, first); err != nil || !ok {
		t.Fatalf("insert the new receipt: %v %v", ok, err)
	}
	if ok, err := b.InsertReceipt(ctx, newReceipt, redelivery); err != nil || ok {
		t.Fatalf("insert it again: inserted %v (%v), want a duplicate", ok, err)
	}
	for _, a := range []Attempt{redelivery, oldRedelivery} {
		if err := b.InsertAttempt(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	// Ids continue after the old rows; the inline attempt has none.
	redelivery.ID, oldRedelivery.ID = 7, 8
	want = []Attempt{oldAttempts[0], oldAttempts[1], oldAttempts[3], oldRedelivery, first, redelivery, oldAttempts[2]}
	sameAttempts(t, "with new deliveries", readAttempts(t, db), want)
	if all, err := db.AllAttempts(ctx); err != nil {
		t.Fatal(err)
	} else {
		sameAttempts(t, "AllAttempts", all, append([]Attempt{oldAttempts[2]}, want[:6]...))
	}
	var rows int
	db.Write.Get(&rows, `SELECT COUNT(*) FROM delivery_attempts WHERE event_id = 'evt_new'`)
	if rows != 1 {
		t.Errorf("evt_new has %d delivery_attempts rows, want 1: its redelivery only", rows)
	}
	if n, err := db.CountAttempts(ctx); err != nil || n != 7 {
		t.Errorf("CountAttempts %d (%v), want 7", n, err)
	}
	outcomes, err := db.AttemptOutcomesInRange(ctx, EventRange{Provider: "stripe", From: "evt_", To: "evt_~"})
	if err != nil {
		t.Fatal(err)
	}
	if w := map[string]int{"inserted": 2, "duplicate": 3, "payload_mismatch": 1}; !reflect.DeepEqual(outcomes, w) {
		t.Errorf("AttemptOutcomesInRange %v, want %v", outcomes, w)
	}

	// The first attempt is a custody fact, old or new; a replay still
	// changes the status.
	for _, bad := range []string{
		`UPDATE receipts SET status_code = 500 WHERE event_id = 'evt_new'`,
		`UPDATE receipts SET remote_addr = 'elsewhere' WHERE event_id = 'evt_new'`,
		`UPDATE receipts SET signature_age_ms = NULL WHERE event_id = 'evt_new'`,
		`UPDATE receipts SET status_code = 200 WHERE event_id = 'evt_1'`,
	} {
		if _, err := db.Write.Exec(bad); err == nil {
			t.Errorf("accepted: %s", bad)
		}
	}
	db.Write.MustExec(`UPDATE receipts SET status = 'failed' WHERE event_id = 'evt_new'`)

	// Retention deletes a receipt with every attempt of it, wherever kept.
	db.Write.MustExec(`DELETE FROM receipts WHERE event_id IN ('evt_new', 'evt_1')`)
	sameAttempts(t, "after deleting the stripe receipts", readAttempts(t, db), []Attempt{oldAttempts[2]})
}
