package postgres_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// A SQLite ledger written before identifiers had a limit may hold event ids,
// customers and meters longer than PostgreSQL's btree indexes take (about
// 2.7 KB, less when the text does not compress). copy moves it whole: every
// row, the hash chains unchanged, verify clean on PostgreSQL, and the long
// keys still unique there.
func TestCopyLedgerWithLongKeysToPostgres(t *testing.T) {
	bin := testenv.Binary(t)
	dsn := testenv.PostgresDatabase(t)
	dir := t.TempDir()
	random := func(n int) string {
		b := make([]byte, n/2)
		rand.Read(b)
		return hex.EncodeToString(b)
	}
	longID, longCustomer, longMeter := random(3000), random(4000), random(3000)

	// The old ledger, written through the writer as an older hookledger did
	// (the receiver and the mapping now refuse such identifiers before it).
	e := testenv.New(t, testenv.Options{Dir: filepath.Join(dir, "data"), NoServer: true})
	at := time.Date(2026, 10, 20, 10, 0, 0, 0, time.UTC)
	deliver := func(id string, rows ...ledger.UsageRow) {
		t.Helper()
		body := []byte(`{"type":"usage.recorded"}`)
		sum := sha256.Sum256(body)
		d := &custody.Delivery{Provider: "default", EventID: id, EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
			Source: custody.SourceWebhook, HandlerVersion: "old", ReceivedAt: at, Rows: rows, Status: custody.StatusApplied}
		if err := e.Writer.Submit(context.Background(), d); err != nil {
			t.Fatalf("%.20s…: %v", id, err)
		}
	}
	row := func(customer, meter string) ledger.UsageRow {
		return ledger.UsageRow{Customer: customer, Meter: meter, Quantity: ledger.TotalOf(2_000_000), OccurredAt: at, Properties: "{}"}
	}
	deliver(longID, row(longCustomer, longMeter), row(longCustomer, "api_requests"))
	deliver(longID) // a redelivery: a delivery_attempts row under the long id
	deliver("evt_short", row("cus_1", "api_requests"))
	e.Close()
	run := func(env []string, args ...string) string {
		t.Helper()
		out, err := testenv.Run(bin, dir, env, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	run(nil, "invoice", "close", "--period", "2026-10", "--all") // closes and invoices for the long customer

	out := run(nil, "copy", "--to", dsn)
	if !strings.Contains(out, "2 receipts, 3 delivery attempts, 3 ledger rows, 2 invoices") {
		t.Errorf("copy reported:\n%s", out)
	}
	pg := []string{"HOOKLEDGER_DATABASE=" + dsn}
	if out, err := testenv.Run(bin, dir, pg, "verify"); err != nil {
		t.Errorf("verify on PostgreSQL: %v\n%s", err, out)
	}
	for _, args := range [][]string{{"usage"}, {"invoice", "list"}, {"ledger", "head"}} {
		if sqlite, pgOut := run(nil, args...), run(pg, args...); sqlite != pgOut {
			t.Errorf("%v differs:\n--- SQLite\n%s\n--- PostgreSQL\n%s", args, sqlite, pgOut)
		}
	}

	// On PostgreSQL the long keys are still keys: a receipt and a ledger row
	// with the same long key are refused, and the long event is found.
	db, err := schema.Open(context.Background(), dsn, schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.Read.Get(&n, `SELECT COUNT(*) FROM receipts WHERE provider = 'default' AND event_id = $1`, longID); err != nil || n != 1 {
		t.Errorf("the long event id: %d receipts, %v", n, err)
	}
	for _, stmt := range []string{
		`INSERT INTO receipts (id, provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
			VALUES (99, 'default', $1, '\x00', 'applied', 'x', 'webhook', 0, 0)`,
		// A usage row's key is its receipt and meter (0015).
		`INSERT INTO metered_usage (id, kind, provider, event_id, customer_id, meter, quantity, occurred_at, recorded_at, prev_hash, row_hash, receipt_id)
			SELECT 99, 'usage', provider, event_id, customer_id, meter, 1, 0, 0, '\x00', '\x00', receipt_id FROM metered_usage WHERE meter = $1`,
	} {
		arg := longID
		if strings.Contains(stmt, "metered_usage") {
			arg = longMeter
		}
		if _, err := db.Write.Exec(stmt, arg); err == nil || !strings.Contains(err.Error(), "duplicate key") {
			t.Errorf("a second row with the same long key: %v", err)
		}
	}
}
