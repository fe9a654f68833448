package config

import (
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
)

// Defaults of a usage mapping's event-time window (usage[].max_future and
// usage[].max_past, docs/configuration.md). They refuse only times that
// cannot be right for any business: a week ahead of the receipt, or more
// than ten years behind it (a clock at zero, a year typed wrong, a
// timestamp in the wrong unit). They are loose on purpose: a refused event
// bills nothing until it is replayed, hookledger bills late usage on the
// next invoice however late it comes, and a backfill or a reconcile brings
// old events legitimately. Tighter bounds are billing policy, the
// operator's to state (Stripe refuses meter events more than 5 minutes
// ahead or 35 days old: a meter pushed to Stripe wants max_future: 5m and
// max_past: 35d).
const (
	DefaultMaxFuture = 7 * 24 * time.Hour
	DefaultMaxPast   = 3650 * 24 * time.Hour
)

// BoundOff turns a bound of the window off.
const BoundOff = "off"

// resolveWindow parses a mapping's max_future or max_past: a positive
// duration, "off", or unset for def. Zero is refused rather than read as
// "off" or as "exactly the receipt time": either reading would surprise
// someone, and turning the check off should be written down.
func resolveWindow(b *ledger.Bound, def time.Duration) error {
	switch b.Text {
	case "":
		b.Max = def
		return nil
	case BoundOff:
		b.Max = 0
		return nil
	}
	d, err := ParseDuration(b.Text)
	switch {
	case err != nil:
		return fmt.Errorf("%v, or off", err)
	case d <= 0:
		return fmt.Errorf("%q: want a positive duration (e.g. 5m, 35d), or off to accept any event time", b.Text)
	}
	b.Max = d
	return nil
}
