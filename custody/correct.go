package custody

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Corrections: a void and an amendment are Ops, so they run in the writer's
// transaction like every delivery. What they read (is the event voided? its
// rows, its receipt) and what they append commit together under the write
// lock: racing voids, a void racing a redelivery, or a bulk run interrupted
// and started again can never void an event twice or apply it again.

// VoidEvent voids one applied event (ledger.Void): it appends one void row
// per usage row of the event, through Tx.Append like every ledger row.
type VoidEvent struct {
	Void   ledger.Void
	Meters ledger.Meters // declared meters: a row of one that cannot be voided is refused

	// Rows are the void rows appended (set by Apply).
	Rows []*ledger.Row
}

// Apply implements Op.
func (v *VoidEvent) Apply(ctx context.Context, tx *Tx) error {
	rows, err := v.Void.Rows(ctx, tx.b, v.Meters, tx.now)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := tx.Append(ctx, r); err != nil {
			return err
		}
	}
	v.Rows = rows
	return nil
}

// ErrBadAmendment wraps what refuses an amendment besides the void's own
// errors: no stored receipt, a corrected body that does not map, an amended
// id already taken.
var ErrBadAmendment = errors.New("invalid amendment")

// AmendEvent voids one applied event and applies a corrected body in its
// place under ledger.AmendedEventID, in one transaction: both or neither.
// The corrected event is a receipt of source amend with the original's type
// and received time (so a mapping without an event-time path puts it where
// the original was); its usage rows name the original (ref
// event:PROVIDER/EVENT_ID), and the trace links the two both ways. It is not
// forwarded: destinations received the original from its sender.
type AmendEvent struct {
	Void ledger.Void // the event amended, and why and by whom
	// The corrected body: Body, else Edit applied to the stored body (read
	// in the transaction; a body retention pruned cannot be edited).
	Body           []byte
	Edit           func(stored []byte) ([]byte, error)
	Mapper         *ledger.Mapper
	Meters         ledger.Meters
	HandlerVersion string

	// Set by Apply: the voids, and the corrected event's delivery.
	Voids   []*ledger.Row
	Amended *Delivery
}

// Apply implements Op.
func (a *AmendEvent) Apply(ctx context.Context, tx *Tx) error {
	p, id := a.Void.Provider, a.Void.EventID
	rc, err := tx.b.GetReceipt(ctx, p, id)
	if errors.Is(err, schema.ErrNotFound) {
		return fmt.Errorf("%w: no event %s/%s is stored", ErrBadAmendment, p, id)
	}
	if err != nil {
		return fmt.Errorf("read receipt %s/%s: %w", p, id, err)
	}
	d, err := a.Corrected(rc)
	if err != nil {
		return err
	}
	v := &VoidEvent{Void: a.Void, Meters: a.Meters}
	if err := v.Apply(ctx, tx); err != nil {
		return err
	}
	if err := d.Apply(ctx, tx); err != nil {
		return err
	}
	if d.Outcome != OutcomeInserted {
		return fmt.Errorf("%w: %s/%s is already stored: the amended id is taken", ErrBadAmendment, p, d.EventID)
	}
	a.Voids, a.Amended = v.Rows, d
	return nil
}

// Corrected is the delivery of the corrected event, mapped with a.Mapper:
// what Apply writes, and what a dry run shows. A body that does not map to
// usage rows is refused (to take an event out, void it).
func (a *AmendEvent) Corrected(rc schema.Receipt) (*Delivery, error) {
	p, id := a.Void.Provider, a.Void.EventID
	amended := ledger.AmendedEventID(id)
	if err := ledger.CheckIdentifier(amended); err != nil {
		return nil, fmt.Errorf("%w: amended id %q: %v", ErrBadAmendment, amended, err)
	}
	body := a.Body
	if a.Edit != nil {
		if rc.Body == nil {
			return nil, fmt.Errorf("%w: the body of %s/%s was pruned: give the corrected body whole", ErrBadAmendment, p, id)
		}
		var err error
		if body, err = a.Edit(rc.Body); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadAmendment, err)
		}
	}
	sum := sha256.Sum256(body)
	d := &Delivery{Provider: p, EventID: amended, EventType: rc.EventType, Body: body, BodySHA256: sum[:],
		Source: SourceAmend, HandlerVersion: a.HandlerVersion, ReceivedAt: time.UnixMilli(rc.ReceivedAt),
		Ref: "event:" + p + "/" + id, mapAs: Source(rc.Source), Destinations: noDestinations,
		// No sender delivered it: its attempt says who made it.
		Attempt: Attempt{UserAgent: "hookledger amend by " + a.Void.Actor}}
	d.Classify(a.Mapper)
	switch d.Status {
	case StatusFailed:
		return nil, fmt.Errorf("%w: the corrected body of %s/%s does not map: %s", ErrBadAmendment, p, id, d.Error)
	case StatusIgnored:
		return nil, fmt.Errorf("%w: no mapping covers %s events of %s: to take the event out, void it", ErrBadAmendment, rc.EventType, p)
	}
	return d, nil
}
