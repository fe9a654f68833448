package pricing

import (
	"go/ast"
	"go/parser"
	"go/token"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
)

func dec(s string) *Decimal { d := MustDecimal(s); return &d }

// The cases are worked out by hand; the comment on each shows the sum.
func TestChargeByHand(t *testing.T) {
	graduated := Price{Meter: "api_requests", Model: Graduated, Tiers: []Tier{
		{UpTo: dec("1000"), Unit: MustDecimal("0")},
		{UpTo: dec("100000"), Unit: MustDecimal("0.001")},
		{Unit: MustDecimal("0.0005")},
	}}
	graduatedFlat := Price{Meter: "m", Model: Graduated, Tiers: []Tier{
		{UpTo: dec("10"), Unit: MustDecimal("1"), Flat: dec("5")},
		{Unit: MustDecimal("0.5"), Flat: dec("2")},
	}}
	volume := Price{Meter: "seats", Model: Volume, Tiers: []Tier{
		{UpTo: dec("10"), Unit: MustDecimal("8")},
		{Unit: MustDecimal("6"), Flat: dec("10")},
	}}
	pkgFree := Price{Meter: "exports", Model: Package, Size: dec("100"), Amount: dec("5.00"), Free: dec("100")}
	pkg := Price{Meter: "exports", Model: Package, Size: dec("100"), Amount: dec("5.00")}
	unit := Price{Meter: "storage_bytes", Model: Unit, Unit: dec("0.000000000023")}
	for _, tc := range []struct {
		name    string
		price   Price
		q       string
		precise string
		usd     string
	}{
		{"package 100 free, 201 units: 101 billable = 2 packages", pkgFree, "201", "10", "10.00"},
		{"package 100 free, exactly the free units", pkgFree, "100", "0", "0.00"},
		{"package, exactly one package", pkg, "100", "5", "5.00"},
		{"package, one unit into the second", pkg, "100.000001", "10", "10.00"},
		{"package, nothing used", pkg, "0", "0", "0.00"},
		{"volume at the boundary: 10 × 8", volume, "10", "80", "80.00"},
		{"volume one past: 11 × 6 + 10", volume, "11", "76", "76.00"},
		{"volume, a fraction past: 10.5 × 6 + 10", volume, "10.5", "73", "73.00"},
		{"graduated across three tiers: 0 + 99,000 × 0.001 + 1,134,567 × 0.0005", graduated, "1234567", "666.2835", "666.28"},
		{"graduated inside the free tier", graduated, "1000", "0", "0.00"},
		{"graduated one into the second tier", graduated, "1001", "0.001", "0.00"},
		{"graduated flats: tier 1 entered, 10 × 1 + 5", graduatedFlat, "10", "15", "15.00"},
		{"graduated flats: both tiers, 15 + 1 × 0.5 + 2", graduatedFlat, "11", "17.5", "17.50"},
		{"graduated, nothing used costs nothing (no flat)", graduatedFlat, "0", "0", "0.00"},
		{"unit: 10^13 bytes × 0.000000000023", unit, "10000000000000", "230", "230.00"},
		{"unit: 10^16 bytes × 0.000000000023", unit, "10000000000000000", "230000", "230000.00"},
		{"unit: a negative total is a credit", unit, "-1000000000", "-0.023", "-0.02"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.price.Validate(); err != nil {
				t.Fatal(err)
			}
			c, err := tc.price.Charge(MustDecimal(tc.q))
			if err != nil {
				t.Fatal(err)
			}
			if c.Amount.Cmp(MustDecimal(tc.precise)) != 0 {
				t.Errorf("precise amount %s, want %s", c.Amount, tc.precise)
			}
			usd, _ := ParseCurrency("USD")
			r, err := usd.Round(c.Amount)
			if err != nil {
				t.Fatal(err)
			}
			if r.String() != tc.usd {
				t.Errorf("rounded %s, want %s", r, tc.usd)
			}
		})
	}
}

