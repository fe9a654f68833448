package stripe

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/payload"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// Push sources.
const (
	SourceUsage      = "usage"
	SourceAdjustment = "adjustment"
	SourceLine       = "line"
)

// Sync decides what the ledger pushes to Stripe: in stream mode the ledger
// rows of a pushed meter, each added to its customer's open push or
// starting one (Row, custody's Pusher), in close mode a push per invoice
// line (Close). Each push is written with its outbox
// message in the transaction that writes what it covers (invariant 7), and
// carries the running remainder of its customer, meter and period: the
// whole numbers pushed add up to the period's ledger total × multiplier,
// rounded once (pricing.Whole).
type Sync struct {
	Meters map[string]ledger.StripeMeter
	// Customers is config.Stripe.Customers: identity, link or a JSON path.
	Customers string
	// Loc is the zone whose calendar months are the periods a stream
	// push's remainder is carried in (invoicing.tz; default UTC).
	Loc *time.Location
	// Invoices, when enabled, sends every closed invoice with money to
	// charge to Stripe as an invoice (CloseInvoices).
	Invoices *config.StripeInvoices

	cache pushCache // the writer's, from one batch to the next (stream.go)
}

// NewSync is the sync cfg configures, or nil when nothing goes to Stripe.
func NewSync(cfg *config.Config) *Sync {
	if cfg.Stripe == nil || (len(cfg.StripeMeters()) == 0 && !cfg.Stripe.InvoicesOn()) {
		return nil
	}
	loc := cfg.Invoicing.Location
	if loc == nil {
		loc = time.UTC
	}
	return &Sync{Meters: cfg.StripeMeters(), Customers: cfg.Stripe.Customers, Loc: loc, Invoices: cfg.Stripe.Invoices}
}

// Pusher is s as custody's Pusher (Begin, stream.go), or nil when no meter
// is pushed in stream mode: then no batch has anything to push.
func (s *Sync) Pusher() custody.Pusher {
	if s == nil {
		return nil
	}
	for _, m := range s.Meters {
		if m.Mode == ledger.StripeStream {
			return s
		}
	}
	return nil
}

// Identifier is a meter event's identifier, derived from what it covers in
// the ledger (never from a row id a restore could give to another event),
// so it is the same on every attempt, after a restart, a replay or a copy
// to PostgreSQL, and Stripe's deduplication recognises a resend: 3 + 32
// characters, within Stripe's 100.
func Identifier(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\x00", len(p), p)
	}
	return "hl_" + idEncoding.EncodeToString(h.Sum(nil)[:20])
}

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Row writes the push of a ledger row of a stream meter, in the row's
// transaction (custody.Pushes). A usage row joins its customer's open push
// or starts one (streamBatch.usage). A correction is a push of its own: an
// adjustment pushes its signed quantity (Stripe sums negative values into
// the meter, and shows a period's negative total as 0); a void of a row
// whose push, of that row alone, was written less than CancelWindow ago
// cancels that push's meter event instead (cancel), and any other void
// pushes its signed quantity, as an adjustment does. A negative adjustment is always the compensating value: a cancel
// takes a whole meter event back, an adjustment can take part of one.
func (sb *streamBatch) Row(ctx context.Context, r *ledger.Row, body []byte) error {
	s, tx := sb.s, sb.tx
	m, ok := s.Meters[r.Meter]
	if !ok || m.Mode != ledger.StripeStream {
		return nil
	}
	source := SourceAdjustment
	if r.Kind == ledger.KindUsage {
		source = SourceUsage
	}
	b := tx.Stripe()
	customer := ""
	switch s.Customers {
	case config.StripeIdentity:
		customer = r.Customer
	case config.StripeLink:
		// Read when sent: a link made after the usage still bills it.
	default:
		if body != nil {
			customer = payload.Get(body, s.Customers).String()
		}
		if customer == "" {
			// An adjustment has no event: the customer's latest push
			// names the Stripe customer.
			var err error
			if customer, err = b.LastStripeCustomer(ctx, r.Customer); err != nil {
				return fmt.Errorf("stripe push of row %d: %w", r.ID, err)
			}
		}
	}
	p := schema.StripePush{
		Source: source, LedgerID: r.ID,
		CustomerID: r.Customer, Meter: r.Meter, EventName: m.EventName, StripeCustomer: customer,
		PeriodStart: monthStart(r.OccurredAt, s.Loc), Timestamp: r.OccurredAt / 1000,
	}
	var err error
	switch {
	case source == SourceUsage:
		err = sb.usage(ctx, p, r, m.Factor())
	default:
		p.Identifier = Identifier(source, r.Provider, r.EventID, r.Meter)
		// A correction reads and writes the database: the batch stores
		// what its open pushes carry first, and reads the period's pushes
		// again after it.
		if err := sb.Flush(ctx); err != nil {
			return fmt.Errorf("stripe push of row %d: %w", r.ID, err)
		}
		sb.forget(keyOf(p))
		done := false
		if r.Kind == ledger.KindVoid {
			done, err = cancel(ctx, b, p, r, m.Factor(), tx.Now())
		}
		if err == nil && !done {
			err = appendPush(ctx, b, p, r.Quantity.Decimal(), m.Factor(), tx.Now())
		}
	}
	if err != nil {
		return fmt.Errorf("stripe push of row %d: %w", r.ID, err)
	}
	tx.Outboxed()
	return nil
}

