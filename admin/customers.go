package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/stripe"
)

// CustomerStore is what the customer endpoints read and write (*schema.DB).
type CustomerStore interface {
	customer.RegistryStore
	invoice.PreviewStore  // invoice preview: one read-only snapshot
	invoice.ClosingSource // the month a close is about (the credit standing's draft)
	// The closed invoices and their state in Stripe (invoices.go).
	invoice.InvoiceSource
	stripe.InvoiceStore
	CreditReader // the credit ledger (credits.go)
}

// Customers holds the customer registry, plan, invoice-preview and credits
// endpoints: the same reads and actions as `hookledger customers`, `plan`,
// `invoice preview` and `credits grant`, from the same ledger functions.
// JSON in and out; amounts are decimal strings. Register them with Routes.
type Customers struct {
	DB          CustomerStore
	Catalog     *pricing.Catalog // the declared plans (config plans:)
	DefaultPlan string           // customers.default_plan
	Meters      ledger.Meters
	// Zone is the time zone a preview's month is read in when the request
	// names none: invoicing.tz, so a preview shows the month the schedule
	// will close. Default UTC.
	Zone *time.Location
	// Now is the clock: the plan "today" (its UTC date), the preview's
	// default month and its cutoff, the time a change is recorded at.
	Now func() time.Time
	// Entitlements, when set, adds limits to GET /v1/customers/{id}/usage
	// (customerusage.go).
	Entitlements Entitlements
	// Writer runs POST /v1/customers/{id}/credits's grants (credits.go):
	// serve's writer. Without one a grant is refused (503).
	Writer Submitter
}

// Routes registers the endpoints on mux.
func (c *Customers) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/plans", c.plans)
	mux.HandleFunc("GET /v1/customers", c.list)
	mux.HandleFunc("POST /v1/customers", c.add)
	mux.HandleFunc("GET /v1/customers/{id}", c.show)
	mux.HandleFunc("POST /v1/customers/{id}/plan", c.assign)
	mux.HandleFunc("GET /v1/customers/{id}/invoice/preview", c.preview)
	mux.HandleFunc("GET /v1/customers/{id}/usage", c.usage)
	mux.HandleFunc("POST /v1/customers/{id}/credits", c.grant)
	mux.HandleFunc("GET /v1/customers/{id}/credits", c.credits)
	mux.HandleFunc("GET /v1/invoices", c.invoices)
	mux.HandleFunc("GET /v1/invoices/{id}", c.invoice)
}

// customerID is the customer {id} of r's path; false when it is not a
// customer id, with the 400 answered.
func customerID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := r.PathValue("id")
	if err := ledger.CheckIdentifier(id); err != nil {
		forwardError(w, http.StatusBadRequest, "bad_customer", fmt.Sprintf("customer id %q %v", id, err))
		return "", false
	}
	return id, true
}

// maxRequestBody bounds a customer or plan request's JSON.
const maxRequestBody = 64 << 10

// today is the date a customer's current plan is read for: UTC's, as the CLI does.
func (c *Customers) today() pricing.Date {
	return pricing.Date(c.Now().UTC().Format(time.DateOnly))
}

// plans answers GET /v1/plans: every declared plan version, by name and
// date, as `hookledger plan list --format json` prints them.
func (c *Customers) plans(w http.ResponseWriter, r *http.Request) {
	versions := []*pricing.Plan{}
	if c.Catalog != nil {
		for _, name := range c.Catalog.Names() {
			versions = append(versions, c.Catalog.Versions(name)...)
		}
	}
	forwardJSON(w, http.StatusOK, versions)
}

// list answers GET /v1/customers: the registered customers as they are now,
// each with its plan today (`hookledger customers list --format json`).
func (c *Customers) list(w http.ResponseWriter, r *http.Request) {
	cs, err := customer.CustomersToday(r.Context(), c.DB, c.DefaultPlan, c.today())
	if err != nil {
		c.fail(w, err)
		return
	}
	forwardJSON(w, http.StatusOK, cs)
}

