package fakestripe

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Invoice is an invoice the fake keeps (POST /v1/invoices), with its items.
type Invoice struct {
	ID               string
	Customer         string
	Currency         string
	Status           string // draft, then open once finalized
	CollectionMethod string
	DaysUntilDue     int
	AutoAdvance      bool
	Number           string
	Metadata         map[string]string
	Items            []Item
	Created          int64 // unix seconds, Now
}

// Item is an invoice item the fake keeps (POST /v1/invoiceitems).
type Item struct {
	ID          string
	Amount      *big.Int // minor units
	Currency    string
	Description string
	PeriodStart int64
	PeriodEnd   int64
	Metadata    map[string]string
}

// AmountDue is the sum of inv's items.
func (inv *Invoice) AmountDue() *big.Int {
	sum := new(big.Int)
	for _, it := range inv.Items {
		sum.Add(sum, it.Amount)
	}
	return sum
}

// Invoices copies the invoices the fake keeps, oldest first.
func (s *Stripe) Invoices() []Invoice {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	out := make([]Invoice, 0, len(s.invoices))
	for _, inv := range s.invoices {
		c := *inv
		c.Items = slices.Clone(inv.Items)
		out = append(out, c)
	}
	return out
}

// invoiceCall answers the invoice endpoints hookledger calls (report false:
// r is none of them): create, list and finalize invoices; create and list
// invoice items. Invoices and items are kept; a POST with an
// Idempotency-Key seen in the past 24 hours gets its first answer.
func (s *Stripe) invoiceCall(w http.ResponseWriter, r *http.Request) bool {
	path := r.URL.Path
	var id string
	switch {
	case r.Method == http.MethodPost && path == "/v1/invoices",
		r.Method == http.MethodGet && path == "/v1/invoices",
		r.Method == http.MethodPost && path == "/v1/invoiceitems",
		r.Method == http.MethodGet && path == "/v1/invoiceitems":
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/v1/invoices/") && strings.HasSuffix(path, "/finalize"):
		id = strings.TrimSuffix(strings.TrimPrefix(path, "/v1/invoices/"), "/finalize")
	default:
		return false
	}
	if err := r.ParseForm(); err != nil {
		s.answer(w, http.StatusBadRequest, err.Error(), "")
		return true
	}
	s.Mu.Lock()
	defer s.Mu.Unlock()
	f, failed := s.call(w)
	if failed {
		return true
	}
	switch {
	case r.Method == http.MethodGet && f == LostReply:
		// A read's lost answer: there is no work to have done first.
		s.answer(w, http.StatusInternalServerError, "An error occurred", "true")
	case r.Method == http.MethodGet && path == "/v1/invoices":
		s.listInvoices(w, r)
	case r.Method == http.MethodGet:
		s.listItems(w, r)
	case path == "/v1/invoices":
		s.idempotent(w, r, f, func(w http.ResponseWriter) { s.createInvoice(w, r) })
	case path == "/v1/invoiceitems":
		s.idempotent(w, r, f, func(w http.ResponseWriter) { s.createItem(w, r) })
	default:
		s.idempotent(w, r, f, func(w http.ResponseWriter) { s.finalize(w, id) })
	}
	return true
}

func metadata(form map[string][]string) map[string]string {
	m := map[string]string{}
	for k, v := range form {
		if key, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(key, "]") {
			m[strings.TrimSuffix(key, "]")] = v[0]
		}
	}
	return m
}

func (s *Stripe) createInvoice(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	inv := &Invoice{Customer: f.Get("customer"), Currency: f.Get("currency"), Status: "draft",
		CollectionMethod: f.Get("collection_method"), AutoAdvance: f.Get("auto_advance") == "true", Metadata: metadata(f), Created: s.Now().Unix()}
	inv.DaysUntilDue, _ = strconv.Atoi(f.Get("days_until_due"))
	switch {
	case inv.Customer == "":
		s.answer(w, http.StatusBadRequest, "Missing required param: customer.", "false")
		return
	case inv.Currency != strings.ToLower(inv.Currency) || len(inv.Currency) != 3:
		s.answer(w, http.StatusBadRequest, "Invalid currency: "+inv.Currency, "false")
		return
	case inv.CollectionMethod == "charge_automatically" && f.Has("days_until_due"):
		s.answer(w, http.StatusBadRequest, "You can only set `days_until_due` if `collection_method` is `send_invoice`.", "false")
		return
	case inv.CollectionMethod == "send_invoice" && inv.DaysUntilDue <= 0:
		s.answer(w, http.StatusBadRequest, "Missing required param: days_until_due.", "false")
		return
	}
	inv.ID = fmt.Sprintf("in_fake%04d", len(s.invoices)+1)
	s.invoices = append(s.invoices, inv)
	s.writeInvoice(w, inv)
}

func (s *Stripe) invoice(id string) *Invoice {
	for _, inv := range s.invoices {
		if inv.ID == id {
			return inv
		}
	}
	return nil
}

