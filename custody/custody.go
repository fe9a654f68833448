// Package custody is the one write path: every authenticated event (a webhook,
// a reconciled event, a replay) becomes a Delivery applied by the one Writer,
// which commits in batches (group commit) and, in ACK-after-replica mode,
// releases replies only once the replica holds them.
package custody

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Status is a receipt's status: what applying its event did.
type Status string

// Receipt statuses.
const (
	StatusApplied Status = "applied" // usage rows written
	StatusIgnored Status = "ignored" // no mapping for the event type
	StatusFailed  Status = "failed"  // a mapping matched but the payload did not fit; kept for replay
)

// Outcome is what one delivery attempt did to the receipts.
type Outcome string

// Attempt outcomes.
const (
	OutcomeInserted        Outcome = "inserted"
	OutcomeDuplicate       Outcome = "duplicate"
	OutcomePayloadMismatch Outcome = "payload_mismatch" // same event id, different body
)

// Source is how an event reached custody.
type Source string

// Receipt sources.
const (
	SourceWebhook   Source = "webhook"
	SourceReconcile Source = "reconcile"
	SourceReplay    Source = "replay"
	// SourceAPI is an event of the first-party ingest API (POST /v1/events),
	// authenticated by an API key rather than a provider's signature.
	SourceAPI Source = "api"
	// SourceAmend is an event an operator amended (correct.go): a corrected
	// body under an id derived from the event it replaces, which is voided
	// in the same transaction.
	SourceAmend Source = "amend"
)

// Delivery is an authenticated event plus the attempt that carried it. It is
// the one apply path: webhooks, reconciliation and replays all submit one.
type Delivery struct {
	Provider         string
	EventID          string
	EventType        string
	Body             []byte
	BodySHA256       []byte
	SignatureHeaders string // the headers needed to re-verify Body later
	Source           Source
	HandlerVersion   string
	ReceivedAt       time.Time

	// The mapping outcome is computed before the writer, off the write path.
	Rows   []ledger.UsageRow
	Status Status
	Error  string
	// Destinations are where the event is forwarded if it is new (outbox.go;
	// set by the writer's Router when Submit is called, unless already set).
	Destinations []string

	Attempt Attempt

	// Ref is what the delivery's usage rows name as their origin: the
	// amended event (event:PROVIDER/EVENT_ID) for an amendment, else empty.
	Ref string
	// mapAs is the source whose mapping defaults Classify uses, when it is
	// not Source (an amendment maps as the event it amends).
	mapAs Source

	// Outcome is set by the writer: inserted, duplicate or payload_mismatch.
	Outcome Outcome
	// StoredStatus is the receipt's status after the write (for a duplicate,
	// the status of the original).
	StoredStatus Status

	ageMS int64 // Attempt.SignatureAge in ms, for the stored attempt to point at
}

// Attempt describes one delivery of an event.
type Attempt struct {
	RemoteAddr   string
	UserAgent    string
	RequestID    string
	SignatureAge *time.Duration // nil when the scheme signs no timestamp
	StatusCode   int
}

