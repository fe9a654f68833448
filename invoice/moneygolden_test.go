package invoice_test

import (
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// goldenMeters are the meters of TestPricedCloseStoresTheSameMoney: one per
// price model.
var goldenMeters = ledger.NewMeters([]ledger.Meter{
	{Name: "api", Aggregation: ledger.AggSum, Unit: "requests"},
	{Name: "seats", Aggregation: ledger.AggMax, Unit: "seats"},
	{Name: "storage", Aggregation: ledger.AggSum, Unit: "bytes"},
	{Name: "exports", Aggregation: ledger.AggSum, Unit: "exports"},
})

// goldenPricing: plan pro in USD with two versions (every model, a fee and a
// minimum; July's cheaper and without a minimum), plan yen in JPY and plan
// dinar in KWD, so rounding to 0, 2 and 3 places all happen.
func goldenPricing(t *testing.T) *invoice.Pricing {
	t.Helper()
	u := pricing.MustDecimal
	all := func(name, cur, from, fee, minimum string, apiTop, storageUnit string) pricing.Plan {
		p := pricing.Plan{Name: name, Currency: cur, EffectiveFrom: pricing.Date(from), Prices: []pricing.Price{
			{Meter: "api", Model: pricing.Graduated, Tiers: []pricing.Tier{
				{UpTo: dec("1000"), Unit: u("0")}, {UpTo: dec("100000"), Unit: u("0.00125"), Flat: dec("2.5")}, {Unit: u(apiTop)}}},
			{Meter: "seats", Model: pricing.Volume, Tiers: []pricing.Tier{{UpTo: dec("10"), Unit: u("8.125")}, {UpTo: dec("50"), Unit: u("6.5"), Flat: dec("10")}, {Unit: u("5")}}},
			{Meter: "storage", Model: pricing.Unit, Unit: dec(storageUnit)},
			{Meter: "exports", Model: pricing.Package, Size: dec("100"), Amount: dec("5.005"), Free: dec("100")},
		}}
		if fee != "" {
			p.Fee = dec(fee)
		}
		if minimum != "" {
			p.Minimum = dec(minimum)
		}
		return p
	}
	plans := []pricing.Plan{
		all("pro", "USD", "2026-01-01", "29.00", "50.00", "0.0005", "0.000000000023"),
		all("pro", "USD", "2026-07-01", "39.00", "", "0.00045", "0.000000000021"),
		all("yen", "JPY", "2026-01-01", "3000", "5000", "0.05", "0.0000000025"),
		all("dinar", "KWD", "2026-01-01", "9.000", "15.500", "0.00015", "0.000000000007"),
	}
	for i := range plans {
		if err := plans[i].Validate(); err != nil {
			t.Fatal(err)
		}
	}
	cat, err := pricing.NewCatalog(plans)
	if err != nil {
		t.Fatal(err)
	}
	return &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("pro", []customer.PlanAssignment{
		{Customer: "c4", Plan: "yen", EffectiveFrom: "2026-01-01"},
		{Customer: "c5", Plan: "dinar", EffectiveFrom: "2026-01-01"},
	})}
}

