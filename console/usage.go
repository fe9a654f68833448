package console

import (
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

type usageView struct {
	// The form: a month (Period) or a custom window (From, To: either
	// given overrides the month), the zone and one customer.
	Period, From, To, TZ, Customer, After string
	// Dim is the declared dimension the lines are grouped by ("": none),
	// Value the one value of it they are kept to ("": every value). Dims
	// are the declared dimensions.
	Dim, Value string
	Dims       []string
	// Default says why the page chose Period ("": it was asked for): the
	// previous month while it holds usage and is not closed for all
	// customers, then the current one (invoice.ClosingMonth).
	Default string
	// WindowFrom and WindowTo are what the totals are computed for, as
	// `hookledger usage --from --to` takes them.
	WindowFrom, WindowTo string
	Months               []monthChoice      // the period picker
	Lines                []ledger.UsageLine // customer × meter totals
	Next                 string             // the customer after which the next page starts ("": last page)
	Days                 []meterDays        // one customer: per meter, per day
	Error                string
	// Late is the month's late usage per customer and meter: rows of the
	// closed month recorded after its close and not billed yet (what
	// `hookledger usage late` lists), counted in the totals above but on
	// no invoice of the month; the next invoice bills them. Only for a
	// month (not a custom window) without a dimension picked.
	Late map[string]invoice.LateLine
}

// LateOf is customer's late usage of meter in the month shown (nil: none).
func (v usageView) LateOf(customer, meter string) *invoice.LateLine {
	if l, ok := v.Late[customer+"\x00"+meter]; ok {
		return &l
	}
	return nil
}

// late fills v.Late from invoice.LateUsage (what `hookledger usage late`
// runs) for the month shown, of one customer or of every one.
func (c *Console) late(r *http.Request, v *usageView) error {
	if v.Period == "" || v.Dim != "" || len(v.Lines) == 0 {
		return nil
	}
	// Only a closed month has late usage: the current month's page (the
	// default once the last one is closed) reads no more than it did.
	loc, err := ledger.LoadZone(v.TZ)
	if err != nil {
		return err
	}
	p, err := ledger.MonthPeriod(v.Period, loc)
	if err != nil {
		return err
	}
	closes, err := c.DB.PeriodCloses(r.Context(), v.Customer)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(closes, func(cl schema.PeriodClose) bool {
		return cl.PeriodStart == p.Start.UnixMilli() && cl.PeriodEnd == p.End.UnixMilli()
	}) {
		return nil
	}
	late, err := invoice.LateUsage(r.Context(), c.DB, v.Customer, c.Meters)
	if err != nil {
		return err
	}
	for _, l := range late {
		if l.Period != v.Period || l.TZ != v.TZ {
			continue
		}
		if v.Late == nil {
			v.Late = map[string]invoice.LateLine{}
		}
		v.Late[l.Customer+"\x00"+l.Meter] = l
	}
	return nil
}

// monthChoice is one month of the period picker.
type monthChoice struct {
	Month  string
	Closed bool
}

// pickerMonths is how many months the period picker offers: the current one
// and the twelve before it (older ones are a custom window away).
const pickerMonths = 13

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
// customer's per-day totals per meter. Its downloads (usage.csv,
// usage.json) are this same view written out, so they hold exactly the
// page's rows.
func (c *Console) usage(w http.ResponseWriter, r *http.Request, s *session) {
	v, status, err := c.usageView(r)
	switch {
	case err != nil:
		c.internal(w, r, s, err)
	case r.PathValue("format") != "":
		if status != http.StatusOK {
			http.Error(w, v.Error, status)
			return
		}
		writeUsage(w, r.PathValue("format"), v)
	default:
		title := "Usage"
		if v.Customer != "" && v.Error == "" {
			title += " of " + v.Customer
		}
		c.render(w, r, s, status, "usage", title, v)
	}
}

// usageView computes the usage page: a bad parameter is a 400 with the
// reason in Error, a storage failure an error.
func (c *Console) usageView(r *http.Request) (usageView, int, error) {
	q := r.URL.Query()
	v := usageView{Period: q.Get("period"), From: q.Get("from"), To: q.Get("to"), TZ: q.Get("tz"), Customer: q.Get("customer"), After: q.Get("after"),
		Dim: q.Get("dim"), Value: q.Get("value"), Dims: c.dimensions()}
	if v.TZ == "" {
		v.TZ = "UTC"
	}
	bad := func(err error) (usageView, int, error) {
		v.Error = err.Error()
		return v, http.StatusBadRequest, nil
	}
	loc, err := ledger.LoadZone(v.TZ)
	if err != nil {
		return bad(err)
	}
	if v.Months, err = c.months(r, loc); err != nil {
		return v, 0, err
	}
	switch {
	case v.From != "" || v.To != "":
		v.Period, v.WindowFrom, v.WindowTo = "", v.From, v.To
	default:
		if v.Period == "" {
			// Closing is about the month that just ended: the rule every
			// view about closing opens on (invoice.ClosingMonth).
			p, previous, err := invoice.ClosingMonth(r.Context(), c.DB, c.Now(), loc)
			if err != nil {
				return v, 0, err
			}
			v.Period, v.Default = p.Label, defaultWhy(previous, v.Months[1].Closed)
		}
		p, err := ledger.MonthPeriod(v.Period, loc)
		if err != nil {
			return bad(err)
		}
		v.WindowFrom, v.WindowTo = p.Label, p.End.Format("2006-01")
	}
	window, err := (ledger.UsageParams{From: v.WindowFrom, To: v.WindowTo, TZ: v.TZ}).Query(c.Meters)
	if err != nil {
		return bad(err) // checked before any customer is listed, so an empty ledger refuses it too
	}
	usageErr := func(err error) (usageView, int, error) {
		var bp badParam
		if errors.As(err, &bp) || errors.Is(err, ledger.ErrMixedMeters) {
			return bad(err)
		}
		return v, 0, err
	}
	switch {
	case v.Dim != "" && !slices.Contains(v.Dims, v.Dim):
		return bad(fmt.Errorf("dim: %q is not a dimension of any meter (%s)", v.Dim, strings.Join(v.Dims, ", ")))
	case v.Value != "" && v.Dim == "":
		return bad(errors.New("value: pick the dimension it is a value of"))
	}
	if v.Customer != "" {
		totals, err := c.query(r, v, v.Customer, lineGroups(v))
		if err != nil {
			return usageErr(err)
		}
		v.Lines = totals.Lines
		if err := c.late(r, &v); err != nil {
			return v, 0, err
		}
		// The per-day charts keep to the value picked, one bar per day.
		days, err := c.query(r, v, v.Customer, "customer,meter,day")
		if err != nil {
			return usageErr(err)
		}
		v.Days = dayCharts(days.Lines, window)
		return v, http.StatusOK, nil
	}
	customers, err := c.DB.LedgerCustomers(r.Context(), v.After, customersPage+1)
	if err != nil {
		return v, 0, err
	}
	if len(customers) > customersPage {
		customers = customers[:customersPage]
		v.Next = customers[customersPage-1]
	}
	for _, cu := range customers {
		rep, err := c.query(r, v, cu, lineGroups(v))
		if err != nil {
			return usageErr(err)
		}
		v.Lines = append(v.Lines, rep.Lines...)
	}
	if err := c.late(r, &v); err != nil {
		return v, 0, err
	}
	return v, http.StatusOK, nil
}

// defaultWhy says why a page opened on the month invoice.ClosingMonth chose.
func defaultWhy(previous, lastClosed bool) string {
	switch {
	case previous:
		return "the last month, until it is closed"
	case lastClosed:
		return "the current month, since the last one is closed"
	}
	return "the current month: the last one holds no usage"
}

// months are the period picker's months in loc, the current one first, each
// marked closed when a close for all customers covers exactly that month.
func (c *Console) months(r *http.Request, loc *time.Location) ([]monthChoice, error) {
	closes, err := c.DB.ClosesForAll(r.Context())
	if err != nil {
		return nil, err
	}
	closed := map[[2]int64]bool{}
	for _, cl := range closes {
		closed[[2]int64{cl.PeriodStart, cl.PeriodEnd}] = true
	}
	now := c.Now().In(loc)
	first := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc)
	out := make([]monthChoice, pickerMonths)
	for i := range out {
		start := first.AddDate(0, -i, 0)
		out[i] = monthChoice{Month: start.Format("2006-01"), Closed: closed[[2]int64{start.UnixMilli(), start.AddDate(0, 1, 0).UnixMilli()}]}
	}
	return out, nil
}

