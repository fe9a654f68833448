package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// versionStripeInvoicePushes is the migration that created
// stripe_invoice_pushes.
const versionStripeInvoicePushes = 28

// StripeInvoicePush is a closed invoice as it is sent to Stripe
// (stripe.invoices, migration 0028): the Stripe invoice to create and its
// items, frozen in the close's transaction, and (reads only) its outbox
// message's state and Stripe's latest answer.
type StripeInvoicePush struct {
	ID               int64  `db:"id"`
	InvoiceID        int64  `db:"invoice_id"`
	Identifier       string `db:"identifier"`
	CustomerID       string `db:"customer_id"`
	StripeCustomer   string `db:"stripe_customer"` // "": the customer's link, read when sent
	Currency         string `db:"currency"`
	Total            string `db:"total"`
	TotalMinor       string `db:"total_minor"`
	Items            string `db:"items"` // JSON
	CollectionMethod string `db:"collection_method"`
	DaysUntilDue     int    `db:"days_until_due"`
	Finalize         int    `db:"finalize"`
	CreatedAt        int64  `db:"created_at"`

	Period     string `db:"period"`         // the invoice's period label (reads only)
	Digest     []byte `db:"invoice_digest"` // the invoice's digest (reads only)
	OutboxID   int64  `db:"outbox_id"`
	Status     string `db:"status"`
	Attempts   int    `db:"attempts"`
	LastStatus int    `db:"last_status"`
	LastError  string `db:"last_error"`
	// Result is Stripe's latest answer once the invoice was complete
	// (StripeInvoice "" until then).
	Result StripeInvoiceResult `db:"result"`
}

// StripeInvoiceResult is what Stripe said of an invoice hookledger sent,
// once it was complete: its id, number, status, amount due (minor units)
// and the page it is shown on.
type StripeInvoiceResult struct {
	StripeInvoice string `db:"stripe_invoice" json:"stripe_invoice"`
	Number        string `db:"number" json:"number"`
	Status        string `db:"status" json:"status"`
	AmountDue     string `db:"amount_due" json:"amount_due"`
	Currency      string `db:"currency" json:"currency"`
	HostedURL     string `db:"hosted_url" json:"hosted_url"`
}

