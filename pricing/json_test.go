package pricing

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// AppendJSON writes what encoding/json writes for a margin, byte for byte,
// for every model, with and without flats and free units, from zero and
// from a billed total, including credits. encoding/json is the reference
// (Margin has no MarshalJSON of its own), and what invoices closed before
// AppendJSON existed store.
func TestMarginAppendJSONIsJSONMarshal(t *testing.T) {
	if _, ok := any(Margin{}).(json.Marshaler); ok {
		t.Fatal("Margin implements json.Marshaler: encoding/json is no longer an independent reference")
	}
	prices := []Price{
		{Meter: "a", Model: Graduated, Tiers: []Tier{{UpTo: dec("1000"), Unit: MustDecimal("0")}, {UpTo: dec("100000"), Unit: MustDecimal("0.00125"), Flat: dec("2.5")}, {Unit: MustDecimal("0.0005")}}},
		{Meter: "b", Model: Graduated, Tiers: []Tier{{Unit: MustDecimal("0.000000000023")}}},
		{Meter: "c", Model: Volume, Tiers: []Tier{{UpTo: dec("10"), Unit: MustDecimal("8.125")}, {UpTo: dec("50.5"), Unit: MustDecimal("6.5"), Flat: dec("10")}, {Unit: MustDecimal("5")}}},
		{Meter: "d", Model: Unit, Unit: dec("0.000000000023")},
		{Meter: "e", Model: Unit, Unit: dec("3")},
		{Meter: "f", Model: Package, Size: dec("100"), Amount: dec("5.005"), Free: dec("100")},
		{Meter: "g", Model: Package, Size: dec("0.5"), Amount: dec("1")},
	}
	for i := range prices {
		if err := prices[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(25, 11))
	quantity := func() Decimal {
		switch rng.IntN(5) {
		case 0:
			return Decimal{}
		case 1:
			return NewDecimal(rng.Int64N(200), 0)
		case 2:
			return NewDecimal(-rng.Int64N(1_000_000_000_000), -6)
		}
		return NewDecimal(rng.Int64N(1_000_000_000_000_000), -6)
	}
	for range 20000 {
		p := &prices[rng.IntN(len(prices))]
		before, after := quantity(), quantity()
		if p.Model != Unit && before.Sign() < 0 {
			before = Decimal{}
		}
		m, err := p.Margin(before, after)
		if err != nil {
			t.Fatal(err)
		}
		if rng.IntN(2) == 0 { // a late line's carried rounding
			if _, err := mustCurrency(t, "USD").CarryAmount(&m, NewDecimal(rng.Int64N(100_000), -2)); err != nil {
				t.Fatal(err)
			}
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.AppendJSON(nil); string(got) != string(want) {
			t.Fatalf("%s %s from %s to %s:\n  AppendJSON %s\n  json       %s", p.Meter, p.Model, before, after, got, want)
		}
	}
}