func TestChargeBreakdown(t *testing.T) {
	p := Price{Meter: "m", Model: Graduated, Tiers: []Tier{
		{UpTo: dec("1000"), Unit: MustDecimal("0")},
		{UpTo: dec("100000"), Unit: MustDecimal("0.001")},
		{Unit: MustDecimal("0.0005")},
	}}
	c, err := p.Charge(MustDecimal("1234567"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tc := range c.Tiers {
		got = append(got, tc.Quantity.String()+"×"+tc.Unit.String()+"="+tc.Amount.String())
	}
	want := "1000×0=0 99000×0.001=99.000 1134567×0.0005=567.2835"
	if strings.Join(got, " ") != want {
		t.Errorf("tiers %q, want %q", strings.Join(got, " "), want)
	}
	pkg := Price{Meter: "m", Model: Package, Size: dec("100"), Amount: dec("5.00"), Free: dec("100")}
	c, err = pkg.Charge(MustDecimal("201"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Packages == nil || c.Packages.String() != "2" {
		t.Errorf("packages %v, want 2", c.Packages)
	}
}

func TestRoundHalfEven(t *testing.T) {
	for _, tc := range []struct{ cur, in, want string }{
		{"USD", "0.125", "0.12"}, // exactly half: to the even cent
		{"USD", "0.135", "0.14"},
		{"USD", "0.1250000001", "0.13"}, // past half: up
		{"USD", "-0.125", "-0.12"},
		{"USD", "10", "10.00"},
		{"JPY", "2.5", "2"},
		{"JPY", "3.5", "4"},
		{"JPY", "1234.49", "1234"},
		{"KWD", "1.0005", "1.000"},
		{"KWD", "1.0015", "1.002"},
		{"KWD", "0.0004999", "0.000"},
		{"EUR", "666.2835", "666.28"},
	} {
		c, err := ParseCurrency(tc.cur)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Round(MustDecimal(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != tc.want {
			t.Errorf("%s %s rounds to %s, want %s", tc.cur, tc.in, got, tc.want)
		}
	}
}

func TestSettle(t *testing.T) {
	plan := Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("29.00"), Minimum: dec("50.00")}
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name                string
		usage, late         []string
		trueUp, total, sumU string
	}{
		{"below the minimum: 29 + 10 = 39, true-up 11", []string{"10.00"}, nil, "11.00", "50.00", "10.00"},
		{"above the minimum: 29 + 30.01 = 59.01", []string{"30.00", "0.01"}, nil, "0.00", "59.01", "30.01"},
		{"exactly the minimum", []string{"21.00"}, nil, "0.00", "50.00", "21.00"},
		{"no usage at all: fee 29, true-up 21", nil, nil, "21.00", "50.00", "0.00"},
		{"late lines count toward neither minimum nor true-up", []string{"10.00"}, []string{"100.00"}, "11.00", "150.00", "10.00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var usage, late []Decimal
			for _, s := range tc.usage {
				usage = append(usage, MustDecimal(s))
			}
			for _, s := range tc.late {
				late = append(late, MustDecimal(s))
			}
			s, err := plan.Settle(usage, late)
			if err != nil {
				t.Fatal(err)
			}
			if s.TrueUp.String() != tc.trueUp || s.Total.String() != tc.total || s.Usage.String() != tc.sumU || s.Fee.String() != "29.00" {
				t.Errorf("fee %s usage %s true-up %s total %s; want 29.00 %s %s %s", s.Fee, s.Usage, s.TrueUp, s.Total, tc.sumU, tc.trueUp, tc.total)
			}
		})
	}
}

func TestValidateRefuses(t *testing.T) {
	base := func() Plan {
		return Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []Price{{Meter: "m", Model: Unit, Unit: dec("1")}}}
	}
	for _, tc := range []struct {
		name   string
		change func(*Plan)
		want   string
	}{
		{"unknown currency", func(p *Plan) { p.Currency = "ABC" }, `currency: "ABC" is not a known ISO 4217 currency`},
		{"lower-case currency", func(p *Plan) { p.Currency = "usd" }, `currency: "usd" is not an ISO 4217 code`},
		{"no date", func(p *Plan) { p.EffectiveFrom = "" }, "effective_from: required"},
		{"bad date", func(p *Plan) { p.EffectiveFrom = "2026-13-01" }, `effective_from: "2026-13-01" is not a date`},
		{"fee finer than the minor unit", func(p *Plan) { p.Fee = dec("29.001") }, "fee: 29.001 has 3 decimal places, more than 2 (USD has 2)"},
		{"unit price with 13 places", func(p *Plan) { p.Prices[0].Unit = dec("0.0000000000001") }, "prices[0].unit: 0.0000000000001 has 13 decimal places, more than 12"},
		{"negative price", func(p *Plan) { p.Prices[0].Unit = dec("-1") }, "prices[0].unit: -1 is negative"},
		{"unparsable price", func(p *Plan) {
			var d Decimal
			_ = d.UnmarshalText([]byte("1e3"))
			p.Prices[0].Unit = &d
		}, `prices[0].unit: "1e3" is not a decimal number`},
		{"unknown model", func(p *Plan) { p.Prices[0].Model = "tiered" }, `prices[0].model: "tiered" is not one of unit, graduated, volume, package`},
		{"a key of another model", func(p *Plan) { p.Prices[0].Size = dec("10") }, "prices[0].size: a unit price does not take size"},
		{"meter priced twice", func(p *Plan) { p.Prices = append(p.Prices, p.Prices[0]) }, `prices[1].meter: meter "m" is priced twice`},
		{"tiers out of order", func(p *Plan) {
			p.Prices[0] = Price{Meter: "m", Model: Graduated, Tiers: []Tier{{UpTo: dec("100"), Unit: MustDecimal("1")}, {UpTo: dec("100"), Unit: MustDecimal("1")}, {Unit: MustDecimal("1")}}}
		}, "prices[0].tiers[1].up_to: 100 is not above the previous tier's 100"},
		{"last tier closed", func(p *Plan) {
			p.Prices[0] = Price{Meter: "m", Model: Volume, Tiers: []Tier{{UpTo: dec("100"), Unit: MustDecimal("1")}}}
		}, "prices[0].tiers[0].up_to: the last tier takes every quantity above"},
		{"middle tier open", func(p *Plan) {
			p.Prices[0] = Price{Meter: "m", Model: Volume, Tiers: []Tier{{Unit: MustDecimal("1")}, {Unit: MustDecimal("1")}}}
		}, "prices[0].tiers[0].up_to: required on every tier but the last"},
		{"no tiers", func(p *Plan) { p.Prices[0] = Price{Meter: "m", Model: Graduated} }, "prices[0].tiers: at least one tier"},
		{"package without size", func(p *Plan) { p.Prices[0] = Price{Meter: "m", Model: Package, Amount: dec("5")} }, "prices[0].size: a package price needs size and amount"},
		{"package of size 0", func(p *Plan) { p.Prices[0] = Price{Meter: "m", Model: Package, Size: dec("0"), Amount: dec("5")} }, "prices[0].size: must be more than 0"},
		{"huge price", func(p *Plan) { p.Prices[0].Unit = dec("1000000000000000") }, "prices[0].unit: 1000000000000000 is not below 10^15"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.change(&p)
			err := p.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	p := base()
	if err := p.Validate(); err != nil {
		t.Fatalf("the base plan is valid: %v", err)
	}
}

func TestCatalogVersions(t *testing.T) {
	v1 := Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("29.00")}
	v2 := Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-07-01", Fee: dec("39.00")}
	for _, p := range []*Plan{&v1, &v2} {
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := NewCatalog([]Plan{v2, v1}) // declaration order does not matter
	if err != nil {
		t.Fatal(err)
	}
	for day, fee := range map[Date]string{"2026-01-01": "29.00", "2026-06-30": "29.00", "2026-07-01": "39.00", "2027-01-01": "39.00"} {
		v, err := c.Version("pro", day)
		if err != nil {
			t.Fatal(err)
		}
		if v.Fee.String() != fee {
			t.Errorf("fee on %s: %s, want %s", day, v.Fee, fee)
		}
	}
	if _, err := c.Version("pro", "2025-12-31"); err == nil || !strings.Contains(err.Error(), "its first takes effect on 2026-01-01") {
		t.Errorf("before the first version: %v", err)
	}
	if _, err := c.Version("free", "2026-01-01"); err == nil || !strings.Contains(err.Error(), `plan "free" is not declared`) {
		t.Errorf("undeclared plan: %v", err)
	}
	if _, err := NewCatalog([]Plan{v1, v1}); err == nil || !strings.Contains(err.Error(), "two versions effective from 2026-01-01") {
		t.Errorf("same date twice: %v", err)
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	p := Plan{Name: "pro", Currency: "KWD", EffectiveFrom: "2026-01-01", Minimum: dec("5.000"), Prices: []Price{
		{Meter: "api", Model: Graduated, Tiers: []Tier{{UpTo: dec("1000"), Unit: MustDecimal("0")}, {Unit: MustDecimal("0.000000000001"), Flat: dec("1.5")}}},
		{Meter: "exports", Model: Package, Size: dec("100"), Amount: dec("5.00"), Free: dec("10")},
	}}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	b, sum, err := p.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"pro","currency":"KWD","effective_from":"2026-01-01","minimum":"5.000","prices":[{"meter":"api","model":"graduated","tiers":[{"up_to":"1000","unit":"0"},{"unit":"0.000000000001","flat":"1.5"}]},{"meter":"exports","model":"package","size":"100","amount":"5.00","free":"10"}]}`
	if string(b) != want {
		t.Errorf("snapshot\n%s\nwant\n%s", b, want)
	}
	back, err := ParseSnapshot(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, sum2, _ := back.Snapshot()
	if string(b2) != string(b) || sum2 != sum {
		t.Errorf("snapshot does not round-trip:\n%s\n%s", b, b2)
	}
}

// randomPrice draws a valid price of any model with small random figures.
func randomPrice(r *rand.Rand) Price {
	d := func(max int64, exp int32) Decimal { return NewDecimal(r.Int64N(max), exp) }
	tiers := func() []Tier {
		var ts []Tier
		var upTo int64
		for i := r.IntN(4); i > 0; i-- {
			upTo += 1 + r.Int64N(1000)
			u := NewDecimal(upTo, 0)
			f := d(100, -2)
			ts = append(ts, Tier{UpTo: &u, Unit: d(100000, -4), Flat: &f})
		}
		return append(ts, Tier{Unit: d(100000, -4)})
	}
	switch r.IntN(4) {
	case 0:
		u := d(1e9, -12)
		return Price{Meter: "m", Model: Unit, Unit: &u}
	case 1:
		return Price{Meter: "m", Model: Graduated, Tiers: tiers()}
	case 2:
		return Price{Meter: "m", Model: Volume, Tiers: tiers()}
	}
	size, amount, free := NewDecimal(1+r.Int64N(500), 0), d(10000, -2), d(300, 0)
	return Price{Meter: "m", Model: Package, Size: &size, Amount: &amount, Free: &free}
}

// Pricing a total in two late parts gives exactly what pricing it at once
// does, for every model: the margins telescope. A graduated or volume tier is
// never billed twice or skipped however usage arrives.
func TestMarginsAddUp(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		p := randomPrice(r)
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		cuts := []Decimal{{}}
		for range 1 + r.IntN(5) {
			next, _ := add(cuts[len(cuts)-1], NewDecimal(r.Int64N(3_000_000_000), -6))
			cuts = append(cuts, next)
		}
		var parts []Decimal
		for j := 1; j < len(cuts); j++ {
			m, err := p.Margin(cuts[j-1], cuts[j])
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, m.Amount)
		}
		r.Shuffle(len(parts), func(a, b int) { parts[a], parts[b] = parts[b], parts[a] })
		sum, err := Sum(parts...)
		if err != nil {
			t.Fatal(err)
		}
		once, err := p.Charge(cuts[len(cuts)-1])
		if err != nil {
			t.Fatal(err)
		}
		if sum.Cmp(once.Amount) != 0 {
			t.Fatalf("%+v: parts %v sum to %s, at once %s", p, parts, sum, once.Amount)
		}
	}
}

// Graduated and volume agree whenever the quantity stays in the first tier,
// and a unit price equals a one-tier graduated or volume price.
func TestModelsAgree(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 1000; i++ {
		unit := NewDecimal(r.Int64N(1e9), -9)
		q := NewDecimal(r.Int64N(1e12), -6)
		prices := []Price{
			{Meter: "m", Model: Unit, Unit: &unit},
			{Meter: "m", Model: Graduated, Tiers: []Tier{{Unit: unit}}},
			{Meter: "m", Model: Volume, Tiers: []Tier{{Unit: unit}}},
		}
		var amounts []string
		for _, p := range prices {
			c, err := p.Charge(q)
			if err != nil {
				t.Fatal(err)
			}
			amounts = append(amounts, c.Amount.String())
		}
		if amounts[0] != amounts[1] || amounts[1] != amounts[2] {
			t.Fatalf("q %s unit %s: unit %s graduated %s volume %s", q, unit, amounts[0], amounts[1], amounts[2])
		}
	}
}

// A total as wide as the ledger keeps (10^24 units with six decimal places)
// prices exactly at the finest unit price.
func TestWideTotal(t *testing.T) {
	p := Price{Meter: "bytes", Model: Unit, Unit: dec("0.000000000023")}
	c, err := p.Charge(MustDecimal("1000000000000000000000000.000001"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Amount.String() != "23000000000000.000000000000000023" {
		t.Errorf("amount %s", c.Amount)
	}
}

func FuzzGraduatedSplit(f *testing.F) {
	f.Add(int64(500), int64(700_000))
	f.Add(int64(999_999_999), int64(1))
	f.Fuzz(func(t *testing.T, a, b int64) {
		if a < 0 || b < 0 || a > 1e15 || b > 1e15 {
			return
		}
		p := Price{Meter: "m", Model: Graduated, Tiers: []Tier{
			{UpTo: dec("1000"), Unit: MustDecimal("0"), Flat: dec("1")},
			{UpTo: dec("100000"), Unit: MustDecimal("0.001")},
			{Unit: MustDecimal("0.0005"), Flat: dec("3")},
		}}
		qa, qab := NewDecimal(a, -6), NewDecimal(a+b, -6)
		first, err := p.Margin(Decimal{}, qa)
		if err != nil {
			t.Fatal(err)
		}
		second, err := p.Margin(qa, qab)
		if err != nil {
			t.Fatal(err)
		}
		once, err := p.Charge(qab)
		if err != nil {
			t.Fatal(err)
		}
		if sum, _ := add(first.Amount, second.Amount); sum.Cmp(once.Amount) != 0 {
			t.Fatalf("%s + %s = %s, at once %s", first.Amount, second.Amount, sum, once.Amount)
		}
	})
}

// No float anywhere in the pricing path: the package's code names no float
// type and calls no float conversion.
func TestNoFloat(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.Ident:
				if strings.HasPrefix(n.Name, "float") || strings.Contains(n.Name, "Float") {
					t.Errorf("%s: %s", fset.Position(n.Pos()), n.Name)
				}
			case *ast.BasicLit:
				if n.Kind == token.FLOAT {
					t.Errorf("%s: float literal %s", fset.Position(n.Pos()), n.Value)
				}
			}
			return true
		})
	}
	if checked < 4 {
		t.Fatalf("checked %d files, expected the package's sources", checked)
	}
}

func TestDecimalFromYAMLSource(t *testing.T) {
	for src, want := range map[string]string{
		"0.0000000001\n": "0.0000000001",
		`"5.00"`:         "5.00",
		`'5.00'`:         "5.00",
		"100":            "100",
		"1e-3":           "",
		`"1e3"`:          "",
		"[1, 2]":         "",
		"{a: 1}":         "",
		"true":           "",
	} {
		var v struct {
			D Decimal `yaml:"d"`
		}
		if err := yaml.Unmarshal([]byte("d: "+src), &v); err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		d := v.D
		if got := d.String(); want != "" && (got != want || d.Check() != nil) {
			t.Errorf("%q: %q (%v), want %q", src, got, d.Check(), want)
		}
		if want == "" && d.Check() == nil {
			t.Errorf("%q: accepted as %s", src, d)
		}
	}
}

func TestNewDecimalBig(t *testing.T) {
	b, _ := new(big.Int).SetString("-123456789012345678901234567890", 10)
	if got := NewDecimalBig(b, -6).String(); got != "-123456789012345678901234.567890" {
		t.Errorf("got %s", got)
	}
}

// Settle adds rounded amounts and never rounds: an amount finer than the
// minor unit is an error, not a different total.
func TestSettleRefusesUnroundedAmounts(t *testing.T) {
	plan := Plan{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Minimum: dec("50.00")}
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Settle([]Decimal{MustDecimal("10.005")}, nil); err == nil || !strings.Contains(err.Error(), "not whole minor units") {
		t.Errorf("Settle of 10.005 USD: %v", err)
	}
	if _, err := plan.Settle(nil, []Decimal{MustDecimal("0.001")}); err == nil {
		t.Error("Settle of a late 0.001 USD: no error")
	}
}
