package entitle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Reader is what a Checker reads (*schema.DB, the read pool).
type Reader interface {
	StateZone(ctx context.Context) (schema.StateZone, bool, error)
	UsageStateAt(ctx context.Context, customer, meter string, at int64) (schema.UsageState, bool, error)
	PlanAssignments(ctx context.Context, customer string) ([]schema.PlanAssignment, error)
	LimitOverrides(ctx context.Context, customer, meter string) ([]schema.LimitOverride, error)
}

// ErrNotBuilt means the usage state has not been built yet (serve builds
// it as it starts): there is no answer to give, so the caller retries.
var ErrNotBuilt = errors.New("the usage state is not built yet (serve builds it as it starts)")

// Checker answers entitlement checks from the usage state: one row's read
// per meter, plus the customer's plan assignments and overrides (small,
// indexed reads), never a scan of the ledger.
type Checker struct {
	DB     Reader
	Policy *Policy
	// Now is the clock (tests replace it). Default time.Now.
	Now func() time.Time
}

// Entitlement is the answer for one customer's meter now.
type Entitlement struct {
	Customer  string        `json:"customer"`
	Meter     string        `json:"meter"`
	Limit     *ledger.Total `json:"limit"` // null: no limit
	Kind      string        `json:"kind,omitempty"`
	Used      ledger.Total  `json:"used"`
	Remaining *ledger.Total `json:"remaining"` // null: no limit
	// Allowed is false once usage has reached a hard limit; without a limit,
	// or with a soft one, it is true.
	Allowed     bool   `json:"allowed"`
	PeriodStart string `json:"period_start"`
	PeriodEnd   string `json:"period_end"`
	// AsOf is when the answer was read; Used counts every ledger row
	// committed before it (LastRowID is the latest of them in this period).
	AsOf      string     `json:"as_of"`
	LastRowID int64      `json:"last_row_id"`
	Source    *LimitJSON `json:"source,omitempty"` // where the limit comes from
}

// Reply is the answer for several meters of one customer and its spend:
// the batch form of the entitlement check, and `limits --customer`.
type Reply struct {
	Entitlements []Entitlement `json:"entitlements"`
	Spend        *SpendAnswer  `json:"spend,omitempty"` // asked for (spent null when the customer's plan version keeps no spend)
}

// Check answers for customer's meter now.
func (c *Checker) Check(ctx context.Context, customer, meter string) (Entitlement, error) {
	es, err := c.CheckAll(ctx, customer, []string{meter})
	if err != nil {
		return Entitlement{}, err
	}
	return es[0], nil
}

// CheckAll answers for several meters of one customer at one instant.
func (c *Checker) CheckAll(ctx context.Context, customer string, meters []string) ([]Entitlement, error) {
	return c.checkAt(ctx, customer, meters, c.now())
}

// Reply answers for several meters of one customer and, when spend, for
// its spend, all at one instant (the batch check, limits --customer).
func (c *Checker) Reply(ctx context.Context, customer string, meters []string, spend bool) (Reply, error) {
	at := c.now()
	es, err := c.checkAt(ctx, customer, meters, at)
	if err != nil || !spend {
		return Reply{Entitlements: es}, err
	}
	sp, err := c.spendAt(ctx, customer, at)
	return Reply{Entitlements: es, Spend: &sp}, err
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Checker) checkAt(ctx context.Context, customer string, meters []string, at time.Time) ([]Entitlement, error) {
	out := make([]Entitlement, 0, len(meters))
	if len(meters) == 0 {
		return out, nil
	}
	loc, built, err := stateLocation(ctx, c.DB)
	if err != nil {
		return nil, err
	}
	if !built {
		return nil, ErrNotBuilt
	}
	ms := at.UnixMilli()
	start, end := ledger.MonthOf(ms, loc)
	as, err := c.DB.PlanAssignments(ctx, customer)
	if err != nil {
		return nil, err
	}
	day := Day(ms, loc)
	for _, meter := range meters {
		e := Entitlement{Customer: customer, Meter: meter, Allowed: true,
			PeriodStart: time.UnixMilli(start).In(loc).Format(time.RFC3339), PeriodEnd: time.UnixMilli(end).In(loc).Format(time.RFC3339),
			AsOf: at.UTC().Format(time.RFC3339Nano)}
		s, found, err := c.DB.UsageStateAt(ctx, customer, meter, ms)
		if err != nil {
			return nil, err
		}
		if found {
			if e.Used, err = ledger.ParseTotal(s.Used); err != nil {
				return nil, fmt.Errorf("usage state %s/%s: used %q: %w", customer, meter, s.Used, err)
			}
			e.LastRowID = s.LastRowID
		}
		os, err := c.DB.LimitOverrides(ctx, customer, meter)
		if err != nil {
			return nil, err
		}
		if l, ok := c.Policy.Resolve(customer, meter, day, as, os); ok {
			v, rem := l.Value, l.Remaining(e.Used)
			e.Limit, e.Remaining, e.Kind, e.Allowed = &v, &rem, l.Kind, l.Allowed(e.Used)
			e.Source = limitJSON(l)
		}
		out = append(out, e)
	}
	return out, nil
}

// zoneReader reads the zone of the usage state's months (*schema.DB).
type zoneReader interface {
	StateZone(ctx context.Context) (schema.StateZone, bool, error)
}

// stateLocation is the zone the usage state's months are counted in; built
// is false (and the zone UTC) while serve has not built the state yet.
func stateLocation(ctx context.Context, db zoneReader) (loc *time.Location, built bool, err error) {
	z, ok, err := db.StateZone(ctx)
	if err != nil || !ok {
		return time.UTC, false, err
	}
	if loc, err = ledger.LoadZone(z.Zone); err != nil {
		return nil, false, err
	}
	return loc, true, nil
}
