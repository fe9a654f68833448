package writer

import (
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// New wires every hook the configuration asks for, and none without one.
func TestNewWiresEveryHook(t *testing.T) {
	limit := pricing.MustDecimal("100")
	cfg := &config.Config{
		Destinations: []config.Destination{{Name: "app", URL: "http://127.0.0.1:1/hooks"}},
		Meters: []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum,
			Stripe: &ledger.StripeMeter{EventName: "api_requests", Mode: ledger.StripeStream}}},
		Stripe:    &config.Stripe{Customers: config.StripeIdentity},
		Providers: []config.Provider{{Name: "stripe", Scheme: "stripe"}},
	}
	plan := pricing.Plan{Name: "free", Currency: "USD", EffectiveFrom: "2026-01-01",
		Limits: []pricing.Limit{{Meter: "api_requests", Limit: limit, Kind: pricing.LimitHard, Alerts: []string{"80%"}}}}
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.NewCatalog([]pricing.Plan{plan})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Catalog, cfg.Customers.DefaultPlan = cat, "free"
	w := New(nil, cfg)
	if w.Route == nil || w.Push == nil || w.Receipt == nil || w.Limits == nil {
		t.Errorf("hooks route %v, push %v, receipt %v, limits %v: want all", w.Route != nil, w.Push != nil, w.Receipt != nil, w.Limits != nil)
	}
	if w := New(nil, nil); w.Route != nil || w.Push != nil || w.Receipt != nil || w.Limits != nil {
		t.Error("a bulk loader's writer has hooks")
	}
}
