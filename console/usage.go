package console

import (
	"errors"
	"math/big"
	"net/http"
	"time"

	"github.com/hookledger/hookledger/ledger"
)

type usageView struct {
	From, To, TZ, Customer, After string
	Lines                         []ledger.UsageLine // customer × meter totals
	Next                          string             // the customer after which the next page starts ("": last page)
	Days                          []meterDays        // one customer: per meter, per day
	Error                         string
}

type meterDays struct {
	Meter, Unit string
	Aggregation ledger.Aggregation
	Chart       *chart
	Lines       []ledger.UsageLine
}

// usage shows totals per customer and meter for an event-time window in a
// zone, computed by ledger.Query: the numbers `hookledger usage` prints
// for the same window (one customer at a time, a page of customers per
// page, so a page reads only its customers' rows through the
// (customer_id, meter, occurred_at) index). With a customer, it adds that
// customer's per-day totals per meter.
func (c *Console) usage(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	v := usageView{From: q.Get("from"), To: q.Get("to"), TZ: q.Get("tz"), Customer: q.Get("customer"), After: q.Get("after")}
	if v.TZ == "" {
		v.TZ = "UTC"
	}
	if v.From == "" && v.To == "" {
		if loc, err := ledger.LoadZone(v.TZ); err == nil {
			now := c.Now().In(loc)
			v.From, v.To = now.Format("2006-01"), now.AddDate(0, 0, 1-now.Day()).AddDate(0, 1, 0).Format("2006-01")
		}
	}
	bad := func(err error) {
		v.Error = err.Error()
		c.render(w, r, s, http.StatusBadRequest, "usage", "Usage", v)
	}
	window, err := (ledger.UsageParams{From: v.From, To: v.To, TZ: v.TZ}).Query(c.Meters)
	if err != nil {
		bad(err) // checked before any customer is listed, so an empty ledger refuses it too
		return
	}
	if v.Customer != "" {
		totals, err := c.query(r, v, v.Customer, "customer,meter")
		if err != nil {
			c.usageErr(w, r, s, v, err, bad)
			return
		}
		v.Lines = totals.Lines
		days, err := c.query(r, v, v.Customer, "customer,meter,day")
		if err != nil {
			c.usageErr(w, r, s, v, err, bad)
			return
		}
		v.Days = dayCharts(days.Lines, window)
		c.render(w, r, s, http.StatusOK, "usage", "Usage of "+v.Customer, v)
		return
	}
	customers, err := c.DB.LedgerCustomers(r.Context(), v.After, customersPage+1)
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	if len(customers) > customersPage {
		customers = customers[:customersPage]
		v.Next = customers[customersPage-1]
	}
	for _, cu := range customers {
		rep, err := c.query(r, v, cu, "customer,meter")
		if err != nil {
			c.usageErr(w, r, s, v, err, bad)
			return
		}
		v.Lines = append(v.Lines, rep.Lines...)
	}
	c.render(w, r, s, http.StatusOK, "usage", "Usage", v)
}

func (c *Console) query(r *http.Request, v usageView, customer, groupBy string) (*ledger.UsageReport, error) {
	p := ledger.UsageParams{From: v.From, To: v.To, TZ: v.TZ, Customer: customer, GroupBy: groupBy}
	q, err := p.Query(c.Meters)
	if err != nil {
		return nil, badParam{err}
	}
	return ledger.Query(r.Context(), c.DB, q)
}

type badParam struct{ error }

func (c *Console) usageErr(w http.ResponseWriter, r *http.Request, s *session, v usageView, err error, bad func(error)) {
	var bp badParam
	switch {
	case errors.As(err, &bp), errors.Is(err, ledger.ErrMixedMeters):
		bad(err)
	default:
		c.internal(w, r, s, err)
	}
}

// maxChartDays is the longest window whose every day gets a bar (days
// without usage at zero); a longer or open window shows the days with usage.
const maxChartDays = 400

// dayCharts splits per-day lines by meter and draws each meter's days.
func dayCharts(lines []ledger.UsageLine, window ledger.UsageQuery) []meterDays {
	var days []string // every day of the window, as the lines label them
	if !window.From.IsZero() && !window.To.IsZero() {
		loc := window.Zone
		if loc == nil {
			loc = time.UTC
		}
		from := window.From.In(loc)
		for d := time.Date(from.Year(), from.Month(), from.Day(), 0, 0, 0, 0, loc); d.Before(window.To) && len(days) <= maxChartDays; d = d.AddDate(0, 0, 1) {
			days = append(days, d.Format(time.DateOnly))
		}
		if len(days) > maxChartDays {
			days = nil
		}
	}
	var out []meterDays
	idx := map[string]int{}
	for _, l := range lines {
		i, ok := idx[l.Meter]
		if !ok {
			i = len(out)
			idx[l.Meter] = i
			out = append(out, meterDays{Meter: l.Meter, Unit: l.Unit, Aggregation: l.Aggregation})
		}
		out[i].Lines = append(out[i].Lines, l)
	}
	for i := range out {
		ls := out[i].Lines
		if days != nil {
			byDay := map[string]ledger.UsageLine{}
			for _, l := range ls {
				byDay[l.Period] = l
			}
			ls = make([]ledger.UsageLine, len(days))
			for j, d := range days {
				l, ok := byDay[d]
				if !ok {
					l = ledger.UsageLine{Period: d, Unit: out[i].Unit}
				}
				ls[j] = l
			}
		}
		labels, titles := make([]string, len(ls)), make([]string, len(ls))
		qs := make([]ledger.Total, len(ls))
		for j, l := range ls {
			labels[j] = l.Period
			if t, err := time.Parse(time.DateOnly, l.Period); err == nil {
				labels[j] = t.Format("Jan 2")
			}
			qs[j] = l.Quantity
			titles[j] = l.Period + ": " + l.Quantity.String() + " " + l.Unit
		}
		values, yText := chartValues(qs)
		out[i].Chart = barChart(labels, values, titles, yText)
	}
	return out
}

// chartValues turns quantities into the int64s bar heights are drawn from:
// micro-units while the largest is below 10^15, else micro-units divided by
// the power of ten that brings it there (a month of bytes passes 10^22
// micro-units). The y axis multiplies back, so its labels stay exact; only
// the bars' heights round.
func chartValues(qs []ledger.Total) ([]int64, func(int64) string) {
	limit := big.NewInt(1_000_000_000_000_000)
	div := big.NewInt(1)
	for _, q := range qs {
		for new(big.Int).Quo(new(big.Int).Abs(q.Micro()), div).Cmp(limit) > 0 {
			div.Mul(div, big.NewInt(10))
		}
	}
	values := make([]int64, len(qs))
	for i, q := range qs {
		values[i] = new(big.Int).Quo(q.Micro(), div).Int64()
	}
	return values, func(v int64) string {
		return ledger.TotalOfMicro(new(big.Int).Mul(big.NewInt(v), div)).String()
	}
}
