package entitle

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Store is what a Tracker reads and writes inside the writer's batch
// (schema.Batch).
type Store interface {
	StateZone(ctx context.Context) (schema.StateZone, bool, error)
	UsageState(ctx context.Context, customer, meter string, periodStart int64) (schema.UsageState, bool, error)
	SaveUsageState(ctx context.Context, s schema.UsageState) error
	FiredThresholds(ctx context.Context, customer, meter string, periodStart int64) ([]string, error)
	PlanAssignments(ctx context.Context, customer string) ([]schema.PlanAssignment, error)
	LimitOverrides(ctx context.Context, customer, meter string) ([]schema.LimitOverride, error)
	FiredSpendThresholds(ctx context.Context, customer string, periodStart int64) ([]string, error)
	SpendOverrides(ctx context.Context, customer string) ([]schema.SpendOverride, error)
	CreditEntries(ctx context.Context, f schema.CreditFilter) ([]schema.CreditEntry, error)
	FiredCreditThresholds(ctx context.Context, customer string) ([]schema.FiredCredit, error)
}

// Tracker keeps the usage state current inside one write batch: every row
// the batch appends adds to its month's total (Add), and the totals it
// changed are stored once, before COMMIT (Flush). It also decides the
// threshold crossings, there and then, from the same totals (and, priced,
// the spend crossings: Spend, spend.go): the batch holds the write lock, so
// no other writer can move them until it commits.
//
// A Tracker lives for one batch (one pass of it). Undo takes it back to a
// Mark, for an op the writer's isolated pass rolled back to its savepoint.
type Tracker struct {
	b      Store
	policy *Policy

	zoneRead bool
	built    bool // usage_state_zone has its row: the state exists and is kept
	loc      *time.Location

	states  map[ledger.StateKey]*state
	plans   map[string][]schema.PlanAssignment   // by customer
	limits  map[[2]string][]schema.LimitOverride // by customer and meter
	journal []func()                             // undoes each change, latest last
	resets  int

	spendOverrides map[string][]schema.SpendOverride // by customer
	spendFired     map[spendKey]map[string]bool      // read once per customer and month

	credits map[string]*customerCredit // by customer (credits.go); nil until a credit is read

	cache *StateCache // across batches (cache.go); nil: none
}

type state struct {
	row   schema.UsageState
	used  ledger.Total
	dirty bool
	fired map[string]bool // nil until read (only for alerting meters)
}

// NewTracker returns the tracker of one batch; cache, when not nil, holds
// the state earlier batches committed (StateCache.Begin called for this
// batch).
func NewTracker(b Store, p *Policy, cache *StateCache) *Tracker {
	return &Tracker{b: b, policy: p, states: map[ledger.StateKey]*state{}, plans: map[string][]schema.PlanAssignment{},
		limits: map[[2]string][]schema.LimitOverride{}, spendOverrides: map[string][]schema.SpendOverride{},
		spendFired: map[spendKey]map[string]bool{}, cache: cache}
}

// Crossing is a threshold a row crossed: the writer records it (once per
// threshold and period, threshold_crossings' unique key) and raises its alert.
type Crossing struct {
	Customer    string
	Meter       string
	PeriodStart int64
	PeriodEnd   int64
	Zone        string
	Threshold   pricing.Threshold
	Value       ledger.Total // the quantity the threshold stands for
	Limit       Limit
	HasLimit    bool
	Used        ledger.Total // the period's usage after the row
	Row         *ledger.Row
}

// Mark is a point Undo returns to.
func (t *Tracker) Mark() Mark { return Mark{len(t.journal), t.resets} }

// Mark is a point in a Tracker's changes.
type Mark struct{ changes, resets int }

// Undo reverts every change since m. It cannot when the state was rebuilt
// since (Reset): the totals of the batch's earlier ops went with the
// rebuild, so the caller must abandon the batch.
func (t *Tracker) Undo(m Mark) bool {
	if m.resets != t.resets {
		return false
	}
	for i := len(t.journal) - 1; i >= m.changes; i-- {
		t.journal[i]()
	}
	t.journal = t.journal[:m.changes]
	return true
}

// Reset forgets everything read: the state was rebuilt in the batch.
func (t *Tracker) Reset() {
	resets := t.resets + 1
	*t = *NewTracker(t.b, t.policy, t.cache)
	t.resets = resets
}

