package schema

import (
	"context"
	"os"
	"testing"
)

// A database as the release before invoices to Stripe left it (version 26:
// a forwarded message and a Stripe push, each with an attempt) migrates
// through 0027 and 0028 keeping every outbox row, id and attempt: 0028
// rebuilds the outbox. The rebuilt table refuses a message of no kind, of
// two, or naming no invoice push; the relay's reads see the old push with
// no send yet, covering its one row, closed (0037: a push written before
// it never takes another row).
func TestStripeSendsAndInvoicesMigrationKeepsTheOutbox(t *testing.T) {
	ctx := context.Background()
	path, old := openAt(t, 26)
	fillCustody(t, old)
	old.MustExec(`INSERT INTO stripe_pushes (id, identifier, source, ledger_id, customer_id, meter, event_name, stripe_customer,
		period_start, quantity, total, value, pushed, timestamp, created_at) VALUES
		(4, 'hl_push4', 'usage', NULL, 'cus_1', 'api_requests', 'api_requests', 'cus_1', 1000, '3', '3', '3', '3', 1, 1000)`)
	old.MustExec(`INSERT INTO outbox (id, receipt_id, push_id, destination, message_id, status, attempts, created_at, pending_since,
		next_attempt_at, last_attempt_at, delivered_at, last_status, last_error) VALUES
		(11, 7, NULL, 'app', 'msg_7', 'delivered', 1, 1000, 1000, 1100, 1100, 1100, 204, ''),
		(12, NULL, 4, 'stripe', 'hl_push4', 'pending', 2, 1000, 1000, 5000, 1200, NULL, 503, 'HTTP 503')`)
	old.MustExec(`INSERT INTO outbox_attempts (id, outbox_id, attempted_at, status_code, latency_ms, response, error) VALUES
		(21, 11, 1100, 204, 3, x'', ''), (22, 12, 1200, 503, 9, x'7B7D', 'HTTP 503')`)
	queries := []string{
		`SELECT id, receipt_id, push_id, destination, message_id, status, attempts, created_at, pending_since, next_attempt_at,
			last_attempt_at, delivered_at, last_status, last_error FROM outbox ORDER BY id`,
		`SELECT * FROM outbox_attempts ORDER BY id`,
		`SELECT id, identifier, source, ledger_id, invoice_id, line_no, customer_id, meter, event_name, stripe_customer,
			period_start, quantity, total, value, pushed, timestamp, created_at FROM stripe_pushes ORDER BY id`,
	}
	before := dumps(t, old, queries)
	old.Close()

	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keptRows(t, db.Write, queries, before)
	if got := dump(t, db.Write, `SELECT COUNT(*), COUNT(invoice_push_id) FROM outbox`); got != "2|0|\n" {
		t.Errorf("outbox rows, with an invoice push: %s", got)
	}
	// ON DELETE CASCADE still reaches the attempts from the rebuilt table.
	if got := dump(t, db.Write, `SELECT COUNT(*) FROM pragma_foreign_key_check`); got != "0|\n" {
		t.Errorf("foreign key violations after 0028: %s", got)
	}
	pushes, err := db.StripePushesOf(ctx, []int64{12})
	if err != nil {
		t.Fatal(err)
	}
	if p := pushes[12]; p.Identifier != "hl_push4" || p.Status != "pending" || p.LastStatus != 503 || p.Send.Identifier != "" ||
		p.Rows != 1 || p.Open {
		t.Errorf("the old push as the relay reads it: %+v", p)
	}

	if _, err := db.Write.Exec(`INSERT INTO outbox (receipt_id, push_id, destination, message_id, status, created_at, pending_since,
		next_attempt_at) VALUES (NULL, NULL, 'app', 'none', 'pending', 0, 0, 0)`); err == nil {
		t.Error("a message of no kind was taken")
	}
	if _, err := db.Write.Exec(`INSERT INTO outbox (receipt_id, push_id, destination, message_id, status, created_at, pending_since,
		next_attempt_at) VALUES (7, 4, 'app', 'both', 'pending', 0, 0, 0)`); err == nil {
		t.Error("a message of two kinds was taken")
	}
	if _, err := db.Write.Exec(`INSERT INTO outbox (receipt_id, invoice_push_id, destination, message_id, status, created_at, pending_since,
		next_attempt_at) VALUES (NULL, 99, 'stripe-invoices', 'inv', 'pending', 0, 0, 0)`); err == nil {
		t.Error("a message of an invoice push that does not exist was taken")
	}
}

