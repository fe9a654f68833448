package dispute

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

func dec(s string) *pricing.Decimal { d := pricing.MustDecimal(s); return &d }

// proPricing is plan pro for everyone: api_requests graduated (1,000 free,
// then 0.001 up to 100,000, then 0.0005), a 29.00 fee and a 50.00 minimum.
func proPricing(t *testing.T) *invoice.Pricing {
	t.Helper()
	plans := []pricing.Plan{{Name: "pro", Currency: "USD", EffectiveFrom: "2026-01-01", Fee: dec("29.00"), Minimum: dec("50.00"),
		Prices: []pricing.Price{{Meter: "api_requests", Model: pricing.Graduated, Tiers: []pricing.Tier{
			{UpTo: dec("1000"), Unit: pricing.MustDecimal("0")}, {UpTo: dec("100000"), Unit: pricing.MustDecimal("0.001")},
			{Unit: pricing.MustDecimal("0.0005")}}}}}}
	if err := plans[0].Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.NewCatalog(plans)
	if err != nil {
		t.Fatal(err)
	}
	return &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("pro", nil)}
}

// closePriced closes a month for every customer at e.Now(), priced.
func (e *env) closePriced(month string, pr *invoice.Pricing) *invoice.CloseResult {
	e.T.Helper()
	p, err := ledger.MonthPeriod(month, time.UTC)
	if err != nil {
		e.T.Fatal(err)
	}
	res, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: p, All: true, Grace: time.Hour,
		Meters: ledger.NewMeters(e.Config.Meters), Now: e.Now, Pricing: pr})
	if err != nil {
		e.T.Fatal(err)
	}
	return res
}

// seedPriced: cus_1 uses 150,001 requests in October (invoice 1), cus_2
// 500 (invoice 2); 20,000 more of cus_1's October arrive after that close
// and go on its November invoice (3) as a late line beside November's 3,000.
func seedPriced(t *testing.T) *env {
	e := newEnv(t)
	pr := proPricing(t)
	e.send("default", "evt_1", "cus_1", "100000", "2026-10-20T10:00:00Z")
	e.send("default", "evt_2", "cus_1", "50001", "2026-10-21T10:00:00Z")
	e.send("default", "evt_3", "cus_2", "500", "2026-10-21T11:00:00Z")
	e.Clock.Set(time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC))
	e.closePriced("2026-10", pr)
	e.send("default", "evt_late", "cus_1", "20000", "2026-10-30T10:00:00Z")
	e.send("default", "evt_4", "cus_1", "3000", "2026-11-05T10:00:00Z")
	e.Clock.Set(time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC))
	e.closePriced("2026-11", pr)
	return e
}

