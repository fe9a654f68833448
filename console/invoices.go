package console

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/hookledger/hookledger/dispute"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

type invoicesView struct {
	Customer, Period string
	Before, Older    int64
	Invoices         []schema.InvoiceSummary
	// Totals is the money of the invoices listed, per currency; Unpriced
	// counts those closed without a plan (they have no money to add).
	Totals   []currencySum
	Unpriced int
	Lines    int64 // invoice lines listed, late ones included
	Late     int64
	// Stripe is each listed invoice's state in Stripe (billing sync's close
	// mode; stripe.States), Unlinked Stripe's invoice events that bill no
	// invoice of this ledger (kept and shown, never dropped).
	Stripe   map[int64]*invoice.StripeInvoice
	Unlinked []schema.StripeInvoiceState
}

// currencySum is the sum of several invoices' totals in one currency.
type currencySum struct {
	Currency string `json:"currency"`
	Total    string `json:"total"`
	Invoices int    `json:"invoices"`
}

// invoices lists closed invoices, newest first, a page at a time, with the
// page's totals; its downloads (invoices.csv, invoices.json) are this same
// view written out.
func (c *Console) invoices(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	v := invoicesView{Customer: q.Get("customer"), Period: q.Get("period")}
	if b, err := strconv.ParseInt(q.Get("before"), 10, 64); err == nil && b > 0 {
		v.Before = b
	}
	invs, err := c.DB.ConsoleInvoices(r.Context(), schema.InvoicePage{Before: v.Before, Customer: v.Customer, Period: v.Period, Limit: invoicesPerPage + 1})
	if errors.Is(err, schema.ErrNoInvoices) {
		invs, err = nil, nil
	}
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	if len(invs) > invoicesPerPage {
		invs = invs[:invoicesPerPage]
		v.Older = invs[invoicesPerPage-1].ID
	}
	v.Invoices = invs
	if v.Totals, err = sumByCurrency(invs); err != nil {
		c.internal(w, r, s, err)
		return
	}
	ids := make([]int64, len(invs))
	for i, inv := range invs {
		ids[i] = inv.ID
		v.Lines, v.Late = v.Lines+inv.Lines, v.Late+inv.Late
		if inv.Currency == "" {
			v.Unpriced++
		}
	}
	if v.Stripe, err = stripe.States(r.Context(), c.DB, ids); err == nil && v.Customer == "" {
		v.Unlinked, err = c.DB.UnlinkedStripeInvoiceStates(r.Context())
	}
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	if f := r.PathValue("format"); f != "" {
		writeInvoices(w, f, v)
		return
	}
	c.render(w, r, s, http.StatusOK, "invoices", "Invoices", v)
}

// sumByCurrency adds the invoices' totals per currency, exactly (each total
// is already rounded to its currency's minor unit, so their sum is too).
func sumByCurrency(invs []schema.InvoiceSummary) ([]currencySum, error) {
	var out []currencySum
	amounts := map[string][]pricing.Decimal{}
	for _, inv := range invs {
		if inv.Currency == "" {
			continue
		}
		d, err := pricing.ParseDecimal(inv.Total)
		if err != nil {
			return nil, fmt.Errorf("invoice %d: total %q: %w", inv.ID, inv.Total, err)
		}
		if _, ok := amounts[inv.Currency]; !ok {
			out = append(out, currencySum{Currency: inv.Currency})
		}
		amounts[inv.Currency] = append(amounts[inv.Currency], d)
	}
	for i := range out {
		sum, err := pricing.Sum(amounts[out[i].Currency]...)
		if err != nil {
			return nil, fmt.Errorf("sum the invoices in %s: %w", out[i].Currency, err)
		}
		out[i].Total, out[i].Invoices = sum.String(), len(amounts[out[i].Currency])
	}
	slices.SortFunc(out, func(a, b currencySum) int { return strings.Compare(a.Currency, b.Currency) })
	return out, nil
}

type invoiceView struct {
	Invoice                  *invoice.Invoice
	Digest, DigestRecomputed string
	DigestOK                 bool
	Lines                    []lineView
	// PriceDigest is the stored SHA-256 of the invoice's price snapshot;
	// MoneyProblems what does not recompute from it (invoice.CheckInvoiceMoney,
	// the check `hookledger verify` runs). Both empty on an unpriced invoice.
	PriceDigest   string
	MoneyProblems []string
	OK            bool
}

type lineView struct {
	invoice.InvoiceLine
	Ref              string // invoice:ID/LINE, the dispute target
	Digest           string
	Check            *invoice.LineCheck
	DigestRecomputed string
	Breakdown        string // the line's charge for people; "" when unpriced
	Dimension        string // model=gpt-4o on a line of a price by dimension, else ""
}

// invoice shows one invoice: its cutoffs, its digest recomputed over its
// lines, and each line recomputed from the ledger with the check `hookledger
// verify` and `dispute` run (invoice.CheckLine), each linking to its trace.
func (c *Console) invoice(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		c.fail(w, r, s, http.StatusNotFound, "An invoice id is a positive number.")
		return
	}
	var v invoiceView
	err = c.Tracer.DB.View(r.Context(), func(tx *schema.ReadTx) error {
		inv, err := invoice.GetInvoice(r.Context(), tx, id)
		if err != nil {
			return err
		}
		sum := invoice.InvoiceDigest(inv)
		v = invoiceView{Invoice: inv, Digest: hex.EncodeToString(inv.Digest), DigestRecomputed: hex.EncodeToString(sum),
			DigestOK: bytes.Equal(sum, inv.Digest)}
		v.OK = v.DigestOK
		breakdowns := invoice.Breakdowns(inv)
		before := map[int64]string{}
		for _, l := range inv.Lines {
			check, err := invoice.CheckLine(r.Context(), tx, l)
			if err != nil {
				return err
			}
			check.Rows = nil // the trace lists them
			v.Lines = append(v.Lines, lineView{InvoiceLine: l, Ref: dispute.Target{Kind: dispute.KindLine, Invoice: l.InvoiceID, Line: l.LineNo}.String(),
				Digest: hex.EncodeToString(l.Digest), Check: check, DigestRecomputed: hex.EncodeToString(check.Digest), Breakdown: breakdowns[l.LineNo],
				Dimension: invoice.DimensionLabel(l.Dimensions)})
			v.OK = v.OK && check.Problem == ""
			if check.Problem == "" {
				before[l.LineNo] = check.BilledBefore
			}
		}
		if inv.Money.Currency != "" {
			v.PriceDigest = hex.EncodeToString(inv.Money.PriceDigest)
		}
		v.MoneyProblems = invoice.CheckInvoiceMoney(inv, before)
		v.OK = v.OK && len(v.MoneyProblems) == 0
		return nil
	})
	if errors.Is(err, invoice.ErrNoInvoice) || errors.Is(err, schema.ErrNoInvoices) {
		c.fail(w, r, s, http.StatusNotFound, "There is no invoice "+strconv.FormatInt(id, 10)+".")
		return
	}
	if err == nil {
		var states map[int64]*invoice.StripeInvoice
		states, err = stripe.States(r.Context(), c.DB, []int64{id})
		v.Invoice.Stripe = states[id]
	}
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "invoice", "Invoice "+strconv.FormatInt(id, 10), v)
}
