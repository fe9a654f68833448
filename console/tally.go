package console

import (
	"sync"
	"time"
)

// TallyMinutes is how far back a Tally remembers: a day of minutes, the
// overview's longest window.
const TallyMinutes = 24 * 60

// Tally counts deliveries per minute and outcome in memory, for what the
// overview cannot read from the database: a rejected request (a bad
// signature, an unknown provider, a body too large) writes nothing to the
// database by design, and a duplicate is stored only as a delivery attempt,
// a table with no index on time. So these two series start when serve
// starts and are lost when it stops; the Prometheus counters
// hookledger_deliveries_total (which survive in Prometheus) are the
// record to keep. Inserted and failed events come from the receipts table.
type Tally struct {
	mu      sync.Mutex
	started time.Time
	minutes [TallyMinutes]tallyMinute
}

type tallyMinute struct {
	minute              int64 // unix minute this slot holds
	duplicate, rejected int64
}

// NewTally starts counting at now.
func NewTally(now time.Time) *Tally { return &Tally{started: now} }

// Started is when counting began.
func (t *Tally) Started() time.Time { return t.started }

// Observe counts one delivery with its outcome (receiver.Observation's):
// duplicate and payload_mismatch as duplicates, rejected as rejected;
// inserted ones are in the database and are not counted here.
func (t *Tally) Observe(outcome string, at time.Time) {
	var dup, rej int64
	switch outcome {
	case "duplicate", "payload_mismatch":
		dup = 1
	case "rejected":
		rej = 1
	default:
		return
	}
	m := at.Unix() / 60
	t.mu.Lock()
	s := &t.minutes[m%TallyMinutes]
	if s.minute != m {
		*s = tallyMinute{minute: m}
	}
	s.duplicate += dup
	s.rejected += rej
	t.mu.Unlock()
}

// counts returns the duplicate and rejected count of unix minute m.
func (t *Tally) counts(m int64) (dup, rej int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.minutes[m%TallyMinutes]
	if s.minute != m {
		return 0, 0
	}
	return s.duplicate, s.rejected
}