// Add counts r (just appended to the ledger) in its month's total and
// returns the thresholds it crossed.
//
// The rule (docs/entitlements.md): a threshold fires with the first row of a
// period that increases usage to or past it, unless it already fired in
// that period. It fires once per threshold and period: usage that an
// adjustment (or a void) takes back below it and that then crosses it again
// does not fire it again; the next period re-arms it.
func (t *Tracker) Add(ctx context.Context, r *ledger.Row) ([]Crossing, error) {
	if ok, err := t.ready(ctx); err != nil || !ok {
		return nil, err // not built: serve builds the state from the ledger, this row included
	}
	start, end := ledger.MonthOf(r.OccurredAt, t.loc)
	k := ledger.StateKey{Customer: r.Customer, Meter: r.Meter, PeriodStart: start}
	s, err := t.state(ctx, k, end)
	if err != nil {
		return nil, err
	}
	before, beforeRow, beforeDirty := s.used, s.row.LastRowID, s.dirty
	t.journal = append(t.journal, func() { s.used, s.row.LastRowID, s.dirty = before, beforeRow, beforeDirty })
	s.used, s.row.LastRowID, s.dirty = s.used.Plus(r.Quantity), r.ID, true

	if r.Quantity.Sign() <= 0 || !t.policy.Alerting(r.Meter) {
		return nil, nil
	}
	l, ok, err := t.limit(ctx, r.Customer, r.Meter, Day(r.OccurredAt, t.loc))
	if err != nil || len(l.Thresholds) == 0 {
		return nil, err
	}
	if s.fired == nil {
		fired, err := t.b.FiredThresholds(ctx, k.Customer, k.Meter, k.PeriodStart)
		if err != nil {
			return nil, err
		}
		s.fired = map[string]bool{}
		for _, f := range fired {
			s.fired[f] = true
		}
	}
	var out []Crossing
	for i, th := range l.Thresholds {
		if s.fired[th.Spelling] {
			continue
		}
		v := l.thresholdValue(i)
		if s.used.Cmp(v) < 0 {
			continue
		}
		s.fired[th.Spelling] = true
		t.journal = append(t.journal, func() { delete(s.fired, th.Spelling) })
		out = append(out, Crossing{Customer: k.Customer, Meter: k.Meter, PeriodStart: start, PeriodEnd: end, Zone: t.loc.String(),
			Threshold: th, Value: v, Limit: l, HasLimit: ok, Used: s.used, Row: r})
	}
	return out, nil
}

// ready reads the state's zone once per batch; false: the state is not
// built, so nothing is kept.
func (t *Tracker) ready(ctx context.Context) (bool, error) {
	if !t.zoneRead && t.cache != nil && t.cache.zone != nil && t.resets == 0 {
		t.zoneRead, t.built, t.loc = true, t.cache.zone.built, t.cache.zone.loc
	}
	if !t.zoneRead {
		z, ok, err := t.b.StateZone(ctx)
		if err != nil {
			return false, err
		}
		t.zoneRead, t.built = true, ok
		if ok {
			if t.loc, err = ledger.LoadZone(z.Zone); err != nil {
				return false, fmt.Errorf("usage state zone: %w", err)
			}
		}
	}
	return t.built, nil
}

// state returns k's total, read from usage_state once per batch.
func (t *Tracker) state(ctx context.Context, k ledger.StateKey, end int64) (*state, error) {
	if s := t.states[k]; s != nil {
		return s, nil
	}
	if c, ok := t.cachedState(k); ok {
		s := &state{row: c.row, used: c.used, fired: maps.Clone(c.fired)}
		t.states[k] = s
		t.journal = append(t.journal, func() { delete(t.states, k) })
		return s, nil
	}
	row, found, err := t.b.UsageState(ctx, k.Customer, k.Meter, k.PeriodStart)
	if err != nil {
		return nil, err
	}
	s := &state{row: row}
	if found {
		if s.used, err = ledger.ParseTotal(row.Used); err != nil {
			return nil, fmt.Errorf("usage state %s/%s: used %q: %w", k.Customer, k.Meter, row.Used, err)
		}
	} else {
		s.row = schema.UsageState{Customer: k.Customer, Meter: k.Meter, PeriodStart: k.PeriodStart, PeriodEnd: end}
	}
	t.states[k] = s
	t.journal = append(t.journal, func() { delete(t.states, k) })
	return s, nil
}

// limit resolves the customer's limit on meter, reading the registry and
// the overrides once per batch.
func (t *Tracker) limit(ctx context.Context, customer, meter string, day pricing.Date) (Limit, bool, error) {
	as, err := t.assignments(ctx, customer)
	if err != nil {
		return Limit{}, false, err
	}
	os, err := once(t.limits, t.cached().limits, [2]string{customer, meter}, func() ([]schema.LimitOverride, error) {
		return t.b.LimitOverrides(ctx, customer, meter)
	})
	if err != nil {
		return Limit{}, false, err
	}
	l, found := t.policy.Resolve(customer, meter, day, as, os)
	return l, found, nil
}

