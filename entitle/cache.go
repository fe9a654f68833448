package entitle

import (
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// StateCache keeps the usage state the writer's batches read, from one
// batch to the next, so a batch reads a customer's month from the database
// only the first time (serve's writer on SQLite: the read was an eighth of
// its CPU per delivery with the deliveries spread over 100 customers), and
// with it what the limit and spend checks read per customer (plan
// assignments, overrides, the thresholds that fired). It holds only what
// committed: a batch's reads and totals enter it after its COMMIT
// (Tracker.Committed). It is for a database the writer alone changes
// between its batches; Begin, with schema.Batch.DataVersion, forgets
// everything when another connection (another hookledger process: a
// command's writer) committed since, or this process wrote the registry.
type StateCache struct {
	version schema.DataVersion
	known   bool // version was read
	zone    *cachedZone
	states  map[ledger.StateKey]cachedState

	plans          map[string][]schema.PlanAssignment   // by customer
	limits         map[[2]string][]schema.LimitOverride // by customer and meter
	spendOverrides map[string][]schema.SpendOverride    // by customer
	spendFired     map[spendKey]map[string]bool
}

type cachedZone struct {
	built bool
	loc   *time.Location
}

type cachedState struct {
	row   schema.UsageState
	used  ledger.Total
	fired map[string]bool // nil: not read
}

// maxCachedStates bounds the cache: a month of 30,000 customers' three
// meters (a few MB). Past it, it starts again empty.
const maxCachedStates = 100_000

// NewStateCache returns an empty cache.
func NewStateCache() *StateCache {
	return &StateCache{states: map[ledger.StateKey]cachedState{}, plans: map[string][]schema.PlanAssignment{},
		limits: map[[2]string][]schema.LimitOverride{}, spendOverrides: map[string][]schema.SpendOverride{},
		spendFired: map[spendKey]map[string]bool{}}
}

// Begin starts a batch at the database's data version: a version other
// than the last batch's means another connection committed, or this
// process wrote the registry, and everything kept may be stale.
func (c *StateCache) Begin(version schema.DataVersion) {
	if !c.known || version != c.version {
		c.forget()
	}
	c.version, c.known = version, true
}

func (c *StateCache) forget() {
	c.zone = nil
	clear(c.states)
	clear(c.plans)
	clear(c.limits)
	clear(c.spendOverrides)
	clear(c.spendFired)
}