// lineGroups is the grouping of the page's lines: customer and meter, and
// the dimension picked.
func lineGroups(v usageView) string {
	if v.Dim == "" {
		return "customer,meter"
	}
	return "customer,meter," + v.Dim
}

// dimensions are the dimensions the meters declare, sorted: the picker's.
func (c *Console) dimensions() []string {
	var out []string
	for _, m := range c.Meters {
		for _, d := range m.Dimensions {
			if !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// query runs `hookledger usage --from --to --tz --customer --group-by`
// with, when a value is picked, --where DIM=VALUE. The condition is built
// as the value is, not parsed from text, so a value holding a comma or a
// parenthesis is compared as it is.
func (c *Console) query(r *http.Request, v usageView, customer, groupBy string) (*ledger.UsageReport, error) {
	p := ledger.UsageParams{From: v.WindowFrom, To: v.WindowTo, TZ: v.TZ, Customer: customer, GroupBy: groupBy}
	q, err := p.Query(c.Meters)
	if err != nil {
		return nil, badParam{err}
	}
	if v.Value != "" {
		q.Where = []ledger.Condition{{Name: v.Dim, Op: ledger.OpEq, Values: []string{v.Value}}}
	}
	return ledger.Query(r.Context(), c.DB, q)
}

type badParam struct{ error }

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
