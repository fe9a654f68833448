package admin

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ledger"
)

// Entitlements answers entitlement checks (*entitle.Checker).
type Entitlements interface {
	Reply(ctx context.Context, customer string, meters []string, spend bool) (entitle.Reply, error)
}

// MeterUsage is one meter of GET /v1/customers/{id}/usage: the current
// month's quantity (the meter's aggregation, as an invoice counts it), its
// limit and what remains (null without one), and its amount when the
// customer's plan prices it (as invoice preview computes it).
type MeterUsage struct {
	Meter     string        `json:"meter"`
	Quantity  ledger.Total  `json:"quantity"`
	Limit     *ledger.Total `json:"limit"`
	Kind      string        `json:"kind,omitempty"`
	Remaining *ledger.Total `json:"remaining"`
	Allowed   bool          `json:"allowed"`
	Amount    string        `json:"amount,omitempty"`
}

// CustomerUsage is the answer of GET /v1/customers/{id}/usage.
type CustomerUsage struct {
	Customer    string       `json:"customer"`
	Period      string       `json:"period"`
	PeriodStart string       `json:"period_start"`
	PeriodEnd   string       `json:"period_end"`
	Currency    string       `json:"currency,omitempty"`
	Meters      []MeterUsage `json:"meters"`
	// Spend is the spend check's answer (spent, limit, remaining, allowed),
	// when the customer's plan version keeps spend (a spend section).
	Spend *entitle.SpendAnswer `json:"spend,omitempty"`
}

// usage answers GET /v1/customers/{id}/usage: the customer's numbers for
// its own dashboard, this month (invoicing.tz): per meter with usage or a
// limit, the quantity and amount an invoice preview computes, and the
// limit, remaining and allowed an entitlement check answers.
func (c *Customers) usage(w http.ResponseWriter, r *http.Request) {
	id, ok := customerID(w, r)
	if !ok {
		return
	}
	loc := c.Zone
	if loc == nil {
		loc = time.UTC
	}
	period, err := ledger.MonthPeriod(c.Now().In(loc).Format("2006-01"), loc)
	if err != nil {
		c.fail(w, err)
		return
	}
	res, err := c.previewOf(r.Context(), id, period)
	if err != nil {
		c.fail(w, err)
		return
	}
	out := CustomerUsage{Customer: id, Period: period.Label, PeriodStart: period.Start.Format(time.RFC3339),
		PeriodEnd: period.End.Format(time.RFC3339), Meters: []MeterUsage{}}
	byMeter := map[string]int{} // index in out.Meters
	for _, inv := range res.Invoices {
		out.Currency = inv.Money.Currency
		for _, l := range inv.Lines {
			if l.Late {
				continue // usage of an earlier month, not this one's
			}
			out.Meters = append(out.Meters, MeterUsage{Meter: l.Meter, Quantity: l.Quantity, Allowed: true, Amount: l.Money.Amount})
		}
	}
	var names []string
	for i := range out.Meters {
		byMeter[out.Meters[i].Meter] = i
		names = append(names, out.Meters[i].Meter)
	}
	if c.Entitlements != nil {
		for _, m := range c.limitedMeters() {
			if _, ok := byMeter[m]; !ok {
				names = append(names, m)
			}
		}
		reply, err := c.Entitlements.Reply(r.Context(), id, names, true)
		if err != nil && !errors.Is(err, entitle.ErrNotBuilt) {
			c.fail(w, err)
			return
		}
		for _, e := range reply.Entitlements {
			if e.Limit == nil {
				continue
			}
			i, ok := byMeter[e.Meter]
			if !ok {
				out.Meters = append(out.Meters, MeterUsage{Meter: e.Meter, Quantity: e.Used})
				i = len(out.Meters) - 1
				byMeter[e.Meter] = i
			}
			mu := &out.Meters[i]
			mu.Limit, mu.Kind, mu.Remaining, mu.Allowed = e.Limit, e.Kind, e.Remaining, e.Allowed
		}
		if sp := reply.Spend; sp != nil && sp.Spent != nil {
			out.Spend = sp
		}
	}
	slices.SortFunc(out.Meters, func(a, b MeterUsage) int {
		switch {
		case a.Meter < b.Meter:
			return -1
		case a.Meter > b.Meter:
			return 1
		}
		return 0
	})
	forwardJSON(w, http.StatusOK, out)
}

// limitedMeters are the meters some plan version limits.
func (c *Customers) limitedMeters() []string {
	var ms []string
	if c.Catalog == nil {
		return nil
	}
	for _, name := range c.Catalog.Names() {
		for _, v := range c.Catalog.Versions(name) {
			for _, l := range v.Limits {
				if !slices.Contains(ms, l.Meter) {
					ms = append(ms, l.Meter)
				}
			}
		}
	}
	return ms
}
