package ledger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// Void is the correction of one applied event as an auditor wants it: the
// event's usage rows stay, and one row of kind void per usage row, in the
// hash chain, takes it back out (its quantity negated, its customer, meter,
// event time and properties the voided row's, ref row:ID). An open period
// simply nets out; a closed one bills the void as late usage on the next
// invoice, at the margin, like an adjustment. The receipt stays applied, so a
// redelivery of the event is a duplicate and a replay finds it applied: a
// voided event is never applied again.
type Void struct {
	Provider string
	EventID  string
	Reason   string // why, required
	Actor    string // who, required; when is the rows' recorded_at
}

// Errors a void (and so an amend) returns; the CLI and the admin API branch
// on them (errors.Is).
var (
	ErrBadVoid       = errors.New("invalid void")
	ErrAlreadyVoided = errors.New("already voided")
)

// VoidEventID is the event id the void rows of provider's eventID carry
// (with provider ""): derived, never random, so metered_usage's unique key
// (provider, event_id, meter) refuses a second void of an event's meter
// even if the check in Rows were skipped.
func VoidEventID(provider, eventID string) string { return "void:" + provider + "/" + eventID }

// AmendedEventID is the stable id of the event that amends eventID (an event
// is voided once, so amended once; an amendment may itself be amended).
func AmendedEventID(eventID string) string { return eventID + "~amend" }

// VoidReason is what a void row's reason holds: why, and who (the row's
// recorded_at is when). Both are in the hash chain.
func VoidReason(reason, actor string) string { return reason + " (by " + actor + ")" }

// Validate checks the void on its own.
func (v *Void) Validate() error {
	v.Reason, v.Actor = strings.TrimSpace(v.Reason), strings.TrimSpace(v.Actor)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadVoid, fmt.Sprintf(format, args...))
	}
	switch {
	case v.Provider == "" || v.EventID == "":
		return bad("provider and event id are required")
	case v.Reason == "":
		return bad("a reason is required: say why the event is voided")
	case v.Actor == "":
		return bad("an actor is required: who voids the event")
	}
	for _, s := range []string{v.Provider, v.EventID, v.Actor} {
		if err := CheckIdentifier(s); err != nil {
			return bad("%q: %v", s, err)
		}
	}
	if err := CheckTexts(Text{"reason", v.Reason}); err != nil {
		return bad("%v", err)
	}
	return nil
}

// VoidSource reads, inside the writer's transaction, what a void needs: the
// event's rows and its void rows (schema.Batch).
type VoidSource interface {
	EventLedgerRows(ctx context.Context, provider, eventID string) ([]schema.LedgerRow, error)
}

// Rows returns the void rows to append for v, read inside the write
// transaction: one per usage row of the event. An event voided before, one
// without usage rows (never received, ignored, failed) and one with a row of
// a meter that cannot be voided (Meter.Voidable) are refused.
func (v *Void) Rows(ctx context.Context, src VoidSource, meters Meters, recordedAt int64) ([]*Row, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	voidID := VoidEventID(v.Provider, v.EventID)
	done, err := src.EventLedgerRows(ctx, "", voidID)
	if err != nil {
		return nil, fmt.Errorf("read voids of %s/%s: %w", v.Provider, v.EventID, err)
	}
	if len(done) > 0 {
		d := done[0]
		return nil, fmt.Errorf("%w: %s/%s was voided by row %d at %s: %s", ErrAlreadyVoided, v.Provider, v.EventID,
			d.ID, MsTime(d.RecordedAt, "UTC").Format("2006-01-02T15:04:05Z"), d.Reason)
	}
	recs, err := src.EventLedgerRows(ctx, v.Provider, v.EventID)
	if err != nil {
		return nil, fmt.Errorf("read rows of %s/%s: %w", v.Provider, v.EventID, err)
	}
	var out []*Row
	for i := range recs {
		r := rowOf(&recs[i])
		if r.Kind != KindUsage {
			continue
		}
		if m := meters.Get(r.Meter); !m.Voidable() {
			return nil, fmt.Errorf("%w: %s/%s has a row of meter %s, aggregated by %s: only sum and count meters can be voided "+
				"(correct it with hookledger adjust)", ErrBadVoid, v.Provider, v.EventID, r.Meter, m.Aggregation)
		}
		out = append(out, &Row{Kind: KindVoid, EventID: voidID, Customer: r.Customer, Meter: r.Meter,
			Quantity: r.Quantity.Neg(), Properties: r.Properties, Reason: VoidReason(v.Reason, v.Actor),
			Ref: fmt.Sprintf("row:%d", r.ID), OccurredAt: r.OccurredAt, RecordedAt: recordedAt})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s/%s has no usage rows to void (not received, ignored or failed: see hookledger events)",
			ErrBadVoid, v.Provider, v.EventID)
	}
	return out, nil
}

