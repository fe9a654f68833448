package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/metrics"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

// closeCheckInterval is how often serve looks for a period to close
// (invoicing.close), besides once at start. A check that finds nothing due
// reads the closes from the read pool and writes nothing, so it is cheap; a
// period closes at most this long after its grace has passed.
const closeCheckInterval = 10 * time.Minute

// invoiceScheduler closes ended periods for every customer on serve's
// schedule, with the same close as `hookledger invoice close --all`.
//
// What it closes: every month after the latest close for all customers
// (made by the schedule or by hand) whose end plus the grace has passed,
// oldest first; with no close for all customers yet, only the latest such
// month (earlier ones are closed by hand, if at all). So a serve that was
// down across several month ends catches up in order, and nothing before
// the first close is billed by surprise.
//
// Once: the check reads the closes first, and invoice.Close returns the
// earlier close (Existing) for a period already closed, in the close's own
// write transaction; on PostgreSQL that transaction first locks the chain
// head's row, so of several receivers racing to close a period one closes
// it and the others find it closed.
type invoiceScheduler struct {
	DB      *schema.DB
	Config  *config.Config // Invoicing, Catalog, Customers.DefaultPlan, Meters
	Log     *slog.Logger
	Metrics *metrics.Invoicing // nil: not counted
	// Now is the clock; the close's cutoff and grace check use it too.
	Now func() time.Time
}

// check closes every period due now, oldest first. It stops at the first
// failure: a later period never closes before an earlier one, and the
// failure is retried at the next check.
func (s *invoiceScheduler) check(ctx context.Context) {
	in := s.Config.Invoicing
	last, err := s.latestClose(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.Metrics.ObserveClose("error")
			s.Log.Error("scheduled close", "error", err.Error())
		}
		return
	}
	for _, p := range duePeriods(last, s.Now(), in.Location, in.Grace.Duration) {
		if err := s.close(ctx, p); err != nil {
			return
		}
	}
	s.retryExcluded(ctx)
}

// retryExcluded tries again to invoice each customer a close for all could
// not (invoice.OpenExclusions), each in a close of its own: a fix (the plan
// declared again, …) takes effect at the next check. It sets the metric to
// how many are still not invoiced.
func (s *invoiceScheduler) retryExcluded(ctx context.Context) {
	open, err := invoice.OpenExclusions(ctx, s.DB)
	if err != nil {
		if ctx.Err() == nil {
			s.Log.Warn("scheduled close", "error", err.Error())
		}
		return
	}
	cfg := s.Config
	left := 0
	for _, x := range open {
		attrs := []any{"period", x.Period.Label, "tz", x.Period.Zone, "customer", x.Customer}
		pr, _, err := invoice.LoadPricing(ctx, s.DB, cfg.Catalog, cfg.Customers.DefaultPlan)
		var res *invoice.CloseResult
		if err == nil {
			res, err = invoice.Close(ctx, s.DB, invoice.CloseRequest{Period: x.Period, Customer: x.Customer, Grace: cfg.Invoicing.Grace.Duration,
				Meters: ledger.NewMeters(cfg.Meters), Now: s.Now, Pricing: pr, OnClose: stripe.NewSync(cfg).OnClose(s.Now)})
		}
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			left++
			s.Log.Warn("scheduled close", append(attrs, "outcome", "excluded", "error", err.Error(),
				"hint", "the customer's period stays open; it is tried again at the next check")...)
			continue
		}
		s.Log.Info("scheduled close", append(attrs, "outcome", "closed", "invoices", len(res.Invoices), "totals", invoiceTotals(res.Invoices))...)
	}
	s.Metrics.SetExcluded(left)
}

// latestClose is the close for all customers with the latest period end
// (nil when there is none). It also refreshes the gauges, so they are right
// from the first check after a restart.
func (s *invoiceScheduler) latestClose(ctx context.Context) (*schema.PeriodClose, error) {
	closes, err := s.DB.PeriodCloses(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("read closed periods: %w", err)
	}
	var last *schema.PeriodClose
	for i, c := range closes {
		if c.Customer == "" && (last == nil || c.PeriodEnd > last.PeriodEnd) {
			last = &closes[i]
		}
	}
	if last != nil {
		s.Metrics.SetLatest(time.UnixMilli(last.ClosedAt), time.UnixMilli(last.PeriodEnd))
	}
	return last, nil
}

