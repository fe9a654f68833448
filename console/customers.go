package console

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/entitle"
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
	ledger.Customer
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
func planToday(plans *ledger.Plans, customer string, now time.Time) (string, string) {
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
	cs, err := ledger.Customers(r.Context(), reg)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	as, err := ledger.PlanAssignments(r.Context(), reg, "")
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	plans := ledger.NewPlans(c.DefaultPlan, as)
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
	hist, err := ledger.CustomerHistory(r.Context(), reg, id)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	as, err := ledger.PlanAssignments(r.Context(), reg, id)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	v := customerView{ID: id, History: hist, Assignments: as, Stripe: c.Stripe}
	v.Plan, v.PlanVia = planToday(ledger.NewPlans(c.DefaultPlan, as), id, c.Now())
	if err := c.limits(r.Context(), &v); err != nil {
		c.internal(w, r, s, err)
		return
	}
	if c.Stripe {
		if v.StripePeriod, v.Pushes, err = c.pushes(r.Context(), id); err != nil {
			c.internal(w, r, s, err)
			return
		}
	}
	c.render(w, r, s, http.StatusOK, "customer", "Customer "+id, v)
}

type customerView struct {
	ID          string
	History     []ledger.Customer
	Assignments []ledger.PlanAssignment
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

// pushes is the customer's `hookledger stripe status` of this month (in
// invoicing.tz): stripe.Status without --remote.
func (c *Console) pushes(ctx context.Context, customer string) (string, []stripe.StatusLine, error) {
	loc := c.Zone
	if loc == nil {
		loc = time.UTC
	}
	period, err := ledger.MonthPeriod(c.Now().In(loc).Format("2006-01"), loc)
	if err != nil {
		return "", nil, err
	}
	var meters []ledger.Meter
	for _, name := range slices.Sorted(maps.Keys(c.Meters)) {
		meters = append(meters, c.Meters[name])
	}
	lines, err := stripe.Status(ctx, c.DB, meters, period, customer, nil)
	return period.Label, lines, err
}
