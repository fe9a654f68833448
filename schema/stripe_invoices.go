package schema

import (
	"context"
	"fmt"
	"slices"

	"github.com/jmoiron/sqlx"
)

// versionStripeInvoiceStates is the migration that created stripe_invoice_states.
const versionStripeInvoiceStates = 23

// StripeInvoiceState is one Stripe invoice event (invoice.finalized,
// invoice.paid, invoice.payment_failed) as it concerns one hookledger
// invoice (InvoiceID 0: the event bills none of them).
type StripeInvoiceState struct {
	ID             int64  `db:"id" json:"id"`
	ReceiptID      int64  `db:"receipt_id" json:"receipt_id"`
	StripeEvent    string `db:"stripe_event" json:"stripe_event"`
	EventType      string `db:"event_type" json:"event_type"`
	State          string `db:"state" json:"state"`
	EventCreated   int64  `db:"event_created" json:"event_created"` // unix seconds
	StripeInvoice  string `db:"stripe_invoice" json:"stripe_invoice"`
	StripeCustomer string `db:"stripe_customer" json:"stripe_customer"`
	PeriodStart    int64  `db:"period_start" json:"period_start"` // unix seconds
	PeriodEnd      int64  `db:"period_end" json:"period_end"`
	InvoiceID      int64  `db:"invoice_id" json:"invoice_id,omitempty"`
	CreatedAt      int64  `db:"created_at" json:"created_at"`
}

