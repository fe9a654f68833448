package custody

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
)

// Router names the destinations an event is forwarded to (config
// destinations[].events); nil forwards nothing.
type Router func(provider, eventType string) []string

// MessageID is the stable id of the message forwarding provider's event
// eventID to destination: the webhook-id an application dedupes on. It is
// derived from the event, not from a row id, so it stays the same on every
// attempt, after a retry, and even for an event received again after the
// database was restored from a replica that had lost it.
func MessageID(provider, eventID, destination string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s", provider, eventID, destination)
	return "msg_" + msgEncoding.EncodeToString(h.Sum(nil)[:20])
}

var msgEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// route decides, in the submitter's goroutine (before the writer, like the
// mapping), where a delivery's event is forwarded if it turns out to be new.
// Every source of deliveries (webhook, reconcile, API) submits through the
// writer, so none can skip it.
func (w *Writer) route(op Op) {
	if d, ok := op.(*Delivery); ok {
		d.route(w.Route)
	}
}

// noDestinations marks a delivery as routed to none, so Apply does not ask
// again.
var noDestinations = []string{}

// route sets Destinations unless they are set already. Apply calls it too, in
// the writer goroutine, for a Delivery that reached it without Submit (one
// applied inside another op): no delivery can skip its outbox rows.
func (d *Delivery) route(r Router) {
	if r == nil || d.Destinations != nil {
		return
	}
	if d.Destinations = r(d.Provider, d.EventType); d.Destinations == nil {
		d.Destinations = noDestinations
	}
}

// insertOutbox writes one pending message per destination for the receipt
// just inserted, in the receipt's transaction (invariant 7: what must leave
// hookledger is an outbox row committed with the receipt).
func (d *Delivery) insertOutbox(ctx context.Context, tx *Tx, receiptID int64) error {
	d.route(tx.route)
	for _, dest := range d.Destinations {
		if err := tx.b.InsertOutbox(ctx, receiptID, dest, MessageID(d.Provider, d.EventID, dest), tx.now); err != nil {
			return fmt.Errorf("insert outbox %s/%s for %s: %w", d.Provider, d.EventID, dest, err)
		}
		tx.outboxed = true
	}
	return nil
}
