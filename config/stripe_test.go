package config

import (
	"strings"
	"testing"
)

const stripeMeters = `meters:
  - name: api_requests
    stripe: {event_name: api_requests, mode: stream, multiplier: 0.001}
  - name: storage
    stripe: {event_name: storage, mode: close}
`

func TestStripe(t *testing.T) {
	t.Setenv("TEST_STRIPE_KEY", "sk_test_abc")
	c, err := Parse([]byte(destProviders+stripeMeters+"stripe:\n  api_key: ${TEST_STRIPE_KEY}\n  customers: link\n  max_attempts: 5\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := c.Stripe
	if s.APIKey.Value != "sk_test_abc" || s.APIBase != DefaultStripeAPIBase || s.MaxAttempts != 5 ||
		s.Timeout.Duration != DefaultForwardTimeout || s.MaxAge.Duration != DefaultForwardMaxAge {
		t.Errorf("stripe = %+v", s)
	}
	ms := c.StripeMeters()
	if m := ms["api_requests"]; m.Mode != "stream" || m.Factor().String() != "0.001" {
		t.Errorf("api_requests = %+v", m)
	}
	if m := ms["storage"]; m.Mode != "close" || m.Factor().String() != "1" {
		t.Errorf("storage = %+v (multiplier defaults to 1)", m)
	}
	if ds := c.OutboxDestinations(); len(ds) != 1 || ds[0].Name != StripeDestination || ds[0].MaxAttempts != 5 {
		t.Errorf("outbox destinations %+v", ds)
	}
	if strings.Contains(s.APIKey.String(), "sk_test") {
		t.Error("the key prints")
	}
}

func TestStripeErrorsNameLineAndKey(t *testing.T) {
	const key = "stripe:\n  api_key: sk_test_x\n  customers: identity\n"
	meter := func(stripe string) string {
		return destProviders + "meters:\n  - name: m\n    stripe: " + stripe + "\n"
	}
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"no event name", meter("{mode: stream}") + key, []string{"meters[0].stripe.event_name", "required"}},
		{"bad mode", meter("{event_name: m, mode: hourly}") + key, []string{"meters[0].stripe.mode", "hourly"}},
		{"zero multiplier", meter("{event_name: m, multiplier: 0}") + key, []string{"meters[0].stripe.multiplier", "not positive"}},
		{"float-ish multiplier", meter("{event_name: m, multiplier: 1e3}") + key, []string{"meters[0].stripe.multiplier"}},
		{"not a sum", destProviders + "meters:\n  - name: m\n    aggregation: max\n    stripe: {event_name: m}\n" + key, []string{"meters[0].stripe", "sum"}},
		{"no stripe block", meter("{event_name: m}"), []string{"stripe", "api_key"}},
		{"no customers", meter("{event_name: m}") + "stripe:\n  api_key: sk_test_x\n", []string{"stripe.customers", "required"}},
		{"unset key", meter("{event_name: m}") + "stripe:\n  api_key: ${TEST_STRIPE_UNSET}\n  customers: link\n", []string{"9:", "TEST_STRIPE_UNSET", "not set"}},
		{"api_base with credentials", meter("{event_name: m}") + key + "  api_base: https://sk_live_x@api.stripe.com\n", []string{"stripe.api_base"}},
		{"path in close mode", meter("{event_name: m, mode: close}") + "stripe:\n  api_key: sk_test_x\n  customers: data.customer\n", []string{"meters[0].stripe.mode", "identity or link"}},
		{"two meters one event", destProviders + "meters:\n  - name: a\n    stripe: {event_name: e}\n  - name: b\n    stripe: {event_name: e}\n" + key, []string{"meters[1].stripe.event_name"}},
		{"max_age past 35 days", meter("{event_name: m}") + key + "  max_age: 40d\n", []string{"stripe.max_age", "35 days"}},
		{"unknown key", meter("{event_name: m}") + key + "  secret_key: x\n", []string{"secret_key"}},
		{"path gjson cannot read as meant", meter("{event_name: m}") + "stripe:\n  api_key: sk_test_x\n  customers: data.items.#.customer\n", []string{"stripe.customers", "data.items.#.customer"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), t.TempDir())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "sk_test_x") || strings.Contains(err.Error(), "sk_live_x") {
				t.Errorf("error %q shows the key", err)
			}
		})
	}
}
