package invoice

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// Plan changes inside a period (docs/invoicing.md, "Plan changes inside a
// month"). A customer assigned another plan from a day inside a period has
// one invoice for it, its period split at the change: each part is priced
// by the version in force on its first day. Usage goes to the part its
// event time falls in, and tiers count within each part (a line per meter
// and part, its quantity the part's alone); each version's fee and minimum
// are prorated by the part's share of the period's time (pricing.Prorate,
// rounded once per part). An assignment on the period's first day, or one
// to the plan already in force, splits nothing: the invoice is one part, as
// before plan changes were split.

// InvoicePart is one part of a split period, frozen on its invoice.
type InvoicePart struct {
	Start   int64  `json:"start"` // unix ms, inclusive
	End     int64  `json:"end"`   // unix ms, exclusive
	Version string `json:"version"`
	Fee     string `json:"fee"`     // the version's fee × the part's share, rounded once
	TrueUp  string `json:"true_up"` // up to the version's minimum × the share, rounded once
}

// part is one part of a period as a close computes it.
type part struct {
	start, end int64
	version    *pricing.Plan
}

// partsOf splits customer's period [start, end) in tz at every assignment
// that changes the plan version in force inside it: nil when one version
// prices the whole period (the invoice is not split).
func (p *pricer) partsOf(customer string, start, end int64, tz string) ([]part, error) {
	if p == nil {
		return nil, nil
	}
	first, err := p.versionFor(customer, start, tz)
	if err != nil || first == nil {
		return nil, err
	}
	parts := []part{{start: start, version: first}}
	for _, day := range p.pr.Plans.Changes(customer) {
		at, err := dayStart(day, tz)
		if err != nil {
			return nil, err
		}
		if at <= start || at >= end {
			continue
		}
		v, err := p.pr.versionOn(customer, day)
		if err != nil {
			return nil, err
		}
		if v == nil || versionKey(v) == versionKey(parts[len(parts)-1].version) {
			continue // no plan, or the same version: no change of price
		}
		parts[len(parts)-1].end = at
		parts = append(parts, part{start: at, version: v})
	}
	if len(parts) == 1 {
		return nil, nil
	}
	parts[len(parts)-1].end = end
	return parts, nil
}

// dayStart is the first instant of day in tz, unix ms.
func dayStart(day pricing.Date, tz string) (int64, error) {
	loc, err := ledger.LoadZone(tz)
	if err != nil {
		return 0, err
	}
	t, err := time.ParseInLocation(time.DateOnly, string(day), loc)
	if err != nil {
		return 0, fmt.Errorf("date %q: %w", day, err)
	}
	return t.UnixMilli(), nil
}

// boundaries are the instants where parts after the first start.
func boundaries(parts []part) []int64 {
	var out []int64
	for _, pt := range parts[1:] {
		out = append(out, pt.start)
	}
	return out
}

// partIndex is the index of the part occurred falls in, given the parts'
// boundaries.
func partIndex(bounds []int64, occurred int64) int {
	i, found := slices.BinarySearch(bounds, occurred)
	if found {
		return i + 1
	}
	return i
}

// partsJSON is inv's parts as invoices.parts stores them ("" for none):
// canonical JSON, what the digest covers.
func (inv *Invoice) partsJSON() string {
	if len(inv.Parts) == 0 {
		return ""
	}
	b, err := json.Marshal(inv.Parts)
	if err != nil {
		panic(err) // integers and strings always marshal
	}
	return string(b)
}

// decodeParts reads invoices.parts.
func decodeParts(s string) ([]InvoicePart, error) {
	if s == "" {
		return nil, nil
	}
	var parts []InvoicePart
	if err := json.Unmarshal([]byte(s), &parts); err != nil {
		return nil, fmt.Errorf("stored parts: %w", err)
	}
	return parts, nil
}

