package entitle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Override is a customer's own limit on a meter from a date: it replaces
// the plan's limit value (and its kind, when Kind is set) from EffectiveFrom
// on, until a later override. Overrides are appended, never edited: the
// history stays.
type Override struct {
	ID            int64        `json:"id"`
	Customer      string       `json:"customer"`
	Meter         string       `json:"meter"`
	Limit         ledger.Total `json:"limit"`
	Kind          string       `json:"kind,omitempty"` // hard, soft, or "" for the plan's
	EffectiveFrom pricing.Date `json:"effective_from"`
	RecordedAt    time.Time    `json:"recorded_at"`
	Note          string       `json:"note,omitempty"`
}

// ErrBadOverride wraps every validation failure of an override.
var ErrBadOverride = errors.New("invalid limit override")

// OverrideStore stores and reads overrides (*schema.DB).
type OverrideStore interface {
	InsertLimitOverride(ctx context.Context, o schema.LimitOverride) (int64, error)
	LimitOverrides(ctx context.Context, customer, meter string) ([]schema.LimitOverride, error)
}

// SetOverride validates o and appends it. meters are the declared meters;
// the meter must be one of them and aggregate by sum (a limit is on the
// period's sum).
func SetOverride(ctx context.Context, db OverrideStore, o Override, meters ledger.Meters) (Override, error) {
	bad := func(format string, args ...any) (Override, error) {
		return Override{}, fmt.Errorf("%w: %s", ErrBadOverride, fmt.Sprintf(format, args...))
	}
	if err := ledger.CheckIdentifier(o.Customer); err != nil || o.Customer == "" {
		return bad("customer %q is not a customer id", o.Customer)
	}
	m, ok := meters[o.Meter]
	switch {
	case !ok:
		return bad("meter %q is not declared under meters", o.Meter)
	case m.Aggregation != ledger.AggSum:
		return bad("meter %q aggregates by %s: limits apply to sum meters", o.Meter, m.Aggregation)
	case o.Limit.Sign() < 0:
		return bad("limit %s is negative", o.Limit)
	case o.Kind != "" && o.Kind != pricing.LimitHard && o.Kind != pricing.LimitSoft:
		return bad("kind %q is not hard or soft", o.Kind)
	}
	if err := o.EffectiveFrom.Check(); err != nil {
		return bad("%v", err)
	}
	if err := ledger.CheckTexts(ledger.Text{Field: "note", Value: o.Note}); err != nil {
		return bad("%v", err)
	}
	id, err := db.InsertLimitOverride(ctx, schema.LimitOverride{Customer: o.Customer, Meter: o.Meter, Limit: o.Limit.String(),
		Kind: o.Kind, EffectiveFrom: string(o.EffectiveFrom), RecordedAt: o.RecordedAt.UnixMilli(), Note: o.Note})
	if err != nil {
		return Override{}, err
	}
	o.ID = id
	return o, nil
}

// Overrides lists the overrides of customer ("" for all), by customer,
// meter, date and the order they were recorded.
func Overrides(ctx context.Context, db OverrideStore, customer string) ([]Override, error) {
	rs, err := db.LimitOverrides(ctx, customer, "")
	if err != nil {
		return nil, err
	}
	out := make([]Override, 0, len(rs))
	for _, r := range rs {
		l, err := ledger.ParseTotal(r.Limit)
		if err != nil {
			return nil, fmt.Errorf("limit override %d: %q is not a quantity", r.ID, r.Limit)
		}
		out = append(out, Override{ID: r.ID, Customer: r.Customer, Meter: r.Meter, Limit: l, Kind: r.Kind,
			EffectiveFrom: pricing.Date(r.EffectiveFrom), RecordedAt: time.UnixMilli(r.RecordedAt).UTC(), Note: r.Note})
	}
	return out, nil
}