// Change is what a correction does to one customer's meter in one period:
// the event's contribution before and after, and the difference.
type Change struct {
	Customer string `json:"customer"`
	Meter    string `json:"meter"`
	Period   string `json:"period"` // YYYY-MM in the zone asked for
	Before   Total  `json:"before"`
	After    Total  `json:"after"`
	Change   Total  `json:"change"`
	// Money is what the change adds to the customer's bill for the period,
	// exact (PriceChanges, changemoney.go); "" when no plan prices it.
	Money    string `json:"money,omitempty"`
	Currency string `json:"currency,omitempty"`

	Start, End int64            // the month, unix ms
	Parts      map[string]Total // the change by the rows' properties: a price by dimension prices each value's part
}

// Changes compares an event's usage rows (before) with the rows that would
// replace them (after; none for a void), per customer, meter and month of
// event time in loc, sorted. A count meter's rows count one each.
func Changes(before, after []Row, meters Meters, loc *time.Location) []Change {
	type key struct{ customer, meter, period string }
	acc := map[key]*Change{}
	var sign int // -1 for the rows taken out, 1 for those put in
	add := func(r Row, side func(*Change) *Total) {
		at := time.UnixMilli(r.OccurredAt).In(loc)
		k := key{r.Customer, r.Meter, at.Format("2006-01")}
		c := acc[k]
		if c == nil {
			start := time.Date(at.Year(), at.Month(), 1, 0, 0, 0, 0, loc)
			c = &Change{Customer: k.customer, Meter: k.meter, Period: k.period,
				Start: start.UnixMilli(), End: start.AddDate(0, 1, 0).UnixMilli(), Parts: map[string]Total{}}
			acc[k] = c
		}
		q := r.Quantity
		if meters.Get(r.Meter).Aggregation == AggCount {
			q = countTotal(1)
		}
		t := side(c)
		*t = t.Plus(q)
		if sign > 0 {
			c.Parts[r.Properties] = c.Parts[r.Properties].Plus(q)
		} else {
			c.Parts[r.Properties] = c.Parts[r.Properties].Minus(q)
		}
	}
	sign = -1
	for _, r := range before {
		if r.Kind == KindUsage {
			add(r, func(c *Change) *Total { return &c.Before })
		}
	}
	sign = 1
	for _, r := range after {
		add(r, func(c *Change) *Total { return &c.After })
	}
	out := make([]Change, 0, len(acc))
	for _, c := range acc {
		c.Change = c.After.Minus(c.Before)
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Customer, b.Customer), cmp.Compare(a.Meter, b.Meter), cmp.Compare(a.Period, b.Period))
	})
	return out
}

// UsageRows are the ledger rows rows would be appended as (kind usage), for
// Changes.
func UsageRows(rows []UsageRow) []Row {
	out := make([]Row, len(rows))
	for i, u := range rows {
		out[i] = Row{Kind: KindUsage, Customer: u.Customer, Meter: u.Meter, Quantity: u.Quantity, Properties: u.Properties,
			OccurredAt: u.OccurredAt.UnixMilli()}
	}
	return out
}

// StoredRows are the domain rows of stored ones.
func StoredRows(rs []schema.LedgerRow) []Row { return rowsOf(rs) }

