package stripe

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/payload"
	"github.com/hookledger/hookledger/schema"
)

// Stripe's events about the invoices it makes from the meters (snapshot
// events: data.object is the invoice).
const (
	EventInvoiceFinalized     = "invoice.finalized"
	EventInvoicePaid          = "invoice.paid"
	EventInvoicePaymentFailed = "invoice.payment_failed"
)

// An invoice's states in Stripe, as invoice list, invoice show, the console
// and the admin API name them. Pushed is no event's: a close-mode invoice
// whose lines were pushed and of which Stripe has said nothing yet.
const (
	InvoicePushed        = "pushed"
	InvoiceInvoiced      = "invoiced"
	InvoicePaid          = "paid"
	InvoicePaymentFailed = "payment_failed"
)

// invoiceStates maps the event types to the states they report.
var invoiceStates = map[string]string{
	EventInvoiceFinalized:     InvoiceInvoiced,
	EventInvoicePaid:          InvoicePaid,
	EventInvoicePaymentFailed: InvoicePaymentFailed,
}

// stateRank orders the states of events Stripe stamped in the same second
// (its event times are whole seconds): an invoice is finalized before a
// payment fails, and a payment that succeeds ends it.
var stateRank = map[string]int{InvoiceInvoiced: 1, InvoicePaymentFailed: 2, InvoicePaid: 3}

// InvoiceEvent is what an invoice event says: its state, the Stripe
// invoice and customer, and the periods its lines bill.
type InvoiceEvent struct {
	schema.StripeInvoiceState
	// Periods are [start, end) in unix seconds: each line's period
	// (lines.data[].period; a metered line's is the usage period it
	// bills), and the invoice's own period_start/period_end when they
	// differ (a subscription invoice's look back one period: the usage
	// period too).
	Periods [][2]int64
	// Invoice is the hookledger invoice the Stripe invoice's metadata
	// names (MetaInvoice: one hookledger sent, stripe.invoices), 0 when
	// none.
	Invoice int64
}

// ParseInvoiceEvent reads a Stripe invoice event (ok false: not one).
func ParseInvoiceEvent(eventType string, body []byte) (InvoiceEvent, bool) {
	state, ok := invoiceStates[eventType]
	if !ok {
		return InvoiceEvent{}, false
	}
	inv := payload.Get(body, "data.object")
	customer := inv.Get("customer")
	if customer.IsObject() { // expanded
		customer = customer.Get("id")
	}
	e := InvoiceEvent{StripeInvoiceState: schema.StripeInvoiceState{
		StripeEvent: payload.Get(body, "id").String(), EventType: eventType, State: state,
		EventCreated: payload.Get(body, "created").Int(), StripeInvoice: inv.Get("id").String(), StripeCustomer: customer.String()}}
	add := func(start, end int64) {
		p := [2]int64{start, end}
		if end <= start || slices.Contains(e.Periods, p) {
			return
		}
		e.Periods = append(e.Periods, p)
		if e.PeriodStart == 0 || start < e.PeriodStart {
			e.PeriodStart = start
		}
		e.PeriodEnd = max(e.PeriodEnd, end)
	}
	for _, l := range inv.Get("lines.data").Array() {
		add(l.Get("period.start").Int(), l.Get("period.end").Int())
	}
	add(inv.Get("period_start").Int(), inv.Get("period_end").Int())
	if id, err := strconv.ParseInt(inv.Get("metadata."+MetaInvoice).String(), 10, 64); err == nil && id > 0 {
		e.Invoice = id
	}
	return e, true
}

