package schema

import (
	"context"
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
