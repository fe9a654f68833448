// Package reconcile closes the gaps webhooks leave: it lists a provider's
// events over a bounded window, inserts the ones hookledger never received
// through the same idempotent apply path as a webhook (custody.Delivery),
// or asks the provider to deliver them again, and keeps a checkpoint so a
// failed run resumes where it stopped. It also holds retention (prune) and
// the custody audit, the other jobs that compare stored receipts over time.
package reconcile

import (
	"context"
	"time"
)

// Source lists a provider's events. Backends: StripeSource (the events API),
// GitHubSource (webhook deliveries) and FileSource (JSONL).
type Source interface {
	// Name identifies the source in delivery attempts ("stripe-api").
	Name() string
	// List returns one page of the events created in w, starting at cursor
	// ("" for the first page). Page.Next is "" on the last page.
	List(ctx context.Context, w Window, cursor string) (Page, error)
}

// Redeliverer is a Source that cannot hand over event bodies but can ask the
// provider to deliver an event again (GitHub). Its events have a nil Body.
type Redeliverer interface {
	Redeliver(ctx context.Context, e Event) (statusCode int, err error)
}

// Window is the half-open-ended range of event creation times a run covers:
// From <= created <= To.
type Window struct {
	From, To time.Time
}

// Page is one page of events.
type Page struct {
	Events []Event
	// Next is the cursor of the following page; "" when this page is the last.
	Next string
	// RequestID is the provider's id for the request that returned the page,
	// kept on the delivery attempts of the events it inserts.
	RequestID string
}

// Event is one provider event.
type Event struct {
	ID      string // the dedupe id: what the webhook would carry
	Type    string
	Created time.Time
	// Body is the raw event JSON as the provider returned it; nil when the
	// source can only redeliver (GitHub).
	Body []byte
	// DeliveryID is the provider's id of a delivery of this event (GitHub),
	// used to ask for a redelivery.
	DeliveryID string
}
