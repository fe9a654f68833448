package pricing

import "testing"

func TestProrate(t *testing.T) {
	usd, _ := ParseCurrency("USD")
	jpy, _ := ParseCurrency("JPY")
	day := int64(86_400_000)
	for _, c := range []struct {
		cur      Currency
		x        string
		num, den int64
		want     string
	}{
		{usd, "29.00", 15 * day, 30 * day, "14.50"}, // half of a 30-day month
		{usd, "10.00", 15 * day, 31 * day, "4.84"},  // 4.8387… rounds once
		{usd, "10.00", 16 * day, 31 * day, "5.16"},  // the other part: 5.1612…; 4.84 + 5.16 = 10.00
		{usd, "0.01", 1 * day, 2 * day, "0.00"},     // 0.005 exactly: half-even
		{usd, "0.03", 1 * day, 2 * day, "0.02"},     // 0.015 exactly: half-even up
		{jpy, "1000", 10 * day, 30 * day, "333"},    // 333.33…
		{usd, "29.00", 30 * day, 30 * day, "29.00"}, // the whole period
		{usd, "29.00", 0, 30 * day, "0.00"},         // none of it
	} {
		got, err := c.cur.Prorate(MustDecimal(c.x), c.num, c.den)
		if err != nil || got.String() != c.want {
			t.Errorf("%s × %d/%d in %s = %s, %v; want %s", c.x, c.num, c.den, c.cur, got, err, c.want)
		}
	}
	if _, err := usd.Prorate(MustDecimal("1"), 2, 1); err == nil {
		t.Error("a share above the whole was prorated")
	}
}

func TestSettlePart(t *testing.T) {
	p := Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("30.00"), Minimum: dec("50.00")}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	day := int64(86_400_000)
	// Half of a 30-day month: fee 15.00, minimum 25.00, usage 4.00: true-up 6.00.
	s, err := p.SettlePart(15*day, 30*day, []Decimal{MustDecimal("1.50"), MustDecimal("2.50")})
	if err != nil || s.Fee.String() != "15.00" || s.Usage.String() != "4.00" || s.TrueUp.String() != "6.00" {
		t.Errorf("settle half: %+v, %v; want fee 15.00, usage 4.00, true-up 6.00", s, err)
	}
	s, err = p.SettlePart(15*day, 30*day, []Decimal{MustDecimal("20.00")})
	if err != nil || s.TrueUp.String() != "0.00" {
		t.Errorf("usage above the prorated minimum: %+v, %v", s, err)
	}
}
