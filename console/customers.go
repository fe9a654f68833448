package console

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

// registry reads the customer registry through the ledger's own functions
// (what `hookledger customers` and `plan` print). Those take a store that
// can also write; the console never does, so its one write path refuses.
type registry struct{ Store }

var errReadOnly = errors.New("the console reads only")

func (registry) RegistryTx(context.Context, func(*schema.RegistryTx) error) error { return errReadOnly }

// customerRow is one customer in the list: as the registry knows it (zero
// when only a plan assignment names it) and the plan it is on today.
type customerRow struct {
	ID         string
	Registered bool
	customer.Customer
	Plan    string
	PlanVia string // "assigned from DATE", "default plan", or "" with no plan
}

// externalIDs shows a customer's ids in other systems as "system=id, …".
func externalIDs(ids map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		parts = append(parts, k+"="+ids[k])
	}
	return strings.Join(parts, ", ")
}

// planToday is the plan customer is on today (in UTC), and why.
func planToday(plans *customer.Plans, customer string, now time.Time) (string, string) {
	name, a := plans.On(customer, pricing.Date(now.UTC().Format(time.DateOnly)))
	switch {
	case a != nil:
		return name, "assigned from " + string(a.EffectiveFrom)
	case name != "":
		return name, "default plan"
	}
	return "", ""
}

// customers lists the registered customers and those only a plan
// assignment names, with each one's plan today.
func (c *Console) customers(w http.ResponseWriter, r *http.Request, s *session) {
	reg := registry{c.DB}
	cs, err := customer.Customers(r.Context(), reg)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	as, err := customer.PlanAssignments(r.Context(), reg, "")
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	plans := customer.NewPlans(c.DefaultPlan, as)
	rows := map[string]*customerRow{}
	for _, cu := range cs {
		rows[cu.ID] = &customerRow{ID: cu.ID, Registered: true, Customer: cu}
	}
	for _, a := range as {
		if rows[a.Customer] == nil {
			rows[a.Customer] = &customerRow{ID: a.Customer}
		}
	}
	var out []customerRow
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		row := rows[id]
		row.Plan, row.PlanVia = planToday(plans, id, c.Now())
		out = append(out, *row)
	}
	c.render(w, r, s, http.StatusOK, "customers", "Customers", struct {
		Customers   []customerRow
		DefaultPlan string
	}{out, c.DefaultPlan})
}

// customer shows one customer's registry history, plan assignments and
// plan today.
func (c *Console) customer(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.URL.Query().Get("id")
	if id == "" {
		c.fail(w, r, s, http.StatusNotFound, "Give a customer id.")
		return
	}
	reg := registry{c.DB}
	hist, err := customer.CustomerHistory(r.Context(), reg, id)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	as, err := customer.PlanAssignments(r.Context(), reg, id)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	v := customerView{ID: id, History: hist, Assignments: as, Stripe: c.Stripe}
	v.Plan, v.PlanVia = planToday(customer.NewPlans(c.DefaultPlan, as), id, c.Now())
	period, status, err := c.customerPeriod(r, &v)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	if status != http.StatusOK {
		c.render(w, r, s, status, "customer", "Customer "+id, v)
		return
	}
	if err := c.money(r.Context(), &v, period); err != nil {
		c.internal(w, r, s, err)
		return
	}
	if err := c.limits(r.Context(), &v); err != nil {
		c.internal(w, r, s, err)
		return
	}
	if c.Stripe {
		v.StripePeriod = period.Label
		if v.Pushes, err = c.pushes(r.Context(), id, period); err != nil {
			c.internal(w, r, s, err)
			return
		}
	}
	c.render(w, r, s, http.StatusOK, "customer", "Customer "+id, v)
}