// InsertStripeInvoicePush appends p and its pending outbox message for
// destination (message_id: p's identifier) in the close's transaction.
func (t *CloseTx) InsertStripeInvoicePush(ctx context.Context, p StripeInvoicePush, destination string, now int64) error {
	var id int64
	err := t.tx.QueryRowContext(ctx, `INSERT INTO stripe_invoice_pushes (invoice_id, identifier, customer_id, stripe_customer,
		currency, total, total_minor, items, collection_method, days_until_due, finalize, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		p.InvoiceID, p.Identifier, p.CustomerID, p.StripeCustomer, p.Currency, p.Total, p.TotalMinor, p.Items,
		p.CollectionMethod, p.DaysUntilDue, p.Finalize, now).Scan(&id)
	if err != nil {
		return fmt.Errorf("insert the push of invoice %d: %w", p.InvoiceID, err)
	}
	if _, err := t.tx.ExecContext(ctx, `INSERT INTO outbox (invoice_push_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
		VALUES (?, ?, ?, 'pending', ?, ?, ?)`, id, destination, p.Identifier, now, now, now); err != nil {
		return fmt.Errorf("insert outbox for the push of invoice %d: %w", p.InvoiceID, err)
	}
	return nil
}

// InsertStripeInvoiceResult appends what Stripe answered for invoice push
// pushID, in the batch that records its delivery.
func (b Batch) InsertStripeInvoiceResult(ctx context.Context, pushID int64, r StripeInvoiceResult, now int64) error {
	if _, err := b.tx.ExecContext(ctx, `INSERT INTO stripe_invoice_results (push_id, stripe_invoice, number, status, amount_due,
		currency, hosted_url, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		pushID, r.StripeInvoice, r.Number, r.Status, r.AmountDue, r.Currency, r.HostedURL, now); err != nil {
		return fmt.Errorf("insert Stripe's answer for invoice push %d: %w", pushID, err)
	}
	return nil
}

// InvoiceExists reports whether invoice id exists, read in the batch that
// links a Stripe invoice event to it by the metadata hookledger sent.
func (b Batch) InvoiceExists(ctx context.Context, id int64) (bool, error) {
	var n int
	err := b.tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM invoices WHERE id = ?`, id).Scan(&n)
	return n > 0, err
}

// invoicePushFrom reads invoice pushes with their message, their invoice's
// period and Stripe's latest answer.
const invoicePushFrom = `SELECT p.id, p.invoice_id, p.identifier, p.customer_id, p.stripe_customer, p.currency, p.total, p.total_minor,
	p.items, p.collection_method, p.days_until_due, p.finalize, p.created_at, i.period, i.digest AS invoice_digest,
	o.id AS outbox_id, o.status, o.attempts, o.last_status, o.last_error,
	COALESCE(r.stripe_invoice, '') AS "result.stripe_invoice", COALESCE(r.number, '') AS "result.number",
	COALESCE(r.status, '') AS "result.status", COALESCE(r.amount_due, '') AS "result.amount_due",
	COALESCE(r.currency, '') AS "result.currency", COALESCE(r.hosted_url, '') AS "result.hosted_url"
	FROM stripe_invoice_pushes p JOIN invoices i ON i.id = p.invoice_id JOIN outbox o ON o.invoice_push_id = p.id
	LEFT JOIN stripe_invoice_results r ON r.id = (SELECT MAX(l.id) FROM stripe_invoice_results l WHERE l.push_id = p.id)`

// StripeInvoicePushesOf reads the invoice pushes of outbox messages ids, by
// outbox id (the relay).
func (db *DB) StripeInvoicePushesOf(ctx context.Context, ids []int64) (map[int64]StripeInvoicePush, error) {
	out := make(map[int64]StripeInvoicePush, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	q, args, err := sqlx.In(invoicePushFrom+` WHERE o.id IN (?)`, ids)
	if err != nil {
		return nil, err
	}
	var rows []StripeInvoicePush
	if err := db.Read.SelectContext(ctx, &rows, q, args...); err != nil {
		if predates(ctx, db.Read, versionStripeInvoicePushes) {
			return out, nil // a database before invoice pushes has none
		}
		return nil, err
	}
	for _, r := range rows {
		out[r.OutboxID] = r
	}
	return out, nil
}

// StripeInvoicePushes lists the invoice pushes of the invoices of periods
// starting in [from, to) (unix ms), of one customer ("": all), in invoice
// order; none on a database older than migration 0028.
func (db *DB) StripeInvoicePushes(ctx context.Context, from, to int64, customer string) ([]StripeInvoicePush, error) {
	if predates(ctx, db.Read, versionStripeInvoicePushes) {
		return nil, nil
	}
	where, args := []string{"i.period_start >= ?", "i.period_start < ?"}, []any{from, to}
	if customer != "" {
		where, args = append(where, "p.customer_id = ?"), append(args, customer)
	}
	var out []StripeInvoicePush
	err := db.Read.SelectContext(ctx, &out, invoicePushFrom+` WHERE `+strings.Join(where, " AND ")+` ORDER BY p.invoice_id`, args...)
	return out, err
}

// StripeInvoicePushOf is invoice id's push (ok false: none).
func (db *DB) StripeInvoicePushOf(ctx context.Context, invoiceID int64) (StripeInvoicePush, bool, error) {
	var p StripeInvoicePush
	if predates(ctx, db.Read, versionStripeInvoicePushes) {
		return p, false, nil
	}
	err := db.Read.GetContext(ctx, &p, invoicePushFrom+` WHERE p.invoice_id = ?`, invoiceID)
	if err == sql.ErrNoRows {
		return p, false, nil
	}
	return p, err == nil, err
}