// linkInvoice appends an invoice event's state to every hookledger invoice
// it bills. A Stripe invoice hookledger sent (stripe.invoices) names its
// invoice in its metadata. Otherwise (Stripe made it from meter events)
// those are the invoices of the customers its Stripe customer maps to
// (customers: identity, or the registry's link, which both link and a path
// read when pushing a close's lines) with a close-mode push whose
// timestamp is in one of its periods, Stripe counting a meter event in the
// invoice line whose period holds it. One that bills none is kept
// unlinked, never dropped.
func linkInvoice(ctx context.Context, tx *custody.Tx, customers string, e InvoiceEvent, receiptID int64) error {
	b := tx.Stripe()
	var ids []int64
	if e.Invoice > 0 {
		ok, err := b.InvoiceExists(ctx, e.Invoice)
		if err != nil {
			return err
		}
		if ok {
			ids = []int64{e.Invoice}
		}
	} else if e.StripeCustomer != "" {
		ours := []string{e.StripeCustomer}
		if customers != config.StripeIdentity {
			var err error
			if ours, err = b.CustomersLinkedTo(ctx, e.StripeCustomer, stripeIDOf); err != nil {
				return err
			}
		}
		seen := map[int64]bool{}
		for _, p := range e.Periods {
			found, err := b.LinePushInvoices(ctx, ours, e.StripeCustomer, p[0], p[1])
			if err != nil {
				return err
			}
			for _, id := range found {
				if !seen[id] {
					seen[id] = true
					ids = append(ids, id)
				}
			}
		}
	}
	if len(ids) == 0 {
		ids = []int64{0}
	}
	for _, id := range ids {
		s := e.StripeInvoiceState
		s.ReceiptID, s.InvoiceID = receiptID, id
		if err := b.InsertStripeInvoiceState(ctx, s, tx.Now()); err != nil {
			return err
		}
	}
	return nil
}

// stripeIDOf is CustomerOf for CustomersLinkedTo: a registry row whose
// external ids do not decode (the registry refuses such rows) links none.
func stripeIDOf(externalIDs string) string {
	id, _ := CustomerOf(externalIDs)
	return id
}

// InvoiceState is the state events (in Stripe's event order) show: the
// latest's, pushed when there is none and the invoice's lines were pushed,
// "" when neither.
func InvoiceState(events []schema.StripeInvoiceState, pushed bool) string {
	var last *schema.StripeInvoiceState
	for i := range events {
		e := &events[i]
		if last == nil || e.EventCreated > last.EventCreated ||
			(e.EventCreated == last.EventCreated && stateRank[e.State] >= stateRank[last.State]) {
			last = e
		}
	}
	switch {
	case last != nil:
		return last.State
	case pushed:
		return InvoicePushed
	}
	return ""
}

// InvoiceStore reads invoices' Stripe states (*schema.DB).
type InvoiceStore interface {
	StripeInvoiceStatesOf(ctx context.Context, ids []int64) (map[int64][]schema.StripeInvoiceState, map[int64]bool, error)
	UnlinkedStripeInvoiceStates(ctx context.Context) ([]schema.StripeInvoiceState, error)
}

// States is the Stripe state of each of invoices ids that has one (see
// InvoiceState).
func States(ctx context.Context, db InvoiceStore, ids []int64) (map[int64]*invoice.StripeInvoice, error) {
	states, pushed, err := db.StripeInvoiceStatesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := map[int64]*invoice.StripeInvoice{}
	for _, id := range ids {
		if s := InvoiceState(states[id], pushed[id]); s != "" {
			events := states[id]
			if events == nil {
				events = []schema.StripeInvoiceState{}
			}
			out[id] = &invoice.StripeInvoice{State: s, Events: events}
		}
	}
	return out, nil
}

// WithStates fills the Stripe state of each of invs that has one: pushed
// in close mode, or billed by a Stripe invoice event.
func WithStates(ctx context.Context, db InvoiceStore, invs []invoice.Invoice) error {
	ids := make([]int64, len(invs))
	for i, inv := range invs {
		ids[i] = inv.ID
	}
	states, err := States(ctx, db, ids)
	if err != nil {
		return err
	}
	for i := range invs {
		invs[i].Stripe = states[invs[i].ID]
	}
	return nil
}

// InvoiceEventText is an invoice event as one line: its state, the Stripe
// invoice and customer, the period it carries and the event.
func InvoiceEventText(e schema.StripeInvoiceState) string {
	s := fmt.Sprintf("%s %s customer %s", e.State, orNone(e.StripeInvoice), orNone(e.StripeCustomer))
	if e.PeriodEnd > 0 {
		s += fmt.Sprintf(" period %s to %s", time.Unix(e.PeriodStart, 0).UTC().Format(time.RFC3339),
			time.Unix(e.PeriodEnd, 0).UTC().Format(time.RFC3339))
	}
	return s + " (" + e.StripeEvent + ")"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