func (s *Stripe) createItem(w http.ResponseWriter, r *http.Request) {
	f := r.PostForm
	inv := s.invoice(f.Get("invoice"))
	amount, ok := new(big.Int).SetString(f.Get("amount"), 10)
	switch {
	case inv == nil:
		s.answer(w, http.StatusBadRequest, "No such invoice: '"+f.Get("invoice")+"'", "false")
		return
	case inv.Status != "draft":
		s.answer(w, http.StatusBadRequest, "You can only add invoice items to draft invoices.", "false")
		return
	case f.Get("customer") != inv.Customer:
		s.answer(w, http.StatusBadRequest, "The invoice's customer is not the item's.", "false")
		return
	case f.Get("currency") != inv.Currency:
		s.answer(w, http.StatusBadRequest, "The item's currency is not the invoice's.", "false")
		return
	case !ok:
		s.answer(w, http.StatusBadRequest, "Invalid integer: "+f.Get("amount"), "false")
		return
	case len(inv.Items) >= 250:
		s.answer(w, http.StatusBadRequest, "An invoice takes at most 250 items.", "false")
		return
	}
	it := Item{ID: fmt.Sprintf("ii_fake%04d", s.itemCount()+1), Amount: amount, Currency: f.Get("currency"),
		Description: f.Get("description"), Metadata: metadata(f)}
	it.PeriodStart, _ = strconv.ParseInt(f.Get("period[start]"), 10, 64)
	it.PeriodEnd, _ = strconv.ParseInt(f.Get("period[end]"), 10, 64)
	inv.Items = append(inv.Items, it)
	s.writeJSON(w, map[string]any{"id": it.ID, "object": "invoiceitem", "invoice": inv.ID, "amount": json.Number(amount.String()),
		"metadata": it.Metadata})
}

func (s *Stripe) itemCount() int {
	n := 0
	for _, inv := range s.invoices {
		n += len(inv.Items)
	}
	return n
}

func (s *Stripe) finalize(w http.ResponseWriter, id string) {
	inv := s.invoice(id)
	switch {
	case inv == nil:
		s.answer(w, http.StatusNotFound, "No such invoice: '"+id+"'", "false")
		return
	case inv.Status != "draft":
		s.answer(w, http.StatusBadRequest, "This invoice is already finalized.", "false")
		return
	}
	inv.Status, inv.AutoAdvance = "open", true
	inv.Number = fmt.Sprintf("FAKE-%04d", len(s.invoices))
	s.writeInvoice(w, inv)
}

// listInvoices answers GET /v1/invoices?customer=…&created[gte]=… newest
// first, a page of limit after starting_after, as Stripe lists.
func (s *Stripe) listInvoices(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	since, _ := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	var all []*Invoice
	for _, inv := range slices.Backward(s.invoices) {
		if inv.Customer == q.Get("customer") && inv.Created >= since {
			all = append(all, inv)
		}
	}
	page, more := paginate(all, q.Get("starting_after"), q.Get("limit"), func(inv *Invoice) string { return inv.ID })
	data := make([]map[string]any, len(page))
	for i, inv := range page {
		data[i] = s.invoiceJSON(inv)
	}
	s.writeJSON(w, map[string]any{"object": "list", "data": data, "has_more": more})
}

func (s *Stripe) listItems(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var all []Item
	if inv := s.invoice(q.Get("invoice")); inv != nil {
		all = slices.Clone(inv.Items)
		slices.Reverse(all)
	}
	page, more := paginate(all, q.Get("starting_after"), q.Get("limit"), func(it Item) string { return it.ID })
	data := make([]map[string]any, len(page))
	for i, it := range page {
		data[i] = map[string]any{"id": it.ID, "object": "invoiceitem", "amount": json.Number(it.Amount.String()), "metadata": it.Metadata}
	}
	s.writeJSON(w, map[string]any{"object": "list", "data": data, "has_more": more})
}

func paginate[T any](all []T, after, limit string, id func(T) string) ([]T, bool) {
	n, err := strconv.Atoi(limit)
	if err != nil || n <= 0 || n > 100 {
		n = 10
	}
	if after != "" {
		for i, x := range all {
			if id(x) == after {
				all = all[i+1:]
				break
			}
		}
	}
	if len(all) > n {
		return all[:n], true
	}
	return all, false
}

func (s *Stripe) invoiceJSON(inv *Invoice) map[string]any {
	return map[string]any{"id": inv.ID, "object": "invoice", "customer": inv.Customer, "currency": inv.Currency, "status": inv.Status,
		"number": inv.Number, "amount_due": json.Number(inv.AmountDue().String()), "collection_method": inv.CollectionMethod,
		"hosted_invoice_url": "https://invoice.stripe.test/" + inv.ID, "metadata": inv.Metadata, "created": inv.Created}
}

func (s *Stripe) writeInvoice(w http.ResponseWriter, inv *Invoice) {
	s.writeJSON(w, s.invoiceJSON(inv))
}

func (s *Stripe) writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