// show answers GET /v1/customers/{id}: the registry history, the plan
// assignments and the plan today (`hookledger customers show --format json`).
func (c *Customers) show(w http.ResponseWriter, r *http.Request) {
	id, ok := customerID(w, r)
	if !ok {
		return
	}
	v, err := customer.ViewCustomer(r.Context(), c.DB, c.DefaultPlan, id, c.today())
	if err != nil {
		c.fail(w, err)
		return
	}
	if !v.Known {
		forwardError(w, http.StatusNotFound, "unknown_customer", fmt.Sprintf("%v %q: it is neither registered nor assigned a plan (POST /v1/customers registers it)", customer.ErrNoCustomer, id))
		return
	}
	forwardJSON(w, http.StatusOK, v)
}

// NewCustomer is the body of POST /v1/customers: the customer and,
// optionally, the plan it is on from a date (both or neither).
type NewCustomer struct {
	ID          string            `json:"id"`
	Name        string            `json:"name"`
	Email       string            `json:"email"`
	ExternalIDs map[string]string `json:"external_ids"`
	Note        string            `json:"note"`
	Plan        string            `json:"plan"`
	From        string            `json:"from"` // YYYY-MM-DD
}

// add answers POST /v1/customers: registers a customer (with its first plan
// assignment, in the same transaction) and answers 201 with what GET
// /v1/customers/{id} shows. A customer already registered is 409.
func (c *Customers) add(w http.ResponseWriter, r *http.Request) {
	var req NewCustomer
	if !decode(w, r, &req, `{"id": "cus_1", "name": …, "email": …, "external_ids": {"stripe": "cus_…"}, "plan": "pro", "from": "2026-01-01"}`) {
		return
	}
	now := c.Now().UTC()
	cust := customer.Customer{ID: req.ID, Name: req.Name, Email: req.Email, ExternalIDs: req.ExternalIDs, RecordedAt: now, Note: req.Note}
	var plan *customer.PlanAssignment
	switch {
	case req.Plan != "" && req.From == "":
		forwardError(w, http.StatusBadRequest, "bad_date", "plan needs from, the plan's first day (YYYY-MM-DD)")
		return
	case req.From != "" && req.Plan == "":
		forwardError(w, http.StatusBadRequest, "bad_request", "from goes with plan")
		return
	case req.Plan != "":
		if err := pricing.Date(req.From).Check(); err != nil {
			forwardError(w, http.StatusBadRequest, "bad_date", "from: "+err.Error())
			return
		}
		plan = &customer.PlanAssignment{Plan: req.Plan, EffectiveFrom: pricing.Date(req.From), RecordedAt: now, Note: req.Note}
	}
	if err := customer.AddCustomer(r.Context(), c.DB, cust, plan, c.Catalog); err != nil {
		c.fail(w, err)
		return
	}
	v, err := customer.ViewCustomer(r.Context(), c.DB, c.DefaultPlan, req.ID, c.today())
	if err != nil {
		c.fail(w, err)
		return
	}
	w.Header().Set("Location", "/v1/customers/"+url.PathEscape(req.ID))
	forwardJSON(w, http.StatusCreated, v)
}

// NewAssignment is the body of POST /v1/customers/{id}/plan.
type NewAssignment struct {
	Plan string `json:"plan"`
	From string `json:"from"` // YYYY-MM-DD, the first day on the plan
	Note string `json:"note"`
}

// assign answers POST /v1/customers/{id}/plan: appends a plan assignment
// (`hookledger plan assign`) and answers 201 with it. Like the CLI, it
// needs no registered customer: the ledger bills any customer id.
func (c *Customers) assign(w http.ResponseWriter, r *http.Request) {
	var req NewAssignment
	if !decode(w, r, &req, `{"plan": "pro", "from": "2026-07-01", "note": …}`) {
		return
	}
	if req.Plan == "" {
		forwardError(w, http.StatusBadRequest, "bad_request", "plan: required, a plan declared under plans (GET /v1/plans)")
		return
	}
	if err := pricing.Date(req.From).Check(); err != nil {
		forwardError(w, http.StatusBadRequest, "bad_date", "from: "+err.Error()+", the first day on the plan")
		return
	}
	a, err := customer.AssignPlan(r.Context(), c.DB, customer.PlanAssignment{Customer: r.PathValue("id"), Plan: req.Plan,
		EffectiveFrom: pricing.Date(req.From), RecordedAt: c.Now().UTC(), Note: req.Note}, c.Catalog)
	if err != nil {
		c.fail(w, err)
		return
	}
	forwardJSON(w, http.StatusCreated, a)
}