// 0037 on a database the release before it made, on both backends: a push
// pending there covers its one row and stays closed (its message may have
// a send stored already), so the next row of its customer starts a push
// of its own. A push written open takes rows (AddToStripePush) until a
// claim closes it; then the trigger refuses it, as it always refuses a
// change of what a push is (its identifier).
func TestOpenPushesMigration(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			if backend == "sqlite" && os.Getenv("HOOKLEDGER_TEST_BACKEND") == "postgres" {
				t.Skip("ran in the SQLite pass")
			}
			testOpenPushesMigration(t, backend)
		})
	}
}

func testOpenPushesMigration(t *testing.T, backend string) {
	ctx := context.Background()
	path, old := previousRelease(t, backend, versionOpenPushes)
	old.MustExec(`INSERT INTO stripe_pushes (id, identifier, source, ledger_id, customer_id, meter, event_name, stripe_customer,
		period_start, quantity, total, value, pushed, timestamp, created_at) VALUES
		(4, 'hl_push4', 'usage', 12, 'cus_1', 'api_requests', 'api_requests', 'cus_1', 1000, '3', '3', '3', '3', 1, 1000)`)
	old.MustExec(`INSERT INTO outbox (id, push_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
		VALUES (12, 4, 'stripe', 'hl_push4', 'pending', 1000, 1000, 1000)`)
	old.Close()
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pushes, err := db.StripePushesOf(ctx, []int64{12})
	if err != nil {
		t.Fatal(err)
	}
	if p := pushes[12]; p.Identifier != "hl_push4" || p.Rows != 1 || p.LastLedgerID != 12 || p.Open {
		t.Errorf("the old push after 0037: %+v, want its one row, closed", p)
	}
	if _, err := db.Write.Exec(`UPDATE stripe_pushes SET value = '4' WHERE id = 4`); err == nil {
		t.Error("the old push was edited")
	}

	b := beginBatch(t, db)
	last, err := b.LastStripePush(ctx, "cus_1", "api_requests", 1000)
	if err != nil || last.ID != 4 || last.Open || last.Total != "3" || last.Pushed != "3" {
		t.Fatalf("the latest push: %+v %v, want the old one, closed, at 3", last, err)
	}
	p := StripePush{Identifier: "hl_push5", Source: "usage", LedgerID: 13, CustomerID: "cus_1", Meter: "api_requests",
		EventName: "api_requests", StripeCustomer: "cus_1", PeriodStart: 1000, Quantity: "1", Total: "4", Value: "1", Pushed: "4",
		Timestamp: 2, Open: true}
	if p.ID, err = b.InsertStripePush(ctx, p, "stripe", 2000); err != nil {
		t.Fatal(err)
	}
	p.Quantity, p.Total, p.Value, p.Pushed, p.Rows, p.LastLedgerID = "2", "5", "2", "5", 2, 14
	if err := b.AddToStripePush(ctx, p); err != nil {
		t.Fatalf("add a row to the open push: %v", err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write.Exec(`UPDATE stripe_pushes SET identifier = 'hl_other' WHERE id = ?`, p.ID); err == nil {
		t.Error("an open push's identifier was changed")
	}
	b = beginBatch(t, db)
	claims, err := b.ClaimOutbox(ctx, "stripe", 3000, 9000, 10)
	if err != nil || len(claims) != 2 {
		t.Fatalf("claim: %+v %v, want both pushes", claims, err)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Write.Exec(`UPDATE stripe_pushes SET value = '3' WHERE id = ?`, p.ID); err == nil {
		t.Error("a claimed push was edited")
	}
	if got := dump(t, db.Write, `SELECT p.identifier, p.row_count, p.total, o.open FROM stripe_pushes p JOIN outbox o ON o.push_id = p.id
		ORDER BY p.identifier`); got != "hl_push4|1|3|0|\nhl_push5|2|5|0|\n" {
		t.Errorf("pushes after the claim:\n%s", got)
	}
}
