package stripe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/stripe"
)

// The client's requests have the shape Stripe's API takes: stripe-mock
// validates each against Stripe's OpenAPI description (and refuses a
// request without a valid-looking key), and its answers parse.
func TestClientAgainstStripeMock(t *testing.T) {
	base := testenv.StripeMock(t)
	ctx := context.Background()
	c := &stripe.Client{Base: base, Key: "sk_test_123"}
	res := c.SendMeterEvent(ctx, stripe.MeterEvent{EventName: "api_requests", Identifier: stripe.Identifier("usage", "p", "e", "m"),
		Customer: "cus_1", Value: "3", Timestamp: time.Now().Unix()})
	if !res.OK() || res.Status != 200 || res.Duplicate {
		t.Fatalf("meter event: %+v (%s)", res, res.Body)
	}
	// A cancel: stripe-mock checks the adjustment's form (event_name,
	// type=cancel, cancel[identifier]) against Stripe's API description and
	// answers a billing.meter_event_adjustment.
	res = c.CancelMeterEvent(ctx, "api_requests", stripe.Identifier("usage", "p", "e", "m"), stripe.Identifier("adjustment", "p", "v", "m"))
	if !res.OK() || res.Status != 200 || !strings.Contains(string(res.Body), `"billing.meter_event_adjustment"`) {
		t.Fatalf("cancel: %+v (%s)", res, res.Body)
	}
	meters, err := c.Meters(ctx)
	if err != nil || len(meters) == 0 || meters[0].ID == "" || meters[0].EventName == "" {
		t.Fatalf("meters: %v %+v", err, meters)
	}
	sums, err := c.EventSummaries(ctx, meters[0].ID, "cus_1", time.Now().Add(-time.Hour).Unix(), time.Now().Unix())
	if err != nil || len(sums) == 0 || sums[0].AggregatedValue.String() == "" {
		t.Fatalf("event summaries: %v %+v", err, sums)
	}

	// A request Stripe refuses: without a key. The error says why, and a
	// key never shows in one.
	bad := &stripe.Client{Base: base, Key: ""}
	if res := bad.SendMeterEvent(ctx, stripe.MeterEvent{EventName: "x", Identifier: "i", Customer: "c", Value: "1", Timestamp: time.Now().Unix()}); res.OK() || res.Status != 401 {
		t.Errorf("without a key: %+v", res)
	}
	secret := &stripe.Client{Base: base + "/nowhere", Key: "sk_test_supersecret"}
	if _, err := secret.Meters(ctx); err == nil || strings.Contains(err.Error(), "supersecret") {
		t.Errorf("error %v, want one without the key", err)
	}
}

// Identifiers are derived from what they cover only, are distinct for
// different parts, and fit Stripe's 100 characters.
func TestIdentifier(t *testing.T) {
	a := stripe.Identifier("usage", "stripe", "evt_1", "api_requests")
	if a != stripe.Identifier("usage", "stripe", "evt_1", "api_requests") {
		t.Error("not stable")
	}
	for _, other := range [][]string{{"usage", "stripe", "evt_1", "api_request"}, {"usage", "stripe", "evt_1a", "pi_requests"},
		{"adjustment", "stripe", "evt_1", "api_requests"}} {
		if stripe.Identifier(other...) == a {
			t.Errorf("%v has the identifier of another push", other)
		}
	}
	if len(a) > 100 || !strings.HasPrefix(a, "hl_") {
		t.Errorf("identifier %q", a)
	}
}

// Stripe's window: 35 days back, 5 minutes ahead.
func TestCheckWindow(t *testing.T) {
	now := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at time.Time
		ok bool
	}{{now, true}, {now.Add(-35*24*time.Hour + time.Second), true}, {now.Add(-35*24*time.Hour - time.Second), false},
		{now.Add(5 * time.Minute), true}, {now.Add(5*time.Minute + time.Second), false}} {
		if err := stripe.CheckWindow(c.at.Unix(), now); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.at, err)
		}
	}
}

// An api_base that echoes the request (a proxy's error page, a wrong
// api_base): the key is in no part of the Result, whole or cut at the KiB it
// keeps, nor in an error.
func TestEchoedKeyIsScrubbed(t *testing.T) {
	const key = "sk_test_51EchoedKeyThatMustNeverBeKept"
	pad := 0
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		w.WriteHeader(http.StatusBadRequest)
		m, _ := json.Marshal("bad Authorization: " + auth)
		fmt.Fprintf(w, `{"error":{"message":%s},"pad":"%s","echo":"%s"}`, m, strings.Repeat(" ", pad), auth)
	}))
	defer echo.Close()
	c := &stripe.Client{Base: echo.URL, Key: key}
	ctx := context.Background()
	for _, p := range []int{0, 1024 - 60, 1024 - 40} { // the last two: the key straddles the first KiB
		pad = p
		res := c.SendMeterEvent(ctx, stripe.MeterEvent{EventName: "x", Identifier: "i", Customer: "c", Value: "1", Timestamp: time.Now().Unix()})
		if res.Status != 400 || (p == 0 && !strings.Contains(res.Err, "bad Authorization: Bearer [redacted]")) {
			t.Errorf("pad %d: %d %q %q", p, res.Status, res.Err, res.Body)
		}
		for _, part := range []string{key[8:20], key[20:32], key[len(key)-12:]} {
			if strings.Contains(string(res.Body), part) || strings.Contains(res.Err, part) {
				t.Errorf("pad %d: the key shows: %q %q", p, res.Body, res.Err)
			}
		}
		if len(res.Body) > 1024 {
			t.Errorf("pad %d: %d bytes kept, want at most 1 KiB", p, len(res.Body))
		}
	}
	if _, err := c.Meters(ctx); err == nil || strings.Contains(err.Error(), key[8:]) {
		t.Errorf("meters: %v, want an error without the key", err)
	}
}