// assignments reads the customer's plan assignments once per batch.
func (t *Tracker) assignments(ctx context.Context, customer string) ([]schema.PlanAssignment, error) {
	return once(t.plans, t.cached().plans, customer, func() ([]schema.PlanAssignment, error) {
		return t.b.PlanAssignments(ctx, customer)
	})
}

// once is key's value as this batch read it, else as the batches before
// read it (cached), else read now; the batch keeps it. For what the writer
// reads but never writes: plan assignments and overrides.
func once[K comparable, V any](batch, cached map[K]V, key K, read func() (V, error)) (V, error) {
	if v, ok := batch[key]; ok {
		return v, nil
	}
	v, ok := cached[key]
	if !ok {
		var err error
		if v, err = read(); err != nil {
			return v, err
		}
	}
	batch[key] = v
	return v, nil
}

// cachedState is k's total as the last batches committed it, when the cache
// has it and the state was not rebuilt in this batch.
func (t *Tracker) cachedState(k ledger.StateKey) (cachedState, bool) {
	cs, ok := t.cached().states[k]
	return cs, ok
}

// cached is what earlier batches committed: empty when there is no cache
// or the state was rebuilt in this batch.
func (t *Tracker) cached() *StateCache {
	if t.cache == nil || t.resets > 0 {
		return noCache
	}
	return t.cache
}

// noCache is what a tracker without a cache reads from one: nothing. It is
// never written (Committed writes to Tracker.cache).
var noCache = NewStateCache()

// Committed is called once the batch committed: its totals, and the zone it
// read, are what the database holds now, for the next batches. A batch that
// rebuilt the state leaves the cache empty.
func (t *Tracker) Committed() {
	c := t.cache
	if c == nil {
		return
	}
	if t.resets > 0 || len(c.states)+len(t.states) > maxCachedStates || len(c.spendFired)+len(t.spendFired) > maxCachedStates ||
		len(c.plans)+len(t.plans) > maxCachedStates || len(c.limits)+len(t.limits) > maxCachedStates {
		c.forget()
		return
	}
	if t.zoneRead {
		c.zone = &cachedZone{built: t.built, loc: t.loc}
	}
	for k, s := range t.states {
		c.states[k] = cachedState{row: s.row, used: s.used, fired: s.fired}
	}
	maps.Copy(c.plans, t.plans)
	maps.Copy(c.limits, t.limits)
	maps.Copy(c.spendOverrides, t.spendOverrides)
	maps.Copy(c.spendFired, t.spendFired)
}

// Flush stores every total the batch changed: one write per customer,
// meter and month, however many rows the batch added to it.
func (t *Tracker) Flush(ctx context.Context) error {
	for _, s := range t.states {
		if !s.dirty {
			continue
		}
		s.row.Used = s.used.String()
		if err := t.b.SaveUsageState(ctx, s.row); err != nil {
			return err
		}
		s.dirty = false
	}
	return nil
}

// Fits says whether a row of quantity q of customer's meter at (unix ms)
// stays within the customer's hard limit, read with the batch's own rows:
// used is the period's usage before it, l the limit in force that day (ok
// false: none; a soft limit never refuses; a limit of kind credit is
// CreditFits' to decide, by money, not quantity). It reads what Add reads, so a
// consume decided here and the row it appends see the same totals
// (custody.Consume). ErrNotBuilt: the usage state is not kept yet.
func (t *Tracker) Fits(ctx context.Context, customer, meter string, at int64, q ledger.Total) (fits bool, used ledger.Total, l Limit, ok bool, err error) {
	if built, err := t.ready(ctx); err != nil || !built {
		if err == nil {
			err = ErrNotBuilt
		}
		return false, used, l, false, err
	}
	start, end := ledger.MonthOf(at, t.loc)
	s, err := t.state(ctx, ledger.StateKey{Customer: customer, Meter: meter, PeriodStart: start}, end)
	if err != nil {
		return false, used, l, false, err
	}
	if l, ok, err = t.limit(ctx, customer, meter, Day(at, t.loc)); err != nil {
		return false, s.used, l, false, err
	}
	fits = !ok || l.Kind == pricing.LimitSoft || l.Kind == LimitCredit || s.used.Plus(q).Cmp(l.Value) <= 0
	return fits, s.used, l, ok, nil
}
