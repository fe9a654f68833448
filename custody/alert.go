package custody

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/schema"
)

// SourceAlert is the source of an event hookledger raised itself: a
// threshold alert (provider hookledger, type usage.threshold_crossed).
const SourceAlert Source = "alert"

// alertVersion is what an alert's receipt records as its handler.
const alertVersion = "hookledger/alerts"

// alert records crossing c (threshold_crossings' unique key makes it once
// per threshold and period) and, if it is new, raises its alert (raise).
func (b *Tx) alert(ctx context.Context, c entitle.Crossing) error {
	limit := ""
	if c.HasLimit {
		limit = c.Limit.Value.String()
	}
	return b.raise(ctx, entitle.AlertEventID(c.Customer, c.Meter, c.PeriodStart, c.Threshold.Spelling), entitle.AlertEventType,
		func(receiptID int64) (bool, []byte, error) {
			inserted, err := b.b.InsertCrossing(ctx, schema.Crossing{Customer: c.Customer, Meter: c.Meter, PeriodStart: c.PeriodStart,
				PeriodEnd: c.PeriodEnd, Threshold: c.Threshold.Spelling, ThresholdValue: c.Value.String(), Limit: limit,
				Used: c.Used.String(), RowID: c.Row.ID, ReceiptID: receiptID, CrossedAt: b.now})
			return inserted, entitle.AlertBody(c, time.UnixMilli(b.now)), err
		})
}

// spendAlert records spend crossing c (spend_crossings' unique key makes
// it once per threshold and period) and, if it is new, raises its alert
// (raise), of type spend.threshold_crossed.
func (b *Tx) spendAlert(ctx context.Context, c entitle.SpendCrossing) error {
	return b.raise(ctx, entitle.SpendAlertEventID(c.Customer, c.PeriodStart, c.Threshold.Spelling), entitle.SpendAlertEventType,
		func(receiptID int64) (bool, []byte, error) {
			rec, err := entitle.SpendRecord(c, receiptID, b.now)
			if err != nil {
				return false, nil, err
			}
			inserted, err := b.b.InsertSpendCrossing(ctx, rec)
			return inserted, entitle.SpendAlertBody(c, time.UnixMilli(b.now)), err
		})
}

// creditAlert records credit crossing c (credit_crossings' unique key makes
// it once per grant and threshold) and, if it is new, raises its alert
// (raise), of type credits.balance_low or credits.depleted.
func (b *Tx) creditAlert(ctx context.Context, c entitle.CreditCrossing) error {
	return b.raise(ctx, entitle.CreditAlertEventID(c.Grant.Grant.ID, c.Threshold), c.Type(),
		func(receiptID int64) (bool, []byte, error) {
			inserted, err := b.b.InsertCreditCrossing(ctx, entitle.CreditRecord(c, receiptID, b.now))
			return inserted, entitle.CreditAlertBody(c, time.UnixMilli(b.now)), err
		})
}

// raise records a crossing with record, given the id its alert's receipt
// will have, and, if the crossing is new, raises the alert record returns
// the body of: a receipt of provider hookledger applied through the one
// apply path, so it gets its outbox rows (forwarded at least once under one
// webhook-id) in this same transaction, the one that wrote the row that
// crossed the threshold. Its status is ignored, as for any event no usage
// mapping covers: it writes no ledger rows.
func (b *Tx) raise(ctx context.Context, eventID, eventType string, record func(receiptID int64) (inserted bool, body []byte, err error)) error {
	head, err := b.chainHead(ctx)
	if err != nil {
		return err
	}
	inserted, body, err := record(head.Receipts.LastID + 1) // the id Apply links the alert's receipt with
	if err != nil || !inserted {
		return err // not inserted: it fired already (the tracker read the crossings, so only a racing bug gets here)
	}
	sum := sha256.Sum256(body)
	d := &Delivery{Provider: entitle.AlertProvider, EventID: eventID, EventType: eventType, Body: body, BodySHA256: sum[:],
		Source: SourceAlert, HandlerVersion: alertVersion, ReceivedAt: time.UnixMilli(b.now), Status: StatusIgnored}
	if err := d.Apply(ctx, b); err != nil {
		return fmt.Errorf("raise alert %s: %w", d.EventID, err)
	}
	if d.Outcome != OutcomeInserted {
		return fmt.Errorf("raise alert %s: its receipt exists without its crossing (the crossings' table was changed)", d.EventID)
	}
	return nil
}

// BuildUsageState builds the usage state from the ledger unless it is
// built already with months in zone (entitle.NeedsBuild): serve does this
// once it has opened the writer and before it takes requests. built says
// whether it had to.
func (w *Writer) BuildUsageState(ctx context.Context, zone string) (built bool, err error) {
	need, err := entitle.NeedsBuild(ctx, w.db, zone)
	if err != nil || !need {
		return false, err
	}
	err = w.Submit(ctx, OpFunc(func(ctx context.Context, tx *Tx) error {
		// Asked again under the write lock: another process may have built it.
		z, ok, err := tx.b.StateZone(ctx)
		if err != nil || (ok && z.Zone == zone) {
			return err
		}
		return tx.RebuildUsageState(ctx, zone)
	}))
	if errors.Is(err, ErrNotReplicated) {
		// Committed: the state is derived from the ledger and acknowledges
		// nothing to anyone, so serve need not wait for a replica that is
		// down (ACK-after-replica mode) to take requests.
		err = nil
	}
	return err == nil, err
}
