package stripe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// ExternalID is the registry's external id system of a Stripe customer
// (customers link C --stripe cus_… records {"stripe": "cus_…"}).
const ExternalID = "stripe"

// StatusStore is what Status reads (*schema.DB).
type StatusStore interface {
	ledger.UsageSource
	StripePushes(ctx context.Context, f schema.StripePushFilter) ([]schema.StripePush, error)
	StripeCarriedInto(ctx context.Context, from, to int64, customer string) ([]schema.StripePush, error)
	AllExternalIDs(ctx context.Context) (map[string]string, error)
	StripeReportsOf(ctx context.Context, from, to int64) ([]schema.StripeReport, error)
	StateZone(ctx context.Context) (schema.StateZone, bool, error)
	MonthUsageStates(ctx context.Context, customer string, start int64) ([]schema.UsageState, error)
}

// States of a status line.
const (
	StateAgrees  = "agrees"  // Stripe acknowledged exactly the ledger's total
	StateDiffers = "differs" // something is pending, dead, or missing
	StateOpen    = "open"    // close mode: the period has no pushed line yet
)

// StatusLine compares, for one customer, meter and period, the ledger's
// total (in Stripe's whole units: × multiplier, rounded once), what was
// pushed (sent to Stripe, whatever it answered), what Stripe acknowledged,
// what is pending and what is dead, and with Remote what Stripe's event
// summaries say. Carried is what of the period reached Stripe stamped in a
// later period, because its own time was outside Stripe's window (a credit
// to a closed month); CarriedIn what of earlier periods reached Stripe
// stamped in this one. Stripe's own sum for the period is Ledger − Carried
// + CarriedIn.
type StatusLine struct {
	Customer       string `json:"customer"`
	StripeCustomer string `json:"stripe_customer,omitempty"`
	Meter          string `json:"meter"`
	EventName      string `json:"event_name"`
	Mode           string `json:"mode"`
	Period         string `json:"period"`
	Quantity       string `json:"ledger_quantity"`
	Ledger         string `json:"ledger"`
	Pushed         string `json:"pushed"`
	Acknowledged   string `json:"acknowledged"`
	Pending        int    `json:"pending"`
	Dead           int    `json:"dead"`
	DeadValue      string `json:"dead_value"`
	Carried        string `json:"carried"`
	CarriedIn      string `json:"carried_in"`
	// Reported counts the pushes Stripe reported errors for after it took
	// them (v1.billing.meter.error_report_triggered, …); ReportError is the
	// latest report's code and message.
	Reported    int    `json:"reported"`
	ReportError string `json:"report_error,omitempty"`
	Remote      string `json:"stripe,omitempty"` // with Remote: Stripe's event summaries
	State       string `json:"state"`
	LastError   string `json:"last_error,omitempty"`
}

