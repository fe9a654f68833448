package entitle

import (
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// StateCache keeps the usage state the writer's batches read, from one
// batch to the next, so a batch reads a customer's month from the database
// only the first time (serve's writer on SQLite: the read was an eighth of
// its CPU per delivery with the deliveries spread over 100 customers). It
// holds only what committed: a batch's totals enter it after its COMMIT
// (Tracker.Committed). It is for a database the writer alone changes
// between its batches; Begin, with SQLite's data_version, forgets
// everything when another connection (another hookledger process: a
// command's writer) committed since.
type StateCache struct {
	version int64
	known   bool // version was read
	zone    *cachedZone
	states  map[ledger.StateKey]cachedState
}

type cachedZone struct {
	built bool
	loc   *time.Location
}

type cachedState struct {
	row  schema.UsageState
	used ledger.Total
}

// maxCachedStates bounds the cache: a month of 30,000 customers' three
// meters (a few MB). Past it, it starts again empty.
const maxCachedStates = 100_000

// NewStateCache returns an empty cache.
func NewStateCache() *StateCache {
	return &StateCache{states: map[ledger.StateKey]cachedState{}}
}

// Begin starts a batch at the database's data version: a version other
// than the last batch's means another connection committed, and everything
// kept may be stale.
func (c *StateCache) Begin(version int64) {
	if !c.known || version != c.version {
		c.forget()
	}
	c.version, c.known = version, true
}

func (c *StateCache) forget() {
	c.zone = nil
	clear(c.states)
}