// Close writes one push per line of a close-mode meter on the invoices a
// close froze, in the close's transaction (invoice.CloseRequest.OnClose).
// Its timestamp is the last second of the line's period, so Stripe counts
// it in that period.
func (s *Sync) Close(ctx context.Context, tx *schema.CloseTx, invoices []invoice.Invoice, now int64) error {
	if s == nil {
		return nil
	}
	for _, inv := range invoices {
		for _, l := range inv.Lines {
			m, ok := s.Meters[l.Meter]
			if !ok || m.Mode != ledger.StripeClose {
				continue
			}
			customer := ""
			if s.Customers == config.StripeIdentity {
				customer = l.Customer
			}
			p := schema.StripePush{
				Identifier: Identifier(SourceLine, fmt.Sprint(inv.ID), fmt.Sprint(l.LineNo), l.Customer, l.Meter, fmt.Sprint(l.PeriodStart)),
				Source:     SourceLine, InvoiceID: inv.ID, LineNo: l.LineNo,
				CustomerID: l.Customer, Meter: l.Meter, EventName: m.EventName, StripeCustomer: customer,
				PeriodStart: l.PeriodStart, Timestamp: (l.PeriodEnd - 1) / 1000,
			}
			if err := appendPush(ctx, tx, p, l.Quantity.Decimal(), m.Factor(), now); err != nil {
				return fmt.Errorf("stripe push of invoice %d line %d: %w", inv.ID, l.LineNo, err)
			}
		}
	}
	return nil
}

// carrier is where a push reads the running totals and is stored: a writer
// batch or a close's transaction.
type carrier interface {
	LastStripePush(ctx context.Context, customer, meter string, periodStart int64) (schema.StripePush, error)
	InsertStripePush(ctx context.Context, p schema.StripePush, destination string, now int64) (int64, error)
}

// appendPush fills p's quantity, value and running totals from the period's
// last push and stores it as a new push.
func appendPush(ctx context.Context, c carrier, p schema.StripePush, q, factor pricing.Decimal, now int64) error {
	last, err := c.LastStripePush(ctx, p.CustomerID, p.Meter, p.PeriodStart)
	if err != nil {
		return err
	}
	if _, err := carry(last, &p, q, factor); err != nil {
		return err
	}
	_, err = c.InsertStripePush(ctx, p, config.StripeDestination, now)
	return err
}

// carry fills p's quantity, value and running totals from the period's
// last push (ID 0: none yet) and returns the value: what the new total,
// rounded once, adds to what was pushed before, so no remainder is lost or
// counted twice.
func carry(last schema.StripePush, p *schema.StripePush, q, factor pricing.Decimal) (value pricing.Decimal, err error) {
	total, pushed := q, pricing.NewDecimal(0, 0)
	if last.ID != 0 {
		prev, err := pricing.ParseDecimal(last.Total)
		if err != nil {
			return value, fmt.Errorf("the last push's total: %w", err)
		}
		if pushed, err = pricing.ParseDecimal(last.Pushed); err != nil {
			return value, fmt.Errorf("the last push's sum: %w", err)
		}
		if total, err = pricing.Add(prev, q); err != nil {
			return value, err
		}
	}
	want, err := pricing.Whole(total, factor)
	if err != nil {
		return value, err
	}
	if value, err = pricing.Sub(want, pushed); err != nil {
		return value, err
	}
	p.Quantity, p.Total, p.Value, p.Pushed = q.String(), total.String(), value.String(), want.String()
	return value, nil
}

// CancelWindow is how long after Stripe receives a meter event a meter
// event adjustment can cancel it.
const CancelWindow = 24 * time.Hour