// InsertStripeInvoiceState appends s in the batch that takes its event into
// custody (s.ReceiptID is that event's receipt).
func (b Batch) InsertStripeInvoiceState(ctx context.Context, s StripeInvoiceState, now int64) error {
	if _, err := b.tx.ExecContext(ctx, `INSERT INTO stripe_invoice_states (receipt_id, stripe_event, event_type, state, event_created,
		stripe_invoice, stripe_customer, period_start, period_end, invoice_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.ReceiptID, s.StripeEvent, s.EventType, s.State, s.EventCreated,
		s.StripeInvoice, s.StripeCustomer, s.PeriodStart, s.PeriodEnd, nullID(s.InvoiceID), now); err != nil {
		return fmt.Errorf("insert Stripe invoice state: %w", err)
	}
	return nil
}

// CustomersLinkedTo lists the customers whose latest registry row links
// them to Stripe customer stripeCustomer, read in
// the batch that links an invoice event. The registry's external ids are a
// JSON object; its text is matched loosely here and decode (the Stripe
// customer external ids name) picks the exact ones, so the query is the
// same on both backends.
func (b Batch) CustomersLinkedTo(ctx context.Context, stripeCustomer string, decode func(externalIDs string) string) ([]string, error) {
	var rows []struct {
		Customer string `db:"customer_id"`
		External string `db:"external_ids"`
	}
	// The latest row of each customer that ever named it: a later row
	// that names another Stripe customer (a relink) drops the customer.
	// LIKE's wildcards ('_' is in every Stripe id) only widen the match.
	if err := b.tx.SelectContext(ctx, &rows, `SELECT c.customer_id, c.external_ids FROM customers c
		WHERE c.id = (SELECT MAX(l.id) FROM customers l WHERE l.customer_id = c.customer_id)
		  AND c.customer_id IN (SELECT n.customer_id FROM customers n WHERE n.external_ids LIKE ?)
		ORDER BY c.customer_id`, "%"+stripeCustomer+"%"); err != nil {
		return nil, fmt.Errorf("read the customers linked to %s: %w", stripeCustomer, err)
	}
	var out []string
	for _, r := range rows {
		if decode(r.External) == stripeCustomer {
			out = append(out, r.Customer)
		}
	}
	return out, nil
}

// LinePushInvoices lists the invoices whose close-mode pushes (one per
// invoice line) are for customer, or name Stripe customer stripeCustomer,
// with a timestamp in [from, to) (unix seconds): the invoices a Stripe
// invoice of that customer and period bills.
func (b Batch) LinePushInvoices(ctx context.Context, customers []string, stripeCustomer string, from, to int64) ([]int64, error) {
	var out []int64
	seen := map[int64]bool{}
	add := func(q string, args ...any) error {
		var ids []int64
		if err := b.tx.SelectContext(ctx, &ids, q, args...); err != nil {
			return fmt.Errorf("read the pushes of %s: %w", stripeCustomer, err)
		}
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
		return nil
	}
	for _, c := range customers {
		if err := add(`SELECT DISTINCT invoice_id FROM stripe_pushes WHERE invoice_id IS NOT NULL AND customer_id = ?
			AND timestamp >= ? AND timestamp < ? ORDER BY invoice_id`, c, from, to); err != nil {
			return nil, err
		}
	}
	if stripeCustomer != "" {
		if err := add(`SELECT DISTINCT invoice_id FROM stripe_pushes WHERE invoice_id IS NOT NULL AND stripe_customer = ?
			AND timestamp >= ? AND timestamp < ? ORDER BY invoice_id`, stripeCustomer, from, to); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// StripeInvoiceStatesOf reads the Stripe invoice states of invoices ids, in
// Stripe's event order (then arrival), with whether each invoice has
// close-mode pushes (pushed). Nothing (no error) on a database that predates
// them.
func (db *DB) StripeInvoiceStatesOf(ctx context.Context, ids []int64) (states map[int64][]StripeInvoiceState, pushed map[int64]bool, err error) {
	states, pushed = map[int64][]StripeInvoiceState{}, map[int64]bool{}
	if len(ids) == 0 {
		return states, pushed, nil
	}
	// A few hundred ids a query: invoice list reads every invoice, and
	// both backends bound a statement's parameters.
	// Pushed: a close-mode line, or the invoice itself (stripe.invoices;
	// asked once, not per chunk).
	invoicePushes := !predates(ctx, db.Read, versionStripeInvoicePushes)
	for chunk := range slices.Chunk(ids, 500) {
		q, args, err := sqlx.In(`SELECT id, receipt_id, stripe_event, event_type, state, event_created, stripe_invoice, stripe_customer,
			period_start, period_end, COALESCE(invoice_id, 0) AS invoice_id, created_at
			FROM stripe_invoice_states WHERE invoice_id IS NOT NULL AND invoice_id IN (?) ORDER BY invoice_id, event_created, id`, chunk)
		if err != nil {
			return nil, nil, err
		}
		var rows []StripeInvoiceState
		if err := db.Read.SelectContext(ctx, &rows, q, args...); err != nil {
			if predates(ctx, db.Read, versionStripeInvoiceStates) {
				return states, pushed, nil
			}
			return nil, nil, fmt.Errorf("read Stripe invoice states: %w", err)
		}
		for _, r := range rows {
			states[r.InvoiceID] = append(states[r.InvoiceID], r)
		}
		sent, sentArgs := `SELECT DISTINCT invoice_id FROM stripe_pushes WHERE invoice_id IS NOT NULL AND invoice_id IN (?)`, []any{chunk}
		if invoicePushes {
			sent, sentArgs = sent+` UNION SELECT invoice_id FROM stripe_invoice_pushes WHERE invoice_id IN (?)`, append(sentArgs, chunk)
		}
		q, args, err = sqlx.In(sent, sentArgs...)
		if err != nil {
			return nil, nil, err
		}
		var withPushes []int64
		if err := db.Read.SelectContext(ctx, &withPushes, q, args...); err != nil {
			return nil, nil, fmt.Errorf("read invoices' pushes: %w", err)
		}
		for _, id := range withPushes {
			pushed[id] = true
		}
	}
	return states, pushed, nil
}

// UnlinkedStripeInvoiceStates reads every Stripe invoice event that bills
// no hookledger invoice, in arrival order (none on a database that predates
// them).
func (db *DB) UnlinkedStripeInvoiceStates(ctx context.Context) ([]StripeInvoiceState, error) {
	var out []StripeInvoiceState
	err := db.Read.SelectContext(ctx, &out, `SELECT id, receipt_id, stripe_event, event_type, state, event_created, stripe_invoice,
		stripe_customer, period_start, period_end, 0 AS invoice_id, created_at
		FROM stripe_invoice_states WHERE invoice_id IS NULL ORDER BY id`)
	if err != nil && predates(ctx, db.Read, versionStripeInvoiceStates) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read unlinked Stripe invoice states: %w", err)
	}
	return out, nil
}