// window is the event time a line bills: its part, or its period.
func (l *InvoiceLine) window() (from, to int64) {
	if l.PartEnd != 0 {
		return l.PartStart, l.PartEnd
	}
	return l.PeriodStart, l.PeriodEnd
}

// partStartOf is the start of the part of inv's split period occurred
// falls in; 0 when the period is not split (its lines' PartStart).
func (inv *Invoice) partStartOf(occurred int64) int64 {
	for _, pt := range inv.Parts {
		if occurred >= pt.Start && occurred < pt.End {
			return pt.Start
		}
	}
	return 0
}

// partJSON is a part as invoices show it in JSON: its bounds in the
// invoice's zone.
type partJSON struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Version string    `json:"version"`
	Fee     string    `json:"fee"`
	TrueUp  string    `json:"true_up"`
}

func partsView(inv Invoice) []partJSON {
	out := make([]partJSON, len(inv.Parts))
	for i, pt := range inv.Parts {
		out[i] = partJSON{ledger.MsTime(pt.Start, inv.TZ), ledger.MsTime(pt.End, inv.TZ), pt.Version, pt.Fee, pt.TrueUp}
	}
	return out
}

// partTime is a line's part bound at in tz, nil for a line of a period not
// split (end 0).
func partTime(at, end int64, tz string) *time.Time {
	if end == 0 {
		return nil
	}
	t := ledger.MsTime(at, tz)
	return &t
}

// PartLabel names a line's part of a split period by its days in its zone
// ("11-16 to 12-01"); "" for a line of a whole period.
func PartLabel(l InvoiceLine) string {
	if l.PartEnd == 0 {
		return ""
	}
	return ledger.MsTime(l.PartStart, l.TZ).Format("01-02") + " to " + ledger.MsTime(l.PartEnd, l.TZ).Format("01-02")
}

// ChangePreview is what an assignment from a day inside a period does to
// that period: the customer's draft invoice of it without the change and
// with it (Preview), the latter split at the change.
type ChangePreview struct {
	Period ledger.Period
	Before *Invoice // nil: no invoice without the change
	After  *Invoice // nil: no invoice with it
}

// PreviewChange previews assignment a against the period of cal that its
// first day falls in (months in loc): nil when a takes effect on a period's
// first day, or splits nothing (the same version on both sides). It stores
// nothing: both drafts are Preview's.
func PreviewChange(ctx context.Context, db PreviewStore, pr *Pricing, a customer.PlanAssignment, meters ledger.Meters, loc *time.Location, now func() time.Time) (*ChangePreview, error) {
	if pr == nil {
		return nil, nil
	}
	day, err := time.ParseInLocation(time.DateOnly, string(a.EffectiveFrom), loc)
	if err != nil || day.Day() == 1 {
		return nil, err
	}
	period, err := ledger.MonthPeriod(day.Format("2006-01"), loc)
	if err != nil {
		return nil, err
	}
	with := &Pricing{Catalog: pr.Catalog, Plans: pr.Plans.With(a)}
	draft := func(pricing *Pricing) (*Invoice, error) {
		res, err := Preview(ctx, db, CloseRequest{Period: period, Customer: a.Customer, Meters: meters, Now: now, Pricing: pricing})
		if err != nil || len(res.Invoices) == 0 {
			return nil, err
		}
		return &res.Invoices[0], nil
	}
	after, err := draft(with)
	if err != nil || after == nil || after.Parts == nil {
		return nil, err
	}
	before, err := draft(pr)
	if err != nil {
		return nil, err
	}
	return &ChangePreview{Period: period, Before: before, After: after}, nil
}

// PartDays names a part of a split period by its days in tz: "2026-11-16
// to 2026-12-01" (the end exclusive, as periods are).
func PartDays(pt InvoicePart, tz string) string {
	return ledger.MsTime(pt.Start, tz).Format(time.DateOnly) + " to " + ledger.MsTime(pt.End, tz).Format(time.DateOnly)
}