// A traced line shows its money, worked out by hand; the invoice its fee,
// true-up and total; the money check passes.
func TestTraceShowsMoney(t *testing.T) {
	e := seedPriced(t)

	oct := e.trace("invoice:1/1")
	inv, l := oct.Invoices[0], oct.Invoices[0].Lines[0]
	// 1,000 × 0 + 99,000 × 0.001 + 50,001 × 0.0005 = 99 + 25.0005 = 124.0005 → 124.00; + 29 fee.
	// The exact amount keeps its places (a quantity has six, the unit four).
	if inv.Plan != "pro" || inv.Currency != "USD" || inv.Fee != "29.00" || inv.TrueUp != "0.00" || inv.Total != "153.00" {
		t.Errorf("October's money: %+v", inv.Money)
	}
	if l.Amount != "124.00" || l.AmountPrecise != "124.0005000000" || l.Currency != "USD" || l.PlanVersion != "pro@2026-01-01" || l.BilledBefore != "" {
		t.Errorf("October's line: %+v", l.LineMoney)
	}
	if want := "1000 × 0 = 0; 99000 × 0.001 = 99; 50001 × 0.0005 = 25.0005; total 124.0005"; l.Breakdown != want {
		t.Errorf("breakdown %q\nwant      %q", l.Breakdown, want)
	}

	nov := e.trace("invoice:3")
	inv = nov.Invoices[0]
	// November: 2,000 × 0.001 = 2.00; 29 + 2 is 19 short of the minimum;
	// the late line adds 10.00 outside it: 29 + 2 + 19 + 10 = 60.00.
	if inv.Fee != "29.00" || inv.TrueUp != "19.00" || inv.Total != "60.00" || inv.MoneyOK == nil || !*inv.MoneyOK || len(inv.MoneyProblems) != 0 {
		t.Errorf("November's money: %+v", inv.Money)
	}
	if len(inv.Lines) != 2 || inv.Lines[0].Amount != "2.00" {
		t.Fatalf("November's lines: %+v", inv.Lines)
	}
	late := inv.Lines[1]
	// At the margin above the 150,001 October billed: price(170,001) −
	// price(150,001) = (99 + 70,001 × 0.0005) − (99 + 50,001 × 0.0005) = 10.
	if !late.Late || late.Amount != "10.00" || late.AmountPrecise != "10.0000000000" || late.BilledBefore != "150001" || late.Recomputed.BilledBefore != "150001" {
		t.Errorf("late line: %+v, recomputed %+v", late.LineMoney, late.Recomputed)
	}
	if !strings.HasPrefix(late.Breakdown, "price(170001) − price(150001) = 134.0005 − 124.0005 = 10; ") {
		t.Errorf("late breakdown %q", late.Breakdown)
	}
	if s := nov.Summary; !s.InvoicesOK || s.MoneyOK == nil || !*s.MoneyOK || len(s.Problems) != 0 {
		t.Errorf("summary %+v", s)
	}
	var out bytes.Buffer
	if err := WriteTable(&out, nov); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"  money      fee 29.00, true-up 19.00, total 60.00 USD\n",
		"             recomputed from the prices: ok\n",
		"  amount     10.00 USD (exactly 10.0000000000), plan version pro@2026-01-01\n",
		"             priced at the margin above 150001 billed before (recomputed: 150001)\n",
		"hash chain: ok; invoice digests and lines: ok; money: ok\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// The bundle holds the invoice's price snapshot as stored: it hashes to the
// invoice's price_digest, and the late line's amount prices again from it.
func TestBundleHoldsPrices(t *testing.T) {
	e := seedPriced(t)
	stored, err := invoice.GetInvoice(context.Background(), e.DB, 3)
	if err != nil {
		t.Fatal(err)
	}
	dir := unzip(t, exportBundle(t, e, "invoice:3/2"))
	snap, err := os.ReadFile(filepath.Join(dir, "prices", "invoice-3.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(snap)
	if string(snap) != stored.Money.Snapshot || !bytes.Equal(sum[:], stored.Money.PriceDigest) {
		t.Errorf("prices/invoice-3.json (sha256 %x) is not the stored snapshot (price_digest %x)", sum, stored.Money.PriceDigest)
	}
	var m Manifest
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Prices) != 1 || m.Prices[0].Path != "prices/invoice-3.json" || !m.Prices[0].Matches ||
		m.Prices[0].SHA256 != hex.EncodeToString(stored.Money.PriceDigest) || m.Prices[0].PriceDigest != m.Prices[0].SHA256 {
		t.Errorf("manifest prices %+v", m.Prices)
	}
	sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(sums), hex.EncodeToString(sum[:])+"  prices/invoice-3.json\n") {
		t.Errorf("SHA256SUMS lacks the prices:\n%s", sums)
	}

	// The reader's recomputation: the version the line names, its meter's
	// price, at the margin above what was billed before, rounded once.
	l := m.Trace.Invoices[0].Lines[0]
	var versions []json.RawMessage
	if err := json.Unmarshal(snap, &versions); err != nil {
		t.Fatal(err)
	}
	v, err := pricing.ParseSnapshot(versions[0])
	if err != nil {
		t.Fatal(err)
	}
	if v.Name+"@"+string(v.EffectiveFrom) != l.PlanVersion {
		t.Fatalf("version %s, line names %s", v.EffectiveFrom, l.PlanVersion)
	}
	before := pricing.MustDecimal(l.BilledBefore)
	after, err := pricing.Sum(before, pricing.MustDecimal(l.Quantity.String()))
	if err != nil {
		t.Fatal(err)
	}
	mg, err := v.Price(l.Meter).Margin(before, after)
	if err != nil {
		t.Fatal(err)
	}
	rounded, err := v.CurrencyOf().Round(mg.Amount)
	if err != nil {
		t.Fatal(err)
	}
	if rounded.String() != l.Amount || l.Amount != "10.00" {
		t.Errorf("the bundle's prices give %s (exactly %s), the line says %s", rounded, mg.Amount, l.Amount)
	}
	readme, err := os.ReadFile(filepath.Join(dir, "README.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"plan pro: fee 29.00, true-up 19.00, total 60.00 USD; amounts recomputed from the prices: match",
		"amount 10.00 USD (exactly 10.0000000000), plan version pro@2026-01-01, above 150001 billed before",
		hex.EncodeToString(sum[:]) + "  prices/invoice-3.json (invoice 3 stores " + hex.EncodeToString(sum[:]) + ": the same)"} {
		if !strings.Contains(string(readme), want) {
			t.Errorf("README lacks %q:\n%s", want, readme)
		}
	}
}

// An amount edited in the database after the close: the trace's money
// check (verify's) names the line and what it recomputes to.
func TestTraceCatchesEditedAmount(t *testing.T) {
	e := seedPriced(t)
	if e.DB.Postgres() {
		e.Exec(`ALTER TABLE invoice_lines DISABLE TRIGGER invoice_lines_no_change`)
	} else {
		e.Exec(`DROP TRIGGER invoice_lines_no_update`)
	}
	e.Exec(`UPDATE invoice_lines SET amount = '1.00' WHERE invoice_id = 3 AND line_no = 2`)
	tr := e.trace("invoice:3/2")
	inv := tr.Invoices[0]
	if inv.MoneyOK == nil || *inv.MoneyOK || tr.Summary.InvoicesOK || tr.Summary.MoneyOK == nil || *tr.Summary.MoneyOK {
		t.Errorf("money ok %v, summary %+v", inv.MoneyOK, tr.Summary)
	}
	want := "invoice 3: money: line 2 (api_requests 2026-10) recomputes to 10.00 (10.0000000000 exactly), invoice says 1.00 (10.0000000000)"
	found := false
	for _, p := range tr.Summary.Problems {
		found = found || p == want
	}
	if !found {
		t.Errorf("problems %q\nwant one %q", tr.Summary.Problems, want)
	}
}
