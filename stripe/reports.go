package stripe

import (
	"context"
	"regexp"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/payload"
	"github.com/hookledger/hookledger/schema"
)

// Stripe's events about meter events it accepted and then could not use
// (thin events of an event destination: docs/stripe.md).
const (
	EventMeterErrors  = "v1.billing.meter.error_report_triggered"
	EventNoMeterFound = "v1.billing.meter.no_meter_found"
)

// Reports links what Stripe sends back to what the ledger pushed, for a
// new receipt of a provider with the stripe scheme, in the receipt's
// transaction, so it is in custody exactly when its event is. nil when
// nothing is pushed.
//   - Stripe's error reports (the two types above): each sample error
//     becomes a stripe_reports row, linked to the push its meter event
//     identifier names (every push has one, derived from the ledger), or,
//     for a sample without one, to the customer's latest push of the meter
//     its meter_id names (reportPush).
//   - Stripe's invoice events (invoices.go): each becomes a state of the
//     close-mode invoices it bills (linkInvoice).
func Reports(cfg *config.Config) custody.ReceiptHook {
	if cfg.Stripe == nil {
		return nil
	}
	providers := map[string]bool{}
	for _, p := range cfg.Providers {
		if p.Scheme == "stripe" {
			providers[p.Name] = true
		}
	}
	if len(providers) == 0 {
		return nil
	}
	customers := cfg.Stripe.Customers
	meters := map[string]string{} // Stripe meter id → meter
	for name, m := range cfg.StripeMeters() {
		if m.MeterID != "" {
			meters[m.MeterID] = name
		}
	}
	return func(ctx context.Context, tx *custody.Tx, d *custody.Delivery, receiptID int64) error {
		if !providers[d.Provider] {
			return nil
		}
		if e, ok := ParseInvoiceEvent(d.EventType, d.Body); ok {
			return linkInvoice(ctx, tx, customers, e, receiptID)
		}
		if d.EventType != EventMeterErrors && d.EventType != EventNoMeterFound {
			return nil
		}
		b := tx.Stripe()
		for _, r := range ParseReport(d.EventType, d.Body) {
			var err error
			switch {
			case r.Identifier != "":
				r.PushID, err = b.StripePushID(ctx, r.Identifier)
			case meters[r.Meter] != "":
				r.PushID, err = reportPush(ctx, b, customers, meters[r.Meter], r.Message)
			}
			if err != nil {
				return err
			}
			r.ReceiptID = receiptID
			if err := b.InsertStripeReport(ctx, r, tx.Now()); err != nil {
				return err
			}
		}
		return nil
	}
}

// ParseReport reads the sample errors of a Stripe meter error event: one
// report per sample (data.reason.error_types[].sample_errors[]), one per
// error type without samples, and one for an event that carries no data
// (a thin event's payload names only the meter, related_object.id), so
// every such event leaves at least one report.
func ParseReport(eventType string, body []byte) []schema.StripeReport {
	meter := payload.Get(body, "related_object.id").String()
	var out []schema.StripeReport
	for _, et := range payload.Get(body, "data.reason.error_types").Array() {
		code := et.Get("code").String()
		samples := et.Get("sample_errors").Array()
		if len(samples) == 0 {
			out = append(out, schema.StripeReport{EventType: eventType, Meter: meter, Code: code})
		}
		for _, s := range samples {
			out = append(out, schema.StripeReport{EventType: eventType, Meter: meter, Code: code,
				Message: s.Get("error_message").String(), Identifier: s.Get("request.identifier").String()})
		}
	}
	if len(out) == 0 {
		out = append(out, schema.StripeReport{EventType: eventType, Meter: meter,
			Message: payload.Get(body, "data.developer_message_summary").String()})
	}
	return out
}

// stripeCustomerID finds the Stripe customer an error message names
// ("No customer with id cus_…").
var stripeCustomerID = regexp.MustCompile(`\bcus_[A-Za-z0-9]+`)

// reportPush is the push a report without a meter event identifier is
// linked to: the latest push of the meter its Stripe meter id names
// (stripe.meter_id) and, when its message names a Stripe customer, of that
// customer (the customers it maps to, or the pushes that name it), so
// stripe status counts it on that customer's and meter's line. 0: none.
func reportPush(ctx context.Context, b custody.Stripe, customers, meter, message string) (int64, error) {
	cus := stripeCustomerID.FindString(message)
	if cus == "" {
		return b.LatestStripePush(ctx, meter, nil, "")
	}
	ours := []string{cus}
	if customers != config.StripeIdentity {
		var err error
		if ours, err = b.CustomersLinkedTo(ctx, cus, stripeIDOf); err != nil {
			return 0, err
		}
	}
	return b.LatestStripePush(ctx, meter, ours, cus)
}