// close closes p for every customer and logs one line saying what it did.
func (s *invoiceScheduler) close(ctx context.Context, p ledger.Period) error {
	cfg := s.Config
	res, err := func() (*invoice.CloseResult, error) {
		pr, registered, err := invoice.LoadPricing(ctx, s.DB, cfg.Catalog, cfg.Customers.DefaultPlan)
		if err != nil {
			return nil, err
		}
		return invoice.Close(ctx, s.DB, invoice.CloseRequest{Period: p, All: true, Grace: cfg.Invoicing.Grace.Duration,
			Meters: ledger.NewMeters(cfg.Meters), Now: s.Now, Pricing: pr, Registered: registered,
			OnClose: stripe.NewSync(cfg).OnClose(s.Now)})
	}()
	attrs := []any{"period", p.Label, "tz", p.Zone}
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down: the close rolled back and runs again after the restart
		}
		s.Metrics.ObserveClose("error")
		hint := "it is tried again at the next check"
		if errors.Is(err, invoice.ErrPeriodOverlap) || errors.Is(err, invoice.ErrPeriodGap) {
			hint = "an earlier close used other period bounds: set invoicing.tz to the zone closes were made in"
		}
		s.Log.Error("scheduled close", append(attrs, "outcome", "error", "error", err.Error(), "hint", hint)...)
		return err
	}
	outcome := "closed"
	if res.Existing {
		outcome = "existing" // closed meanwhile, by another receiver or by hand
	}
	s.Metrics.ObserveClose(outcome)
	lines := 0
	for _, inv := range res.Invoices {
		lines += len(inv.Lines)
	}
	s.Log.Info("scheduled close", append(attrs, "outcome", outcome, "invoices", len(res.Invoices), "lines", lines,
		"totals", invoiceTotals(res.Invoices), "cutoff", time.UnixMilli(res.Cutoff).UTC().Format(time.RFC3339Nano),
		"ledger_head", res.Head)...)
	for _, u := range res.Unpriced {
		s.Log.Warn("scheduled close", append(attrs, "unpriced", u.String())...)
	}
	for _, x := range res.Excluded {
		s.Log.Warn("scheduled close", append(attrs, "outcome", "excluded", "customer", x.Customer, "error", x.Error)...)
	}

	if _, err := s.latestClose(ctx); err != nil && ctx.Err() == nil {
		s.Log.Warn("scheduled close", "error", err.Error())
	}
	return nil
}

// invoiceTotals sums the invoices' totals per currency, e.g. "EUR 50.00,
// USD 771.28"; "-" when no invoice carries money.
func invoiceTotals(invs []invoice.Invoice) string {
	sums := map[string]pricing.Decimal{}
	for _, inv := range invs {
		if inv.Money.Currency == "" {
			continue
		}
		t, err := pricing.ParseDecimal(inv.Money.Total)
		if err == nil {
			t, err = pricing.Sum(sums[inv.Money.Currency], t)
		}
		if err != nil {
			return "unreadable total on invoice " + fmt.Sprint(inv.ID) + ": " + err.Error()
		}
		sums[inv.Money.Currency] = t
	}
	var parts []string
	for c, t := range sums {
		parts = append(parts, c+" "+t.String())
	}
	if len(parts) == 0 {
		return "-"
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// duePeriods lists the months in loc to close at now, oldest first: those
// after the period of last (the latest close for all customers; nil when
// there is none) whose end plus grace has passed, or with no such close
// only the latest of them. A last close made in another zone has bounds
// these months do not share: the first month then overlaps it, and its
// close says so (ledger.ErrPeriodOverlap) instead of leaving a gap.
func duePeriods(last *schema.PeriodClose, now time.Time, loc *time.Location, grace time.Duration) []ledger.Period {
	latest := previousMonth(monthOf(now, loc), loc)
	for latest.End.Add(grace).After(now) {
		latest = previousMonth(latest, loc)
	}
	first := latest
	if last != nil {
		first = monthOf(time.UnixMilli(last.PeriodEnd), loc)
	}
	var due []ledger.Period
	for p := first; !p.Start.After(latest.Start); p = monthOf(p.End, loc) {
		due = append(due, p)
	}
	return due
}

// monthOf is the calendar month in loc holding instant t.
func monthOf(t time.Time, loc *time.Location) ledger.Period {
	p, err := ledger.MonthPeriod(t.In(loc).Format("2006-01"), loc)
	if err != nil {
		panic(err) // a month formatted by time is always a month
	}
	return p
}

func previousMonth(p ledger.Period, loc *time.Location) ledger.Period {
	return monthOf(p.Start.Add(-time.Millisecond), loc)
}