// cancel writes the push of void r as the cancel of the push of the row it
// voids (r.Ref, row:ID), when that push was written less than CancelWindow
// before now: Stripe received it no earlier, so it is within Stripe's 24
// hours unless the relay sends the cancel after them, and then Stripe
// refuses it and the relay sends the compensating value instead
// (forward's push). done false: no such push, or too old; the void is
// pushed as a compensating value.
//
// The cancel takes the voided push's whole number off Stripe's sum; the
// period's running totals then stand at the ledger's total without the
// row, and what that total rounds to differs from what Stripe keeps by
// the remainder the voided push had carried. That difference is pushed at
// once, as a meter event of its own in the same transaction, so the sum
// Stripe keeps stays the ledger's total rounded once.
func cancel(ctx context.Context, b custody.Stripe, p schema.StripePush, r *ledger.Row, factor pricing.Decimal, now int64) (done bool, err error) {
	var rowID int64
	if _, err := fmt.Sscanf(r.Ref, "row:%d", &rowID); err != nil || rowID <= 0 {
		return false, nil
	}
	orig, ok, err := b.PushOfRow(ctx, rowID)
	if err != nil || !ok || orig.Open || orig.Rows != 1 || now-orig.CreatedAt >= CancelWindow.Milliseconds() {
		return false, err
	}
	origValue, err := pricing.ParseDecimal(orig.Value)
	if err != nil {
		return false, fmt.Errorf("the voided push's value: %w", err)
	}
	last, err := b.LastStripePush(ctx, p.CustomerID, p.Meter, p.PeriodStart)
	if err != nil || last.ID == 0 {
		return false, err
	}
	prevTotal, err := pricing.ParseDecimal(last.Total)
	if err != nil {
		return false, fmt.Errorf("the last push's total: %w", err)
	}
	prevPushed, err := pricing.ParseDecimal(last.Pushed)
	if err != nil {
		return false, fmt.Errorf("the last push's sum: %w", err)
	}
	q := r.Quantity.Decimal()
	total, err := pricing.Add(prevTotal, q)
	if err != nil {
		return false, err
	}
	pushed, err := pricing.Sub(prevPushed, origValue)
	if err != nil {
		return false, err
	}
	taken, err := pricing.Sub(pricing.NewDecimal(0, 0), origValue)
	if err != nil {
		return false, err
	}
	p.Cancels = orig.Identifier
	p.Quantity, p.Total, p.Value, p.Pushed = q.String(), total.String(), taken.String(), pushed.String()
	if _, err := b.InsertStripePush(ctx, p, config.StripeDestination, now); err != nil {
		return false, err
	}
	want, err := pricing.Whole(total, factor)
	if err != nil {
		return false, err
	}
	rest, err := pricing.Sub(want, pushed)
	if err != nil || rest.Sign() == 0 {
		return true, err
	}
	p.Identifier, p.Cancels = Identifier(SourceAdjustment, r.Provider, r.EventID, r.Meter, "rest"), ""
	p.Quantity, p.Value, p.Pushed = "0", rest.String(), want.String()
	_, err = b.InsertStripePush(ctx, p, config.StripeDestination, now)
	return true, err
}

// monthStart is the start (unix ms) of the calendar month in loc holding ms.
func monthStart(ms int64, loc *time.Location) int64 {
	t := time.UnixMilli(ms).In(loc)
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, loc).UnixMilli()
}

// OnClose is s.Close and s.CloseInvoices as a close's hook
// (invoice.CloseRequest.OnClose), nil for a nil s.
func (s *Sync) OnClose(now func() time.Time) func(ctx context.Context, tx *schema.CloseTx, invoices []invoice.Invoice) error {
	if s == nil {
		return nil
	}
	if now == nil {
		now = time.Now
	}
	return func(ctx context.Context, tx *schema.CloseTx, invoices []invoice.Invoice) error {
		at := now().UnixMilli()
		if err := s.Close(ctx, tx, invoices, at); err != nil {
			return err
		}
		return s.CloseInvoices(ctx, tx, invoices, at)
	}
}

// Reach says where a ledger row of meter m, dated occurredAt (unix ms),
// reaches Stripe when it is written at now: the correction commands print
// it. "" when the meter is not pushed.
func Reach(m *ledger.StripeMeter, occurredAt int64, now time.Time) string {
	if m == nil {
		return ""
	}
	at := time.UnixMilli(occurredAt).UTC()
	if m.Mode == ledger.StripeClose {
		return fmt.Sprintf("pushed to Stripe (%s) with the invoice of its month when that is closed; a month already closed bills it as a late line of the next close",
			m.EventName)
	}
	if err := CheckWindow(at.Unix(), now); err != nil {
		return fmt.Sprintf("pushed to Stripe (%s) stamped when it is sent: %s is outside Stripe's window, so Stripe counts it in its period of that day, not the row's (stripe status: CARRIED)",
			m.EventName, at.Format(time.RFC3339))
	}
	return fmt.Sprintf("pushed to Stripe (%s) stamped %s, in Stripe's period holding that time", m.EventName, at.Format(time.RFC3339))
}
