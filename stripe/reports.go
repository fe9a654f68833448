package stripe

import (
	"context"

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

// Reports links Stripe's error reports to the pushes they concern: for a
// new receipt of a provider with the stripe scheme whose type is one of
// the two above, each sample error becomes a stripe_reports row, linked to
// the push its meter event identifier names (every push has one, derived
// from the ledger), written in the receipt's transaction, so the report is
// in custody exactly when its event is. nil when nothing is pushed.
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
	return func(ctx context.Context, tx *custody.Tx, d *custody.Delivery, receiptID int64) error {
		if !providers[d.Provider] || (d.EventType != EventMeterErrors && d.EventType != EventNoMeterFound) {
			return nil
		}
		b := tx.Batch()
		for _, r := range ParseReport(d.EventType, d.Body) {
			if r.Identifier != "" {
				id, err := b.StripePushID(ctx, r.Identifier)
				if err != nil {
					return err
				}
				r.PushID = id
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
