package console

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
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
	v := struct {
		ID          string
		History     []ledger.Customer
		Assignments []ledger.PlanAssignment
		Plan        string
		PlanVia     string
	}{ID: id, History: hist, Assignments: as}
	v.Plan, v.PlanVia = planToday(ledger.NewPlans(c.DefaultPlan, as), id, c.Now())
	c.render(w, r, s, http.StatusOK, "customer", "Customer "+id, v)
}
