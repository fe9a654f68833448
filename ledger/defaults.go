package ledger

import (
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookledger/hookledger/payload"
)

// Defaults are what a mapping uses where its path finds nothing in the event.
type Defaults struct {
	// Customer, when set, is the customer of a row whose customer path is
	// missing (or null) in the event.
	Customer string
	// OccurredAt is the event time of a row whose occurred_at is not mapped
	// or missing: the receipt time for a webhook.
	OccurredAt time.Time
	// ReceivedAt is when the event was received (its receipt's
	// received_at), which a mapping's max_future and max_past are measured
	// from; zero means OccurredAt, which is the receipt time for a webhook.
	ReceivedAt time.Time
}

// received is the time a mapping's window is measured from.
func (d Defaults) received() time.Time {
	if d.ReceivedAt.IsZero() {
		return d.OccurredAt
	}
	return d.ReceivedAt
}

// APIDefaults are the defaults of an event of the ingest API (CloudEvents
// attributes, which the generic usage event shares): its "subject" is the
// customer and its "time" (RFC 3339) the occurred_at when the mapping's paths
// find nothing; without a time, the receipt time. The ingest API refuses an
// event whose time does not parse, so a stored one always does; should it
// not, the receipt time is used.
func APIDefaults(body []byte, receivedAt time.Time) Defaults {
	d := Defaults{OccurredAt: receivedAt, ReceivedAt: receivedAt}
	if s := payload.Get(body, "subject"); s.Type == gjson.String && s.Str != "" && CheckIdentifier(s.Str) == nil {
		d.Customer = s.Str
	}
	if t := payload.Get(body, "time"); t.Type == gjson.String {
		if at, err := time.Parse(time.RFC3339Nano, t.Str); err == nil {
			d.OccurredAt = at.UTC()
		}
	}
	return d
}
