package stripe

import (
	"fmt"
	"testing"

	"github.com/hookledger/hookledger/schema"
)

// An invoice event's state, invoice, customer (plain or expanded) and the
// periods it bills: each line's, and the invoice's own when it has one.
func TestParseInvoiceEvent(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"invoice.paid","created":1764554600,"data":{"object":{"id":"in_1","object":"invoice",
		"customer":{"id":"cus_1","object":"customer"},"period_start":100,"period_end":200,
		"lines":{"data":[{"period":{"start":100,"end":200}},{"period":{"start":200,"end":300}},{"period":{"start":5,"end":5}}]}}}}`)
	e, ok := ParseInvoiceEvent(EventInvoicePaid, body)
	if !ok || e.State != InvoicePaid || e.StripeEvent != "evt_1" || e.EventCreated != 1764554600 || e.StripeInvoice != "in_1" ||
		e.StripeCustomer != "cus_1" || e.PeriodStart != 100 || e.PeriodEnd != 300 || fmt.Sprint(e.Periods) != "[[100 200] [200 300]]" {
		t.Errorf("parsed %+v", e)
	}
	if _, ok := ParseInvoiceEvent("invoice.created", body); ok {
		t.Error("invoice.created parsed as a state")
	}
}

// The state is the latest event's by Stripe's time, whatever order they
// arrived in; one second's events rank invoiced, payment_failed, paid.
func TestInvoiceState(t *testing.T) {
	ev := func(state string, created int64) schema.StripeInvoiceState {
		return schema.StripeInvoiceState{State: state, EventCreated: created}
	}
	for _, c := range []struct {
		events []schema.StripeInvoiceState
		pushed bool
		want   string
	}{
		{nil, false, ""},
		{nil, true, InvoicePushed},
		{[]schema.StripeInvoiceState{ev(InvoiceInvoiced, 1)}, true, InvoiceInvoiced},
		{[]schema.StripeInvoiceState{ev(InvoiceInvoiced, 1), ev(InvoicePaymentFailed, 2), ev(InvoicePaid, 3)}, true, InvoicePaid},
		{[]schema.StripeInvoiceState{ev(InvoicePaid, 1), ev(InvoiceInvoiced, 1)}, true, InvoicePaid},
		{[]schema.StripeInvoiceState{ev(InvoiceInvoiced, 1), ev(InvoicePaymentFailed, 5)}, false, InvoicePaymentFailed},
	} {
		if got := InvoiceState(c.events, c.pushed); got != c.want {
			t.Errorf("%+v pushed %v: %q, want %q", c.events, c.pushed, got, c.want)
		}
	}
}