// customerPeriod is the month the customer page shows, in invoicing.tz:
// period= or, without it, the month views about closing open on
// (invoice.ClosingMonth). A bad period= is a 400 with the reason in v.
func (c *Console) customerPeriod(r *http.Request, v *customerView) (ledger.Period, int, error) {
	loc := c.zone()
	v.TZ = loc.String()
	var err error
	if v.Months, err = c.months(r, loc); err != nil {
		return ledger.Period{}, 0, err
	}
	var p ledger.Period
	if v.Period = r.URL.Query().Get("period"); v.Period == "" {
		var previous bool
		if p, previous, err = invoice.ClosingMonth(r.Context(), c.DB, c.Now(), loc); err != nil {
			return ledger.Period{}, 0, err
		}
		v.Period, v.Default = p.Label, defaultWhy(previous, v.Months[1].Closed)
	} else if p, err = ledger.MonthPeriod(v.Period, loc); err != nil {
		v.Error = "period: " + err.Error()
		return ledger.Period{}, http.StatusBadRequest, nil
	}
	v.Open = c.Now().Before(p.End)
	if !slices.ContainsFunc(v.Months, func(m monthChoice) bool { return m.Month == v.Period }) {
		v.Months = append(v.Months, monthChoice{Month: v.Period}) // an older month asked for: the picker offers it too
	}
	return p, http.StatusOK, nil
}

// zone is invoicing.tz, the zone the customer page's month is read in.
func (c *Console) zone() *time.Location {
	if c.Zone == nil {
		return time.UTC
	}
	return c.Zone
}

// customerInvoicesShown bounds the closed invoices the customer page lists
// (newest first; the invoices page has them all).
const customerInvoicesShown = 24

// money fills v with the customer's closed invoices and their totals, and
// the draft of period: what `hookledger invoice preview` prints for it
// (invoice.Preview, a read of one snapshot), or, once the period is closed,
// its closed invoice.
func (c *Console) money(ctx context.Context, v *customerView, period ledger.Period) error {
	invs, err := c.DB.ConsoleInvoices(ctx, schema.InvoicePage{Customer: v.ID, Limit: customerInvoicesShown + 1})
	if errors.Is(err, schema.ErrNoInvoices) {
		invs, err = nil, nil
	}
	if err != nil {
		return err
	}
	if len(invs) > customerInvoicesShown {
		invs, v.MoreInvoices = invs[:customerInvoicesShown], true
	}
	v.Invoices = invs
	if v.InvoiceTotals, err = sumByCurrency(invs); err != nil {
		return err
	}
	pr, _, err := invoice.LoadPricing(ctx, registry{c.DB}, c.Catalog, c.DefaultPlan)
	if err == nil {
		v.Draft, err = invoice.Preview(ctx, c.DB, invoice.CloseRequest{Period: period, Customer: v.ID, Meters: c.Meters, Now: c.Now, Pricing: pr})
	}
	if err != nil {
		// What invoice preview would refuse with (a frozen price changed,
		// a gap, one invoice in two currencies): shown, not a failed page.
		v.DraftError = err.Error()
	}
	return nil
}

type customerView struct {
	ID          string
	History     []customer.Customer
	Assignments []customer.PlanAssignment
	Plan        string
	PlanVia     string
	// Limits are the entitlement checks of every declared meter now (GET
	// /v1/entitlements); NotBuilt says the usage state is not built yet.
	Checked     bool
	NotBuilt    bool
	Limits      []entitle.Entitlement
	PeriodStart string
	PeriodEnd   string
	Crossings   []crossingView
	// Spend is what GET /v1/spend answers now (nil: the customer's plan
	// version keeps no spend), and SpendCrossings the spend thresholds
	// that fired.
	Spend          *entitle.SpendAnswer
	SpendCrossings []spendCrossingView
	// Stripe: the month's pushes per meter, as `stripe status` shows them.
	Stripe       bool
	StripePeriod string
	Pushes       []stripe.StatusLine
	// The month the page shows (period=, else invoice.ClosingMonth's, and
	// Default says why), the picker's months, and a bad period='s reason.
	Period, Default, Error string
	TZ                     string
	Open                   bool // Period has not ended yet
	Months                 []monthChoice
	// Money: the customer's closed invoices, newest first (MoreInvoices:
	// older ones are on the invoices page), their totals per currency, and
	// the draft of Period as `invoice preview` computes it (DraftError: why
	// there is none).
	Invoices      []schema.InvoiceSummary
	MoreInvoices  bool
	InvoiceTotals []currencySum
	Draft         *invoice.CloseResult
	DraftError    string
}