// VerifyVoids checks every void row against the row it voids: that row
// exists, is a usage row, is voided by this row alone, and this row is its
// exact compensation (same customer, meter, event time and properties,
// quantity negated, the event id derived from the voided event's). An
// incremental verify checks the void rows after the ledger anchor, and
// reads the ones before (an index holds them) for what they voided.
func VerifyVoids(ctx context.Context, db VoidReads, s Since) (CheckResult, error) {
	c := CheckResult{Name: "voids", From: s.From(s.Rows(ChainLedger, "after"))}
	voidedBy := map[int64]int64{}
	for after := int64(0); ; {
		recs, err := db.VoidRows(ctx, after, 1000)
		if err != nil {
			return c, err
		}
		if len(recs) == 0 {
			return c, nil
		}
		for i := range recs {
			v := rowOf(&recs[i])
			after = v.ID
			kind, value, err := parseRef(v.Ref)
			id, _ := strconv.ParseInt(value, 10, 64)
			if v.ID <= s.Ledger {
				if err == nil && kind == "row" && voidedBy[id] == 0 {
					voidedBy[id] = v.ID // checked by the verify that took the anchor
				}
				continue
			}
			c.Checked++
			bad := func(format string, args ...any) {
				c.Add(Problem{Table: "metered_usage", ID: v.ID, Msg: fmt.Sprintf(format, args...)})
			}
			if err != nil || kind != "row" {
				bad("void row's ref %q names no ledger row", v.Ref)
				continue
			}
			rec, err := db.GetLedgerRow(ctx, id)
			if errors.Is(err, schema.ErrNotFound) {
				bad("voids row %d, which does not exist", id)
				continue
			}
			if err != nil {
				return c, err
			}
			u := rowOf(rec)
			switch {
			case u.Kind != KindUsage:
				bad("voids row %d, which is not a usage row (kind %s)", id, u.Kind)
			case voidedBy[id] != 0:
				bad("voids row %d, which row %d voided already", id, voidedBy[id])
			case u.Customer != v.Customer || u.Meter != v.Meter || u.OccurredAt != v.OccurredAt || u.Properties != v.Properties ||
				!u.Quantity.Neg().Equal(v.Quantity) || v.EventID != VoidEventID(u.Provider, u.EventID):
				bad("does not compensate row %d exactly (customer %q, meter %s, quantity %s against %q, %s, %s)",
					id, v.Customer, v.Meter, v.Quantity, u.Customer, u.Meter, u.Quantity)
			}
			if voidedBy[id] == 0 {
				voidedBy[id] = v.ID
			}
		}
	}
}

// VoidReader reads void rows (*schema.DB).
type VoidReader interface {
	VoidRows(ctx context.Context, afterID int64, limit int) ([]schema.LedgerRow, error)
}

// Voids lists the void rows with id > afterID, in id order, at most limit:
// what was voided (ref), why and by whom (reason), when (recorded_at).
func Voids(ctx context.Context, src VoidReader, afterID int64, limit int) ([]Row, error) {
	recs, err := src.VoidRows(ctx, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("read voids: %w", err)
	}
	return rowsOf(recs), nil
}

// MergeChanges adds up changes of the same customer, meter and period (a bulk
// correction's, event by event), sorted.
func MergeChanges(cs []Change) []Change {
	type key struct{ customer, meter, period string }
	acc := map[key]*Change{}
	var out []Change
	for _, c := range cs {
		k := key{c.Customer, c.Meter, c.Period}
		if a := acc[k]; a != nil {
			a.Before, a.After, a.Change = a.Before.Plus(c.Before), a.After.Plus(c.After), a.Change.Plus(c.Change)
			for props, q := range c.Parts {
				a.Parts[props] = a.Parts[props].Plus(q)
			}
			continue
		}
		c := c
		c.Parts = maps.Clone(c.Parts)
		if c.Parts == nil {
			c.Parts = map[string]Total{}
		}
		acc[k] = &c
	}
	for _, c := range acc {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(a.Customer, b.Customer), cmp.Compare(a.Meter, b.Meter), cmp.Compare(a.Period, b.Period))
	})
	return out
}
