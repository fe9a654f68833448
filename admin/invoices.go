package admin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

// invoices answers GET /v1/invoices (?customer=, ?period=YYYY-MM): the
// closed invoices with their lines, as `hookledger invoice list --format
// json` prints them, each with its state in Stripe when billing sync pushed
// it or Stripe billed it ("stripe": docs/stripe.md).
func (c *Customers) invoices(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	invs, err := invoice.ListInvoices(r.Context(), c.DB, invoice.InvoiceFilter{Customer: q.Get("customer"), Period: q.Get("period")})
	if errors.Is(err, schema.ErrNoInvoices) {
		invs, err = nil, nil
	}
	if err == nil {
		err = stripe.WithStates(r.Context(), c.DB, invs)
	}
	if err != nil {
		c.fail(w, err)
		return
	}
	if invs == nil {
		invs = []invoice.Invoice{}
	}
	forwardJSON(w, http.StatusOK, invs)
}

// invoice answers GET /v1/invoices/{id}: one invoice, as `hookledger invoice
// show ID --format json` prints it, with its state in Stripe and every
// Stripe invoice event that billed it.
func (c *Customers) invoice(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		forwardError(w, http.StatusBadRequest, "bad_invoice", fmt.Sprintf("%q is not an invoice id (a positive number)", r.PathValue("id")))
		return
	}
	inv, err := invoice.GetInvoice(r.Context(), c.DB, id)
	if errors.Is(err, invoice.ErrNoInvoice) || errors.Is(err, schema.ErrNoInvoices) {
		forwardError(w, http.StatusNotFound, "unknown_invoice", fmt.Sprintf("there is no invoice %d", id))
		return
	}
	one := []invoice.Invoice{}
	if err == nil {
		one = append(one, *inv)
		err = stripe.WithStates(r.Context(), c.DB, one)
	}
	if err != nil {
		c.fail(w, err)
		return
	}
	forwardJSON(w, http.StatusOK, one[0])
}