// crossingView is a threshold that fired with the event of the ledger row
// that crossed it.
type crossingView struct {
	entitle.CrossingView
	Provider, Event string // "" when the row is not found
}

// spendCrossingView is a spend threshold that fired with the event of the
// ledger row that crossed it.
type spendCrossingView struct {
	entitle.SpendCrossingView
	Provider, Event string // "" when the row is not found
}

// crossingsShown bounds the crossings the customer page lists (newest first).
const crossingsShown = 50

// limits fills v with the customer's entitlements now, from the same
// Checker as GET /v1/entitlements, and the thresholds that fired, as
// `hookledger alerts list` lists them.
func (c *Console) limits(ctx context.Context, v *customerView) error {
	if c.Entitlements == nil {
		return nil
	}
	v.Checked = true
	reply, err := c.Entitlements.Reply(ctx, v.ID, slices.Sorted(maps.Keys(c.Meters)), true)
	switch {
	case errors.Is(err, entitle.ErrNotBuilt):
		v.NotBuilt = true
		return nil
	case err != nil:
		return err
	}
	v.Limits = reply.Entitlements
	if es := reply.Entitlements; len(es) > 0 {
		v.PeriodStart, v.PeriodEnd = es[0].PeriodStart, es[0].PeriodEnd
	}
	cs, err := entitle.Crossings(ctx, c.DB, v.ID, crossingsShown)
	if err != nil {
		return err
	}
	for _, cr := range cs {
		cv := crossingView{CrossingView: cr}
		if cv.Provider, cv.Event, err = c.rowEvent(ctx, cr.RowID); err != nil {
			return err
		}
		v.Crossings = append(v.Crossings, cv)
	}
	return c.spend(ctx, v, reply.Spend)
}

// spend fills v with the customer's spend now, sp from the same check as
// the limits (GET /v1/spend's answer: the usage state priced with
// pricing.Plan.Spent; the console reads, it writes nothing), and the spend
// thresholds that fired.
func (c *Console) spend(ctx context.Context, v *customerView, sp *entitle.SpendAnswer) error {
	if sp != nil && sp.Spent != nil {
		v.Spend = sp
	}
	cs, err := entitle.SpendCrossings(ctx, c.DB, v.ID, crossingsShown)
	if err != nil {
		return err
	}
	for _, cr := range cs {
		cv := spendCrossingView{SpendCrossingView: cr}
		if cv.Provider, cv.Event, err = c.rowEvent(ctx, cr.RowID); err != nil {
			return err
		}
		v.SpendCrossings = append(v.SpendCrossings, cv)
	}
	return nil
}

// rowEvent is the provider and event of the ledger row that crossed a
// threshold, "" when the row is gone.
func (c *Console) rowEvent(ctx context.Context, rowID int64) (provider, event string, err error) {
	row, err := c.DB.GetLedgerRow(ctx, rowID)
	switch {
	case err == nil:
		return row.Provider, row.EventID, nil
	case errors.Is(err, schema.ErrNotFound):
		return "", "", nil
	}
	return "", "", err
}

// pushes is the customer's `hookledger stripe status` of period (in
// invoicing.tz): stripe.Status without --remote.
func (c *Console) pushes(ctx context.Context, customer string, period ledger.Period) ([]stripe.StatusLine, error) {
	var meters []ledger.Meter
	for _, name := range slices.Sorted(maps.Keys(c.Meters)) {
		meters = append(meters, c.Meters[name])
	}
	return stripe.Status(ctx, c.DB, meters, period, customer, nil)
}