// preview answers GET /v1/customers/{id}/invoice/preview?period=YYYY-MM&tz=ZONE:
// the invoice as it would be if the period (default: the current month)
// closed now, from the same close as `hookledger invoice preview` (a close
// that rolls back). For a period already closed it is the closed invoice,
// with existing true.
func (c *Customers) preview(w http.ResponseWriter, r *http.Request) {
	id, ok := customerID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	loc := c.Zone
	if loc == nil {
		loc = time.UTC
	}
	if tz := q.Get("tz"); tz != "" {
		var err error
		if loc, err = ledger.LoadZone(tz); err != nil {
			forwardError(w, http.StatusBadRequest, "bad_tz", "tz: "+err.Error())
			return
		}
	}
	label := q.Get("period")
	if label == "" {
		label = c.Now().In(loc).Format("2006-01")
	}
	period, err := ledger.MonthPeriod(label, loc)
	if err != nil {
		forwardError(w, http.StatusBadRequest, "bad_period", err.Error())
		return
	}
	res, err := c.previewOf(r.Context(), id, period)
	if err != nil {
		c.fail(w, err)
		return
	}
	forwardJSON(w, http.StatusOK, res)
}

// previewOf is the invoice id's close of period would produce, priced, read
// from one snapshot (invoice.Preview: what invoice preview prints).
func (c *Customers) previewOf(ctx context.Context, id string, period ledger.Period) (*invoice.CloseResult, error) {
	pr, _, err := invoice.LoadPricing(ctx, c.DB, c.Catalog, c.DefaultPlan)
	if err != nil {
		return nil, err
	}
	return invoice.Preview(ctx, c.DB, invoice.CloseRequest{Period: period, Customer: id, Meters: c.Meters,
		Now: c.Now, Pricing: pr})
}

// decode reads a JSON body into v, refusing unknown fields, trailing data,
// bytes that are not UTF-8 and bodies over maxRequestBody; on failure it has
// answered.
func decode(w http.ResponseWriter, r *http.Request, v any, shape string) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		forwardError(w, http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body is over %d bytes", maxRequestBody))
		return false
	case err != nil:
		forwardError(w, http.StatusBadRequest, "bad_request", "read the body: "+err.Error())
		return false
	case !utf8.Valid(body):
		// encoding/json would turn each such byte into U+FFFD unseen, and
		// store that in place of what was sent: refuse it, as the CLI
		// refuses such an argument (ledger.CheckText).
		forwardError(w, http.StatusBadRequest, "bad_request", notUTF8(body)+": is not valid UTF-8")
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	switch {
	case err != nil:
		forwardError(w, http.StatusBadRequest, "bad_request", "want JSON "+shape+": "+err.Error())
		return false
	}
	return true
}

// notUTF8 names the field of a JSON object body whose bytes are not all
// UTF-8 (the body as a whole when it is no object or the name is at fault).
func notUTF8(body []byte) string {
	name := "the body"
	gjson.ParseBytes(body).ForEach(func(k, v gjson.Result) bool {
		switch {
		case !utf8.ValidString(k.Raw):
			name = "a field name"
		case !utf8.ValidString(v.Raw) && k.Str != "":
			name = k.Str
		default:
			return true
		}
		return false
	})
	return name
}

// fail maps the registry's and the close's errors onto HTTP.
func (c *Customers) fail(w http.ResponseWriter, err error) {
	var input *customer.InputError
	switch {
	case errors.Is(err, customer.ErrCustomerExists):
		forwardError(w, http.StatusConflict, "customer_exists", err.Error())
	case errors.Is(err, customer.ErrUnknownPlan):
		forwardError(w, http.StatusBadRequest, "unknown_plan", err.Error())
	case errors.As(err, &input):
		forwardError(w, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, invoice.ErrPeriodOverlap):
		forwardError(w, http.StatusConflict, "period_overlap", err.Error())
	default:
		forwardError(w, http.StatusInternalServerError, "failed", err.Error())
	}
}