// Status compares the ledger with the pushes of meters in period (one
// customer, or all for ""). remote, when set, also reads Stripe's event
// summaries for each line.
func Status(ctx context.Context, db StatusStore, meters []ledger.Meter, period ledger.Period, customer string, remote *Client) ([]StatusLine, error) {
	t := &tally{period: period, meters: map[string]ledger.Meter{}, lines: map[lineKey]*StatusLine{}}
	for _, m := range meters {
		if m.Stripe != nil {
			t.meters[m.Name] = m
		}
	}
	totals, err := ledgerTotals(ctx, db, t.meters, period, customer)
	if err != nil {
		return nil, err
	}
	if err := t.ledger(totals); err != nil {
		return nil, err
	}
	pushes, err := db.StripePushes(ctx, schema.StripePushFilter{From: period.Start.UnixMilli(), To: period.End.UnixMilli(), Customer: customer})
	if err != nil {
		return nil, err
	}
	if err := t.pushes(pushes); err != nil {
		return nil, err
	}
	in, err := db.StripeCarriedInto(ctx, period.Start.Unix(), period.End.Unix(), customer)
	if err != nil {
		return nil, err
	}
	if err := t.carriedIn(in); err != nil {
		return nil, err
	}
	reports, err := db.StripeReportsOf(ctx, period.Start.UnixMilli(), period.End.UnixMilli())
	if err != nil {
		return nil, err
	}
	t.reports(pushes, reports)
	lines := t.lines
	out := make([]StatusLine, 0, len(lines))
	var linked map[string]string // the registry's external ids, read once
	for _, l := range lines {
		if l.StripeCustomer == "" {
			if linked == nil {
				if linked, err = db.AllExternalIDs(ctx); err != nil {
					return nil, err
				}
			}
			if l.StripeCustomer, err = linkedCustomer(linked, l.Customer); err != nil {
				return nil, err
			}
		}
		switch {
		case l.Mode == ledger.StripeClose && l.Pushed == "0" && l.Pending == 0 && l.Dead == 0:
			l.State = StateOpen
		case equal(l.Ledger, l.Acknowledged) && l.Pending == 0 && l.Dead == 0 && l.Reported == 0:
			l.State = StateAgrees
		default:
			l.State = StateDiffers
		}
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b StatusLine) int {
		return cmp.Or(cmp.Compare(a.Customer, b.Customer), cmp.Compare(a.Meter, b.Meter))
	})
	if remote != nil {
		if err := readRemote(ctx, remote, out, period); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ledgerTotals is the period's total per customer of each pushed meter.
// When serve keeps the usage state in the period's zone, the period is one
// of its months and every pushed meter sums, the state answers without a
// scan: it holds each month's exact sum of every row, written in the rows'
// own transactions (verify checks it against the ledger). Otherwise the
// period's rows are read (ledger.Query).
func ledgerTotals(ctx context.Context, db StatusStore, meters map[string]ledger.Meter, period ledger.Period, customer string) ([]ledger.UsageLine, error) {
	if lines, ok, err := stateTotals(ctx, db, meters, period, customer); err != nil || ok {
		return lines, err
	}
	ms := make([]ledger.Meter, 0, len(meters))
	for _, m := range meters {
		ms = append(ms, m)
	}
	rep, err := ledger.Query(ctx, db, ledger.UsageQuery{From: period.Start, To: period.End, Customer: customer,
		Meters: ledger.NewMeters(ms), GroupBy: ledger.DefaultGroupBy})
	if err != nil {
		return nil, err
	}
	return rep.Lines, nil
}

// stateTotals is ledgerTotals from the usage state; ok false when the
// state cannot answer for period and meters.
func stateTotals(ctx context.Context, db StatusStore, meters map[string]ledger.Meter, period ledger.Period, customer string) ([]ledger.UsageLine, bool, error) {
	for _, m := range meters {
		if m.Aggregation != ledger.AggSum {
			return nil, false, nil
		}
	}
	z, built, err := db.StateZone(ctx)
	if err != nil || !built || z.Zone != period.Zone {
		return nil, false, err
	}
	loc, err := ledger.LoadZone(period.Zone)
	if err != nil {
		return nil, false, nil
	}
	if start, end := ledger.MonthOf(period.Start.UnixMilli(), loc); start != period.Start.UnixMilli() || end != period.End.UnixMilli() {
		return nil, false, nil
	}
	states, err := db.MonthUsageStates(ctx, customer, period.Start.UnixMilli())
	if err != nil {
		return nil, false, err
	}
	var lines []ledger.UsageLine
	for _, s := range states {
		m, ok := meters[s.Meter]
		if !ok {
			continue
		}
		q, err := ledger.ParseTotal(s.Used)
		if err != nil {
			return nil, false, fmt.Errorf("usage state of %s/%s: %w", s.Customer, s.Meter, err)
		}
		lines = append(lines, ledger.UsageLine{Customer: s.Customer, Meter: s.Meter, Aggregation: m.Aggregation, Quantity: q})
	}
	return lines, true, nil
}

// Differs reports whether any line does not agree (an open close-mode
// period aside).
func Differs(lines []StatusLine) bool {
	for _, l := range lines {
		if l.State == StateDiffers {
			return true
		}
	}
	return false
}

// Unlinked are the reports of period that name no push of this ledger
// (no identifier in the sample, or one hookledger did not send): received
// in the period, they belong to no status line, and stripe status lists
// them apart.
func Unlinked(ctx context.Context, db StatusStore, period ledger.Period) ([]schema.StripeReport, error) {
	reports, err := db.StripeReportsOf(ctx, period.Start.UnixMilli(), period.End.UnixMilli())
	if err != nil {
		return nil, err
	}
	var out []schema.StripeReport
	for _, r := range reports {
		if r.PushID == 0 {
			out = append(out, r)
		}
	}
	return out, nil
}

// ReportText is a report as one line: its code (or its event's type) and
// message.
func ReportText(r schema.StripeReport) string {
	s := r.EventType
	if r.Code != "" {
		s = r.Code
	}
	if r.Message != "" {
		s += ": " + r.Message
	}
	return s
}

// readRemote fills Remote from Stripe's event summaries: the meter with the
// line's event name, the line's Stripe customer, the period.
func readRemote(ctx context.Context, c *Client, lines []StatusLine, period ledger.Period) error {
	meters, err := c.Meters(ctx)
	if err != nil {
		return fmt.Errorf("stripe meters: %w", err)
	}
	ids := map[string]string{}
	for _, m := range meters {
		ids[m.EventName] = m.ID
	}
	for i := range lines {
		l := &lines[i]
		id, ok := ids[l.EventName]
		if !ok {
			l.Remote, l.State = "no meter", StateDiffers
			continue
		}
		if l.StripeCustomer == "" {
			l.Remote, l.State = "no customer", StateDiffers
			continue
		}
		sums, err := c.EventSummaries(ctx, id, l.StripeCustomer, period.Start.Unix(), period.End.Unix())
		if err != nil {
			return fmt.Errorf("event summaries of %s for %s: %w", l.EventName, l.StripeCustomer, err)
		}
		total := "0"
		for _, s := range sums {
			if err := addTo(&total, s.AggregatedValue.String()); err != nil {
				return err
			}
		}
		l.Remote = total
		want, err := stripeSum(*l)
		if err != nil {
			return err
		}
		if !equal(total, want) {
			l.State = StateDiffers
		}
	}
	return nil
}

// linkedCustomer is the Stripe customer the registry links customer to
// (linked: every customer's latest external ids), "" when none.
func linkedCustomer(linked map[string]string, customer string) (string, error) {
	ext := linked[customer]
	if ext == "" {
		return "", nil
	}
	id, err := CustomerOf(ext)
	if err != nil {
		return "", fmt.Errorf("customer %q: %w", customer, err)
	}
	return id, nil
}

// CustomerOf is the Stripe customer that a registry row's external ids (a
// JSON object) name under ExternalID, "" when none.
func CustomerOf(externalIDs string) (string, error) {
	var ids map[string]string
	if err := json.Unmarshal([]byte(externalIDs), &ids); err != nil {
		return "", fmt.Errorf("external ids: %w", err)
	}
	return ids[ExternalID], nil
}

func addTo(sum *string, v string) error {
	a, err := pricing.ParseDecimal(*sum)
	if err != nil {
		return err
	}
	b, err := pricing.ParseDecimal(v)
	if err != nil {
		return err
	}
	s, err := pricing.Add(a, b)
	if err != nil {
		return err
	}
	*sum = s.String()
	return nil
}

func equal(a, b string) bool {
	x, err1 := pricing.ParseDecimal(a)
	y, err2 := pricing.ParseDecimal(b)
	return err1 == nil && err2 == nil && x.Cmp(y) == 0
}

// stripeSum is what Stripe should count in l's period: the ledger's total,
// without what was carried to a later period, with what was carried in.
func stripeSum(l StatusLine) (string, error) {
	sum, err := pricing.ParseDecimal(l.Ledger)
	if err != nil {
		return "", err
	}
	out, err := pricing.ParseDecimal(l.Carried)
	if err != nil {
		return "", err
	}
	in, err := pricing.ParseDecimal(l.CarriedIn)
	if err != nil {
		return "", err
	}
	if sum, err = pricing.Sub(sum, out); err != nil {
		return "", err
	}
	if sum, err = pricing.Add(sum, in); err != nil {
		return "", err
	}
	return sum.String(), nil
}

// tally builds the status lines of a period, one per customer and pushed
// meter, from what the ledger, the pushes and Stripe's reports say.
type tally struct {
	period ledger.Period
	meters map[string]ledger.Meter // the pushed meters, by name
	lines  map[lineKey]*StatusLine
}

type lineKey struct{ customer, meter string }

// line is customer's line of meter, made when first needed.
func (t *tally) line(customer, meter string) *StatusLine {
	k := lineKey{customer, meter}
	if l := t.lines[k]; l != nil {
		return l
	}
	m := t.meters[meter]
	l := &StatusLine{Customer: customer, Meter: meter, EventName: m.Stripe.EventName, Mode: m.Stripe.Mode, Period: t.period.Label,
		Quantity: "0", Ledger: "0", Pushed: "0", Acknowledged: "0", DeadValue: "0", Carried: "0", CarriedIn: "0"}
	t.lines[k] = l
	return l
}

// ledger sets each line's ledger total, in Stripe's whole units.
func (t *tally) ledger(usage []ledger.UsageLine) error {
	for _, u := range usage {
		m, ok := t.meters[u.Meter]
		if !ok {
			continue
		}
		l := t.line(u.Customer, u.Meter)
		q := u.Quantity.Decimal()
		units, err := pricing.Whole(q, m.Stripe.Factor())
		if err != nil {
			return err
		}
		l.Quantity, l.Ledger = q.String(), units.String()
	}
	return nil
}

// pushes adds the period's pushes: what was sent (Stripe answered; a push
// dead before any request was never pushed), acknowledged, carried to a
// later period, pending and dead.
func (t *tally) pushes(pushes []schema.StripePush) error {
	for _, p := range pushes {
		if _, ok := t.meters[p.Meter]; !ok {
			continue // a meter no longer pushed: its pushes stay in forward status
		}
		l := t.line(p.CustomerID, p.Meter)
		if p.StripeCustomer != "" {
			l.StripeCustomer = p.StripeCustomer
		}
		var err error
		if p.Status == schema.OutboxDelivered || p.LastStatus != 0 {
			err = errors.Join(err, addTo(&l.Pushed, p.Value))
		}
		if p.Send.Carried == 1 && !t.period.Contains(p.Send.Timestamp*1000) {
			// Stamped in a later period (stamped now but still in its own
			// month, a push from ahead of Stripe's window counts here).
			err = errors.Join(err, addTo(&l.Carried, p.Value))
		}
		switch p.Status {
		case schema.OutboxDelivered:
			err = errors.Join(err, addTo(&l.Acknowledged, p.Value))
		case schema.OutboxDead:
			l.Dead++
			l.LastError = p.LastError
			err = errors.Join(err, addTo(&l.DeadValue, p.Value))
		default:
			l.Pending++
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// carriedIn adds what pushes of earlier periods brought into this one.
func (t *tally) carriedIn(pushes []schema.StripePush) error {
	for _, p := range pushes {
		if _, ok := t.meters[p.Meter]; !ok || t.period.Contains(p.PeriodStart) {
			continue
		}
		if err := addTo(&t.line(p.CustomerID, p.Meter).CarriedIn, p.Value); err != nil {
			return err
		}
	}
	return nil
}

// reports counts the pushes Stripe reported errors for, and keeps the
// latest report's text.
func (t *tally) reports(pushes []schema.StripePush, reports []schema.StripeReport) {
	byID := make(map[int64]schema.StripePush, len(pushes))
	for _, p := range pushes {
		byID[p.ID] = p
	}
	reported := map[int64]bool{}
	for _, r := range reports {
		p, ok := byID[r.PushID]
		if !ok {
			continue // unlinked (Unlinked), or a meter no longer pushed
		}
		if _, ok := t.meters[p.Meter]; !ok {
			continue
		}
		l := t.line(p.CustomerID, p.Meter)
		if !reported[p.ID] {
			reported[p.ID] = true
			l.Reported++
		}
		l.ReportError = ReportText(r)
	}
}
