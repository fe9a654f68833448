package forward_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/stripe"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

const stripeWebhookSecret = "whsec_reportsTestSecret0123456789"

// withStripeProvider adds a provider with the stripe scheme: Stripe's
// event destination posts its thin events there.
func withStripeProvider(c *config.Config) {
	c.Providers = append(c.Providers, config.Provider{Name: "stripe", Scheme: "stripe",
		Secrets: []config.Secret{{Value: stripeWebhookSecret}}, Tolerance: config.Duration{Duration: 5 * time.Minute}, MaxBody: 1 << 20})
}

// meterErrorEvent is a v1.billing.meter.error_report_triggered thin event
// of meter mtr_1 with one sample per identifier ("": a sample whose
// request names none).
func meterErrorEvent(id string, identifiers ...string) []byte {
	samples := ""
	for i, ident := range identifiers {
		if i > 0 {
			samples += ","
		}
		req := `null`
		if ident != "" {
			req = fmt.Sprintf(`{"identifier":%q}`, ident)
		}
		samples += fmt.Sprintf(`{"error_message":"No customer with id cus_gone","request":%s}`, req)
	}
	return fmt.Appendf(nil, `{"id":%q,"object":"v2.core.event","type":%q,"created":"2026-12-02T01:00:00.000Z","livemode":false,`+
		`"related_object":{"id":"mtr_1","type":"billing.meter","url":"/v1/billing/meters/mtr_1"},`+
		`"data":{"developer_message_summary":"1 invalid event","validation_start":"2026-12-02T00:00:00.000Z","validation_end":"2026-12-02T01:00:00.000Z",`+
		`"reason":{"error_count":%d,"error_types":[{"code":"meter_event_customer_not_found","error_count":%d,"sample_errors":[%s]}]}}}`,
		id, stripe.EventMeterErrors, len(identifiers), len(identifiers), samples)
}

// A meter error event signed by Stripe is taken into custody with its
// reports, each linked to the push its sample names (or to none), in the
// receipt's transaction; stripe status counts the reported push, and the
// line that agreed before differs after.
func TestStripeErrorReportsLinkToPushes(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1", withStripeProvider)
	for i := range 2 {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody("cus_1", "api_requests", "1")); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	await.Eventually(t, 10*time.Second, "2 pushes delivered", func() bool { return rowsPushed(e, "delivered") == 2 })
	ctx := context.Background()
	period, err := ledger.MonthPeriod("2026-11", time.UTC) // UsageBody's month
	if err != nil {
		t.Fatal(err)
	}
	status := func() stripe.StatusLine {
		t.Helper()
		lines, err := stripe.Status(ctx, e.DB, e.Config.Meters, period, "", nil)
		if err != nil || len(lines) != 1 {
			t.Fatalf("status: %+v, %v", lines, err)
		}
		return lines[0]
	}
	if l := status(); l.State != stripe.StateAgrees || l.Reported != 0 {
		t.Fatalf("before any report: %+v, want agrees", l)
	}

	var first string
	e.DB.Read.QueryRow(`SELECT identifier FROM stripe_pushes ORDER BY id LIMIT 1`).Scan(&first)
	body := meterErrorEvent("evt_test_65R1", first, "")
	r := e.PostReply("stripe", e.Sign("stripe", "", "", body, time.Now()), body)
	if r.Code != 200 || r.Body.EventID != "evt_test_65R1" {
		t.Fatalf("post: %d %+v", r.Code, r.Body)
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_reports r JOIN stripe_pushes p ON p.id = r.push_id
		WHERE p.identifier = ? AND r.code = 'meter_event_customer_not_found' AND r.meter = 'mtr_1'
		AND r.receipt_id = (SELECT id FROM receipts WHERE provider = 'stripe' AND event_id = 'evt_test_65R1')`, first); n != 1 {
		t.Errorf("%d reports linked to push %s, want 1", n, first)
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_reports WHERE push_id IS NULL AND identifier = ''`); n != 1 {
		t.Errorf("%d unlinked reports, want 1 (the sample without an identifier)", n)
	}
	l := status()
	if l.State != stripe.StateDiffers || l.Reported != 1 || l.ReportError != "meter_event_customer_not_found: No customer with id cus_gone" {
		t.Errorf("after the report: %+v, want differs with 1 reported push", l)
	}
	// A report that names no push belongs to the month it was received in.
	now, err := ledger.MonthPeriod(time.Now().UTC().Format("2006-01"), time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if u, err := stripe.Unlinked(ctx, e.DB, now); err != nil || len(u) != 1 || u[0].Identifier != "" {
		t.Errorf("unlinked: %+v, %v; want the one sample without an identifier", u, err)
	}

	// The same event again is a duplicate: no second report.
	if r := e.PostReply("stripe", e.Sign("stripe", "", "", body, time.Now()), body); r.Code != 200 || !r.Body.Duplicate {
		t.Fatalf("repeat: %d %+v", r.Code, r.Body)
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_reports`); n != 2 {
		t.Errorf("%d reports after a repeat, want 2", n)
	}
}

// A no_meter_found thin event without data (its payload names only the
// meter) still leaves a report: stripe status lists it apart.
func TestStripeNoMeterFoundWithoutDataIsReported(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1", withStripeProvider)
	body := []byte(`{"id":"evt_test_nm1","object":"v2.core.event","type":"v1.billing.meter.no_meter_found","created":"2026-12-02T01:00:00.000Z",` +
		`"related_object":{"id":"mtr_x","type":"billing.meter","url":"/v1/billing/meters/mtr_x"}}`)
	if r := e.PostReply("stripe", e.Sign("stripe", "", "", body, time.Now()), body); r.Code != 200 {
		t.Fatalf("post: %d %+v", r.Code, r.Body)
	}
	if n := e.Int(`SELECT COUNT(*) FROM stripe_reports WHERE event_type = 'v1.billing.meter.no_meter_found' AND meter = 'mtr_x' AND push_id IS NULL`); n != 1 {
		t.Errorf("%d reports, want 1", n)
	}
}
