package pricing

import (
	"testing"
)

func mustCurrency(t testing.TB, code string) Currency {
	t.Helper()
	c, err := ParseCurrency(code)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A period billed in pieces adds up to its charge priced once: 0.005 USD a
// unit, one unit on the period's own invoice (0.005 → 0.00, half-even) and a
// late unit (0.01 for two, priced once, less 0.00 billed: 0.01); each margin
// rounded on its own would bill 0.00 twice.
func TestCarryAddsUpToThePeriodPricedOnce(t *testing.T) {
	usd := mustCurrency(t, "USD")
	p := &Price{Meter: "api", Model: Unit, Unit: dec("0.005")}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	own, err := p.Margin(Decimal{}, MustDecimal("1"))
	if err != nil {
		t.Fatal(err)
	}
	first, err := usd.Round(own.Amount)
	if err != nil {
		t.Fatal(err)
	}
	billed := first
	var sum = first
	for i, want := range []string{"0.01", "0.01", "0.00", "0.00"} { // 2, 3, 4, 5 units priced once: 0.01, 0.02 (0.015 half-even), 0.02, 0.02 (0.025 half-even)
		before, after := NewDecimal(int64(i+1), 0), NewDecimal(int64(i+2), 0)
		m, err := p.Margin(before, after)
		if err != nil {
			t.Fatal(err)
		}
		if naive, _ := usd.Round(m.Amount); i == 0 && naive.String() != "0.00" {
			t.Fatalf("the margin of the second unit rounds to %s on its own, want 0.00 (the drift this fixes)", naive)
		}
		a, err := usd.CarryAmount(&m, billed)
		if err != nil {
			t.Fatal(err)
		}
		if a.String() != want {
			t.Errorf("unit %d: carried amount %s, want %s", i+2, a, want)
		}
		if sum, err = Sum(sum, a); err != nil {
			t.Fatal(err)
		}
		once, _ := usd.Round(m.After.Amount)
		if sum.Cmp(once) != 0 || m.Carry == nil || m.Carry.Total.Cmp(once) != 0 || m.Carry.Billed.Cmp(billed) != 0 {
			t.Errorf("after %s units: billed %s in all, priced once %s (carry %+v)", after, sum, once, m.Carry)
		}
		billed = sum
	}
	// What was billed before must be whole minor units: anything else is
	// not an amount an invoice holds.
	m, _ := p.Margin(MustDecimal("1"), MustDecimal("2"))
	if _, err := usd.CarryAmount(&m, MustDecimal("0.005")); err == nil {
		t.Error("a billed amount finer than a cent was accepted")
	}
}