// storedMoney renders every stored value a priced close writes: each
// invoice's digest and money, each line's digest and money, as read back
// from the database.
func storedMoney(t *testing.T, e *env) string {
	t.Helper()
	invs, err := invoice.ListInvoices(e.Ctx, e.DB, invoice.InvoiceFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, inv := range invs {
		m := inv.Money
		fmt.Fprintf(&b, "invoice %d %s %s digest %s\n  plan %s %s fee %s true-up %s total %s\n  price digest %s\n  snapshot %s\n",
			inv.ID, inv.Customer, inv.Period, hex.EncodeToString(inv.Digest), m.Plan, m.Currency, m.Fee, m.TrueUp, m.Total,
			hex.EncodeToString(m.PriceDigest), m.Snapshot)
		for _, l := range inv.Lines {
			lm := l.Money
			fmt.Fprintf(&b, "  line %d %s %s late=%v qty %s digest %s\n    before %s version %s precise %s amount %s\n    charge %s\n",
				l.LineNo, l.Meter, l.Period, l.Late, l.Quantity, hex.EncodeToString(l.Digest), lm.BilledBefore, lm.PlanVersion, lm.AmountPrecise, lm.Amount, lm.Charge)
		}
	}
	return b.String()
}

// Everything a priced close stores (amounts, charges, snapshots and their
// digests, the invoice digests over them) is byte for byte what
// testdata/priced-close.golden holds, written by the pricing path before it
// was made faster (the snapshot computed once per close, the charges
// encoded without reflection): the optimisations change no stored value.
// On both backends. HOOKLEDGER_UPDATE_GOLDEN=1 rewrites the file; only do
// that for a deliberate change of what is stored, which must also keep
// every invoice closed before it verifying.
func TestPricedCloseStoresTheSameMoney(t *testing.T) {
	e := newEnv(t)
	pr := goldenPricing(t)
	e.SetClock(ts("2026-06-20T00:00:00Z"))
	var rows []row
	for i, c := range []string{"c1", "c2", "c3", "c4", "c5"} {
		n := int64(i + 1)
		rows = append(rows,
			row{Customer: c, Meter: "api", Qty: times(q("1234.567891"), n*n*n), At: ts("2026-06-10T00:00:00Z")},
			row{Customer: c, Meter: "api", Qty: times(q("45678"), n), At: ts("2026-06-11T00:00:00Z")},
			row{Customer: c, Meter: "seats", Qty: times(q("7"), n*n), At: ts("2026-06-12T00:00:00Z")},
			row{Customer: c, Meter: "storage", Qty: times(q("123456789012.5"), n), At: ts("2026-06-13T00:00:00Z")},
			row{Customer: c, Meter: "exports", Qty: times(q("99.5"), n), At: ts("2026-06-14T00:00:00Z")},
		)
	}
	// c2 uses only api and exports in June: its seats and storage rows go.
	rows = append(rows[:7], rows[9:]...)
	e.Write(rows...)
	june := invoice.CloseRequest{Period: month(t, "2026-06", "UTC"), All: true, Meters: goldenMeters, Now: at("2026-07-02T00:00:00Z"),
		Pricing: pr, Registered: []string{"c6"}}
	e.closePeriod(t, june)

	// Late June usage (priced at June's version, at the margin above what
	// June's invoices billed) and July's own usage. No adjustment: its
	// random event id would make the row hashes, and so the line digests,
	// differ from run to run (adjustments are priced as late lines are).
	e.SetClock(ts("2026-07-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "api", Qty: q("98765.4321"), At: ts("2026-06-21T00:00:00Z")},
		row{Customer: "c4", Meter: "exports", Qty: q("150"), At: ts("2026-06-22T00:00:00Z")},
		row{Customer: "c5", Meter: "seats", Qty: q("60"), At: ts("2026-06-23T00:00:00Z")},
		row{Customer: "c3", Meter: "storage", Qty: q("1000000000.000001"), At: ts("2026-06-24T00:00:00Z")},
		row{Customer: "c1", Meter: "api", Qty: q("250000.000001"), At: ts("2026-07-11T00:00:00Z")},
		row{Customer: "c2", Meter: "seats", Qty: q("11"), At: ts("2026-07-12T00:00:00Z")},
		row{Customer: "c4", Meter: "storage", Qty: q("7777777777.777777"), At: ts("2026-07-13T00:00:00Z")},
	)
	july := june
	july.Period, july.Now = month(t, "2026-07", "UTC"), at("2026-08-02T00:00:00Z")
	e.closePeriod(t, july)

	got := storedMoney(t, e)
	golden := filepath.Join("testdata", "priced-close.golden") // the same on both backends
	if os.Getenv("HOOKLEDGER_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("stored money differs from %s at line %d:\n  stored: %s\n  golden: %s", golden, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("stored money differs from %s: %d lines, golden %d", golden, len(gl), len(wl))
	}
	// And it verifies: verify recomputes all of it from the snapshots.
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Fatalf("verify: %s", problems(rep))
	}
}

// times is t × k, exactly.
func times(t ledger.Total, k int64) ledger.Total {
	return ledger.TotalOfMicro(new(big.Int).Mul(t.Micro(), big.NewInt(k)))
}
