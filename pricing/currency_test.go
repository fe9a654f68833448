package pricing

import "testing"

func TestMinorUnits(t *testing.T) {
	for _, c := range []struct{ code, amount, want string }{
		{"USD", "12.34", "1234"}, {"USD", "12.3", "1230"}, {"USD", "-0.05", "-5"}, {"USD", "0", "0"}, {"USD", "-0.00", "0"},
		{"JPY", "1234", "1234"}, {"KWD", "1.234", "1234"}, {"KWD", "-2", "-2000"},
		{"USD", "123456789012345678901234567890.12", "12345678901234567890123456789012"},
	} {
		cur, err := ParseCurrency(c.code)
		if err != nil {
			t.Fatal(err)
		}
		got, err := cur.MinorUnits(MustDecimal(c.amount))
		if err != nil || got != c.want {
			t.Errorf("%s %s: %q, %v; want %s", c.amount, c.code, got, err, c.want)
		}
	}
	usd, _ := ParseCurrency("USD")
	if got, err := usd.MinorUnits(MustDecimal("0.001")); err == nil {
		t.Errorf("0.001 USD in cents: %s, want an error (finer than a cent)", got)
	}
	if _, err := (Currency{}).MinorUnits(MustDecimal("1")); err == nil {
		t.Error("minor units of no currency: no error")
	}
}
