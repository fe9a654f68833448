package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Prepaid credits on the admin API: the same grant as `hookledger credits
// grant` (custody.GrantCredit, in the writer's transaction) and a
// customer's standing at one instant (invoice.Standing), with what the open
// period's draft invoice would draw.

// Submitter runs an operation in the writer's transaction (*custody.Writer).
type Submitter interface {
	Submit(ctx context.Context, op custody.Op) error
}

// CreditReader reads the credit ledger (*schema.DB).
type CreditReader interface {
	CreditEntries(ctx context.Context, f schema.CreditFilter) ([]schema.CreditEntry, error)
}

// NewGrant is the body of POST /v1/customers/{id}/credits.
type NewGrant struct {
	// ID is the grant's idempotency key ("": a new one).
	ID       string `json:"id"`
	Amount   string `json:"amount"` // "100.00", in the currency's minor units
	Currency string `json:"currency"`
	Category string `json:"category"` // paid (default) | promotional
	// Priority is absent for invoice.DefaultCreditPriority; 0 is a priority.
	Priority    *int64 `json:"priority"`
	EffectiveAt string `json:"effective_at"` // RFC 3339; "": when recorded
	ExpiresAt   string `json:"expires_at"`   // RFC 3339; "": never
	Reason      string `json:"reason"`
	Actor       string `json:"actor"` // default DefaultGrantActor
}

// DefaultGrantActor is who a grant asked for without an actor is recorded as granted by.
const DefaultGrantActor = "admin API"

// GrantAnswer is what POST /v1/customers/{id}/credits answers.
type GrantAnswer struct {
	// Duplicate: the same grant was asked for before with this id, and
	// nothing was written.
	Duplicate bool           `json:"duplicate"`
	Grant     *invoice.Grant `json:"grant"`
}

// grant answers POST /v1/customers/{id}/credits: 201 with the new grant,
// 200 with the grant as it stands now for a repeat of the same id and
// body, 409 for the id of another grant.
func (c *Customers) grant(w http.ResponseWriter, r *http.Request) {
	id, ok := customerID(w, r)
	if !ok {
		return
	}
	var body NewGrant
	if !decode(w, r, &body, `{"id": "grant_1", "amount": "100.00", "currency": "USD", "category": "paid", "priority": 50, `+
		`"effective_at": "2026-12-01T00:00:00Z", "expires_at": "2027-12-01T00:00:00Z", "reason": …, "actor": …}`) {
		return
	}
	// As every text the API keeps: PostgreSQL's text must hold it.
	if err := ledger.CheckTexts(ledger.Text{Field: "reason", Value: body.Reason}, ledger.Text{Field: "actor", Value: body.Actor}); err != nil {
		forwardError(w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	req, err := body.request(id)
	if err != nil {
		forwardError(w, http.StatusBadRequest, "bad_grant", err.Error())
		return
	}
	if c.Writer == nil {
		forwardError(w, http.StatusServiceUnavailable, "unavailable", "this admin API has no writer: grants are refused")
		return
	}
	op := &custody.GrantCredit{Request: req}
	if err := c.Writer.Submit(r.Context(), op); err != nil {
		c.grantFailed(w, op, err)
		return
	}
	if !op.Duplicate {
		forwardJSON(w, http.StatusCreated, GrantAnswer{Grant: invoice.GrantView(op.Entry, c.Now().UnixMilli())})
		return
	}
	// A repeat wrote nothing: show the grant as it stands now (its balance
	// after burns, a void or an expiry), not as it was granted.
	gs, err := invoice.Grants(r.Context(), c.DB, id, c.Now().UnixMilli())
	if err != nil {
		c.fail(w, err)
		return
	}
	g := invoice.GrantView(op.Entry, c.Now().UnixMilli())
	for _, x := range gs {
		if x.ID == op.Entry.GrantID {
			g = x
		}
	}
	forwardJSON(w, http.StatusOK, GrantAnswer{Duplicate: true, Grant: g})
}

// request is the grant body asks for, for customer, or what makes it bad.
func (body NewGrant) request(customer string) (invoice.GrantRequest, error) {
	req := invoice.GrantRequest{ID: body.ID, Customer: customer, Currency: body.Currency, Amount: body.Amount,
		Category: body.Category, Priority: invoice.DefaultCreditPriority, Reason: body.Reason, Actor: body.Actor}
	if body.Priority != nil {
		req.Priority = *body.Priority
	}
	if req.Actor == "" {
		req.Actor = DefaultGrantActor
	}
	// The ledger checks the rest (ErrBadGrant).
	var err error
	if req.EffectiveAt, err = rfc3339Millis("effective_at", body.EffectiveAt); err != nil {
		return req, err
	}
	if req.ExpiresAt, err = rfc3339Millis("expires_at", body.ExpiresAt); err != nil {
		return req, err
	}
	return req, nil
}

// rfc3339Millis reads field's value s as an RFC 3339 time in unix ms (0 when empty).
func rfc3339Millis(field, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not an RFC 3339 time (2026-12-01T00:00:00Z)", field, s)
	}
	if t.UnixMilli() <= 0 {
		return 0, fmt.Errorf("%s: %q is before 1970", field, s)
	}
	return t.UnixMilli(), nil
}

// grantFailed maps a grant's failure onto HTTP.
func (c *Customers) grantFailed(w http.ResponseWriter, op *custody.GrantCredit, err error) {
	switch {
	case errors.Is(err, custody.ErrGrantConflict):
		forwardError(w, http.StatusConflict, "id_conflict", err.Error())
	case errors.Is(err, invoice.ErrBadGrant):
		forwardError(w, http.StatusBadRequest, "bad_grant", err.Error())
	case errors.Is(err, custody.ErrNotReplicated):
		// Committed here: a repeat with the grant's id is answered as a
		// duplicate, where one without an id would grant again.
		forwardError(w, http.StatusServiceUnavailable, "not_replicated",
			fmt.Sprintf("%v: grant %s; repeat the request with \"id\": %q", err, op.Entry.GrantID, op.Entry.GrantID))
	case errors.Is(err, custody.ErrQueueFull), errors.Is(err, custody.ErrClosed):
		w.Header().Set("Retry-After", "1")
		forwardError(w, http.StatusServiceUnavailable, "unavailable", err.Error())
	default:
		c.fail(w, err)
	}
}

// credits answers GET /v1/customers/{id}/credits: the customer's credit
// now, per grant and per currency, with what the open period would draw if
// it closed now: the credits its preview's draft invoices apply. The open
// period is the month a close is about (invoice.ClosingMonth): the month
// that just ended until it is closed for all customers, then the current
// one.
func (c *Customers) credits(w http.ResponseWriter, r *http.Request) {
	id, ok := customerID(w, r)
	if !ok {
		return
	}
	loc := c.Zone
	if loc == nil {
		loc = time.UTC
	}
	now := c.Now()
	period, _, err := invoice.ClosingMonth(r.Context(), c.DB, now, loc)
	if err != nil {
		c.fail(w, err)
		return
	}
	res, err := c.previewOf(r.Context(), id, period)
	if err != nil {
		c.fail(w, err)
		return
	}
	// A month already closed (Existing) draws nothing more: its burns are
	// in the grants' balances.
	var drafts []*invoice.Invoice
	for i := range res.Invoices {
		if !res.Existing {
			drafts = append(drafts, &res.Invoices[i])
		}
	}
	st, err := invoice.Standing(r.Context(), c.DB, id, now, drafts...)
	if err != nil {
		c.fail(w, err)
		return
	}
	forwardJSON(w, http.StatusOK, st)
}