// Apply inserts the receipt, which keeps the attempt that inserted it; only
// if it is new does it write the usage rows (and outbox messages). A
// duplicate writes one delivery_attempts row, and nothing else. The unique
// key (provider, event_id) decides, inside the transaction, so retries and
// racing deliveries can never apply an event twice.
func (d *Delivery) Apply(ctx context.Context, tx *Tx) error {
	d.clean()
	received := d.ReceivedAt.UnixMilli()
	head, err := tx.chainHead(ctx)
	if err != nil {
		return err
	}
	// The receipt is linked before the insert knows whether it is new; the
	// chain moves only if it is.
	link := ledger.ReceiptLink{Provider: d.Provider, EventID: d.EventID, EventType: d.EventType, BodySHA256: d.BodySHA256,
		Status: string(d.Status), Source: string(d.Source), ReceivedAt: received}
	head.Receipts.Next(&link)
	// The attempt is built before the insert: a new receipt stores it in its
	// own row (its outcome is inserted), a duplicate as a delivery_attempts
	// row of its own.
	a := schema.Attempt{Provider: d.Provider, EventID: d.EventID, ReceivedAt: received, RemoteAddr: d.Attempt.RemoteAddr,
		UserAgent: d.Attempt.UserAgent, RequestID: d.Attempt.RequestID, BodySHA256: d.BodySHA256,
		SignatureHeaders: d.SignatureHeaders, Outcome: string(OutcomeInserted), StatusCode: d.Attempt.StatusCode}
	if d.Attempt.SignatureAge != nil {
		// A field of d, already on the heap: pointing at a local would move
		// it there, one allocation per delivery.
		d.ageMS = d.Attempt.SignatureAge.Milliseconds()
		a.SignatureAgeMS = &d.ageMS
	}
	// The unique key, not a prior read, tells a new event from a duplicate:
	// the insert does nothing when (provider, event_id) is already stored.
	// Plain strings throughout (link's, not the Status and Source types):
	// database/sql converts a named string type by reflection, one
	// allocation each.
	inserted, err := tx.b.InsertReceipt(ctx, schema.Receipt{ID: link.ID, Provider: d.Provider, EventID: d.EventID,
		EventType: d.EventType, Body: d.Body, BodySHA256: d.BodySHA256, SignatureHeaders: d.SignatureHeaders,
		Status: link.Status, Error: d.Error, HandlerVersion: d.HandlerVersion, Source: link.Source,
		ReceivedAt: received, ProcessedAt: tx.now, PrevHash: link.PrevHash, RowHash: link.RowHash}, a)
	if err != nil {
		return fmt.Errorf("insert receipt %s/%s: %w", d.Provider, d.EventID, err)
	}
	if inserted {
		head.Receipts.Advance(&link)
		d.Outcome, d.StoredStatus = OutcomeInserted, d.Status
		if tx.hook != nil {
			if err := tx.hook(d); err != nil {
				return err
			}
		}
		if err := d.appendRows(ctx, tx, link.ID); err != nil {
			return err
		}
		if tx.receipt != nil {
			if err := tx.receipt(ctx, tx, d, link.ID); err != nil {
				return err
			}
		}
		return d.insertOutbox(ctx, tx, link.ID)
	}
	stored, status, err := tx.b.StoredReceipt(ctx, d.Provider, d.EventID)
	if err != nil {
		return fmt.Errorf("read stored receipt %s/%s: %w", d.Provider, d.EventID, err)
	}
	d.Outcome, d.StoredStatus = OutcomeDuplicate, Status(status)
	if !bytes.Equal(stored, d.BodySHA256) {
		d.Outcome = OutcomePayloadMismatch
	}
	a.Outcome = string(d.Outcome)
	if err := tx.b.InsertAttempt(ctx, a); err != nil {
		return fmt.Errorf("insert delivery attempt %s/%s: %w", d.Provider, d.EventID, err)
	}
	return nil
}

// appendRows appends the event's usage rows, each keyed by the receipt that
// applies them (receiptID) and its meter: a receipt charges a meter once.
func (d *Delivery) appendRows(ctx context.Context, tx *Tx, receiptID int64) error {
	for _, u := range d.Rows {
		r := ledger.Row{
			Kind:       ledger.KindUsage,
			Provider:   d.Provider,
			EventID:    d.EventID,
			Customer:   u.Customer,
			Meter:      u.Meter,
			Quantity:   u.Quantity,
			Properties: u.Properties,
			Ref:        d.Ref,
			OccurredAt: u.OccurredAt.UnixMilli(),
			RecordedAt: tx.now,
			ReceiptID:  receiptID,
		}
		if err := tx.AppendEvent(ctx, &r, d.Body); err != nil {
			return err
		}
	}
	return nil
}

// Classify runs the usage mapping and records its verdict on d. An API
// event's own fields fill what a mapping's paths leave out (see
// ledger.APIDefaults): its subject is the customer, its time the occurred_at.
func (d *Delivery) Classify(m *ledger.Mapper) {
	def := ledger.Defaults{OccurredAt: d.ReceivedAt}
	if d.Source == SourceAPI || d.mapAs == SourceAPI {
		def = ledger.APIDefaults(d.Body, d.ReceivedAt)
	}
	rows, matched, err := m.MapWith(d.Provider, d.EventType, d.Body, def)
	switch {
	case err != nil:
		d.Status, d.Error, d.Rows = StatusFailed, err.Error(), nil
	case !matched:
		d.Status, d.Rows = StatusIgnored, nil
	default:
		d.Status, d.Rows = StatusApplied, rows
	}
}

// HandlerVersion is what a receipt records as the code that applied it: the
// binary's version and the mapping's, so a replay after a mapping change is
// told apart from the first application.
func HandlerVersion(build string, m *ledger.Mapper) string {
	return "hookledger/" + build + "+" + m.Version()
}
