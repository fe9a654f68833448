package entitle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Reader is what a Checker reads (*schema.DB, the read pool): everything a
// check needs of one customer at one instant, in one group of reads.
type Reader interface {
	CheckReads(ctx context.Context, customer string, meters []string, spend bool, at int64) (schema.CheckReads, error)
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
	// Credit is the customer's credit as the month's spend draws it, for
	// a limit of kind credit (no Limit, no Remaining): Allowed while
	// credit is available.
	Credit *CreditCheck `json:"credit,omitempty"`
}

// Reply is the answer for several meters of one customer and its spend:
// the batch form of the entitlement check, and `limits --customer`.
type Reply struct {
	Entitlements []Entitlement `json:"entitlements"`
	Spend        *SpendAnswer  `json:"spend,omitempty"` // asked for (spent null when the customer's plan version keeps no spend)
}

// Check answers for customer's meter now.
func (c *Checker) Check(ctx context.Context, customer, meter string) (Entitlement, error) {
	r, err := c.Reply(ctx, customer, []string{meter}, false)
	if err != nil {
		return Entitlement{}, err
	}
	return r.Entitlements[0], nil
}

// CheckAll answers for several meters of one customer at one instant.
func (c *Checker) CheckAll(ctx context.Context, customer string, meters []string) ([]Entitlement, error) {
	r, err := c.Reply(ctx, customer, meters, false)
	return r.Entitlements, err
}

// Spend answers the spend check for customer now (GET /v1/spend/{customer}).
func (c *Checker) Spend(ctx context.Context, customer string) (SpendAnswer, error) {
	r, err := c.Reply(ctx, customer, nil, true)
	if err != nil {
		return SpendAnswer{}, err
	}
	return *r.Spend, nil
}

// Reply answers for several meters of one customer and, when spend, for
// its spend, all at one instant and from one group of reads (the batch
// check, the customer's usage, limits --customer).
func (c *Checker) Reply(ctx context.Context, customer string, meters []string, spend bool) (Reply, error) {
	at := c.now()
	in, err := c.DB.CheckReads(ctx, customer, meters, spend, at.UnixMilli())
	if err != nil {
		return Reply{}, err
	}
	if !in.Built {
		return Reply{}, ErrNotBuilt
	}
	loc, err := ledger.LoadZone(in.Zone.Zone)
	if err != nil {
		return Reply{}, err
	}
	p := periodOf(at, loc)
	credit, err := c.credit(ctx, customer, meters, p, in, at)
	if err != nil {
		return Reply{}, err
	}
	r := Reply{Entitlements: make([]Entitlement, 0, len(meters))}
	for _, meter := range meters {
		var s schema.UsageState // none: no usage in the period yet
		if i := slices.IndexFunc(in.States, func(s schema.UsageState) bool { return s.Meter == meter }); i >= 0 {
			s = in.States[i]
		}
		e, err := c.entitlement(customer, meter, p, s, in, credit)
		if err != nil {
			return Reply{}, err
		}
		r.Entitlements = append(r.Entitlements, e)
	}
	if spend {
		sp, err := spendOf(c.Policy, customer, p, in)
		if err != nil {
			return Reply{}, err
		}
		r.Spend = &sp
	}
	return r, nil
}

// period is the month a check answers for, in the usage state's zone, as
// every answer of one reply writes it.
type period struct {
	start, end, asOf string       // RFC 3339
	firstDay, day    pricing.Date // the month's first day, and the instant's
}

func periodOf(at time.Time, loc *time.Location) period {
	ms := at.UnixMilli()
	start, end := ledger.MonthOf(ms, loc)
	return period{start: time.UnixMilli(start).In(loc).Format(time.RFC3339), end: time.UnixMilli(end).In(loc).Format(time.RFC3339),
		asOf: at.UTC().Format(time.RFC3339Nano), firstDay: Day(start, loc), day: Day(ms, loc)}
}

// entitlement is the answer for one meter: s is its usage state in the
// period (zero: no usage yet), credit the customer's credit (nil unless a
// meter asked has a limit of kind credit).
func (c *Checker) entitlement(customer, meter string, p period, s schema.UsageState, in schema.CheckReads, credit *CreditCheck) (Entitlement, error) {
	e := Entitlement{Customer: customer, Meter: meter, Allowed: true, PeriodStart: p.start, PeriodEnd: p.end, AsOf: p.asOf,
		LastRowID: s.LastRowID}
	if s.Used != "" {
		var err error
		if e.Used, err = ledger.ParseTotal(s.Used); err != nil {
			return Entitlement{}, fmt.Errorf("usage state %s/%s: used %q: %w", customer, meter, s.Used, err)
		}
	}
	l, ok := c.Policy.Resolve(customer, meter, p.day, in.Assignments, in.LimitOverrides)
	switch {
	case ok && l.Kind == LimitCredit:
		e.Kind, e.Credit, e.Allowed = l.Kind, credit, credit.Allowed()
	case ok:
		v, rem := l.Value, l.Remaining(e.Used)
		e.Limit, e.Remaining, e.Kind, e.Allowed = &v, &rem, l.Kind, l.Allowed(e.Used)
		e.Source = limitJSON(l)
	}
	return e, nil
}

// CreditReader reads what a check of a credit limit needs beside its
// CheckReads (*schema.DB).
type CreditReader interface {
	CreditReads(ctx context.Context, customer string, at int64) (schema.CreditReads, error)
}

// credit is customer's credit at the instant at, drawn by the month of p,
// when one of meters has a limit of kind credit (nil otherwise): one more
// group of reads, the month's usage state and the credit ledger, made only
// for such a check.
func (c *Checker) credit(ctx context.Context, customer string, meters []string, p period, in schema.CheckReads, at time.Time) (*CreditCheck, error) {
	if !slices.ContainsFunc(meters, func(m string) bool {
		l, ok := c.Policy.Resolve(customer, m, p.day, in.Assignments, in.LimitOverrides)
		return ok && l.Kind == LimitCredit
	}) {
		return nil, nil
	}
	v := c.Policy.creditVersion(customer, p.firstDay, p.day, in.Assignments)
	if v == nil {
		return nil, fmt.Errorf("credit limit of %s: no plan version", customer) // a credit limit comes from a version
	}
	cr, ok := c.DB.(CreditReader)
	if !ok {
		return nil, errors.New("credit limit: this checker cannot read the credit ledger")
	}
	reads, err := cr.CreditReads(ctx, customer, at.UnixMilli())
	if errors.Is(err, schema.ErrNoCredits) {
		reads, err = schema.CreditReads{}, nil // a database from before credits (read-only): none
	}
	if err != nil {
		return nil, err
	}
	return creditOf(v, customer, reads, at.UnixMilli())
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
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
