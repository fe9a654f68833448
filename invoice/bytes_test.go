package invoice_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// bytesMeters are a storage gauge (its peak in the period) and a transfer
// meter (its sum), both in bytes.
var bytesMeters = ledger.NewMeters([]ledger.Meter{
	{Name: "storage_gauge", Aggregation: ledger.AggMax, Unit: "bytes"},
	{Name: "storage_bytes", Aggregation: ledger.AggSum, Unit: "bytes"},
})

// bytesPricing prices both meters at 0.000000000023 USD a byte (23 USD a TB).
func bytesPricing(t *testing.T) *invoice.Pricing {
	t.Helper()
	plan := pricing.Plan{Name: "storage", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{
		{Meter: "storage_gauge", Model: pricing.Unit, Unit: dec("0.000000000023")},
		{Meter: "storage_bytes", Model: pricing.Unit, Unit: dec("0.000000000023")},
	}}
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.NewCatalog([]pricing.Plan{plan})
	if err != nil {
		t.Fatal(err)
	}
	return &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("storage", nil)}
}

// A 10 TB gauge is one event of 10^13 bytes, and a month of them totals
// 10^16 bytes: both are stored, aggregated, invoiced and priced exactly, and
// verify recomputes them. Before wide quantities the event was refused
// (10^13 bytes are 10^19 micro-units) and so was any total past 9.2 × 10^12.
func TestBytesGaugeAndMonthInvoiceExactly(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-31T00:00:00Z"))
	tenTB := q("10000000000000")
	var rows []row
	for i := range 1000 { // a 10 TB transfer every 44 minutes or so
		at := ts("2026-10-01T00:00:00Z").Add(time.Duration(i) * 44 * time.Minute)
		rows = append(rows, row{Customer: "c", Meter: "storage_bytes", Qty: tenTB, At: at})
	}
	rows = append(rows, row{Customer: "c", Meter: "storage_gauge", Qty: q("9999999999999"), At: ts("2026-10-02T00:00:00Z")},
		row{Customer: "c", Meter: "storage_gauge", Qty: tenTB, At: ts("2026-10-03T00:00:00Z")},
		row{Customer: "c", Meter: "storage_gauge", Qty: q("4000000000000.5"), At: ts("2026-10-04T00:00:00Z")},
		row{Customer: "d", Meter: "storage_gauge", Qty: q("40000000000000.25"), At: ts("2026-10-05T00:00:00Z")})
	e.Write(rows...)

	// A gauge row of 10^13 bytes keeps whole bytes: quantity 10^13 with 0
	// decimals; a row whose micro-units fit an int64 keeps 6, as every row
	// always did; a fraction beyond that keeps the decimals it needs.
	for _, c := range []struct {
		id       int64
		quantity int64
		decimals int64
	}{{1, 10_000_000_000_000, 0}, {1001, 9_999_999_999_999, 0}, {1002, 10_000_000_000_000, 0}, {1003, 4_000_000_000_000_500_000, 6},
		{1004, 4_000_000_000_000_025, 2}} {
		var got struct{ Quantity, Decimals int64 }
		if err := e.DB.Read.QueryRow(`SELECT quantity, decimals FROM metered_usage WHERE id = ?`, c.id).Scan(&got.Quantity, &got.Decimals); err != nil {
			t.Fatal(err)
		}
		if got.Quantity != c.quantity || got.Decimals != c.decimals {
			t.Errorf("row %d stored as %d with %d decimals, want %d with %d", c.id, got.Quantity, got.Decimals, c.quantity, c.decimals)
		}
	}

	oct := month(t, "2026-10", "UTC")
	rep, err := ledger.Query(e.Ctx, e.DB, ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: bytesMeters})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, l := range rep.Lines {
		got[l.Customer+" "+l.Meter] = l.Quantity.String()
	}
	if got["c storage_bytes"] != "10000000000000000" || got["c storage_gauge"] != "10000000000000" || got["d storage_gauge"] != "40000000000000.25" {
		t.Fatalf("usage: %v", got)
	}

	res := e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Meters: bytesMeters, Now: at("2026-11-02T00:00:00Z"), Pricing: bytesPricing(t)})
	inv := res.Invoices[0]
	// 10^13 × 0.000000000023 = 230; 10^16 × 0.000000000023 = 230,000.
	if s := amounts(inv); s != "storage_bytes 2026-10=230000.00 storage_gauge 2026-10=230.00 | fee 0.00 true-up 0.00 total 230230.00 USD" {
		t.Fatalf("invoice: %s", s)
	}
	wantLines(t, inv, map[string]string{"storage_bytes 2026-10": "10000000000000000", "storage_gauge 2026-10": "10000000000000"})

	// Stored as it was billed: the month's 10^22 micro-units are beyond the
	// quantity column, so the line keeps its exact decimal.
	var qty int64
	var wide string
	if err := e.DB.Read.QueryRow(`SELECT quantity, quantity_wide FROM invoice_lines WHERE meter = 'storage_bytes'`).Scan(&qty, &wide); err != nil {
		t.Fatal(err)
	}
	if qty != 0 || wide != "10000000000000000" {
		t.Fatalf("stored line: quantity %d, quantity_wide %q", qty, wide)
	}
	stored, err := invoice.GetInvoice(e.Ctx, e.DB, inv.ID)
	if err != nil || !bytes.Equal(invoice.InvoiceDigest(stored), inv.Digest) || !stored.Lines[0].Quantity.Equal(q("1e16")) {
		t.Fatalf("stored invoice: %v %+v", err, stored)
	}
	if p := verified(t, e).First(); p != nil {
		t.Fatalf("verify: %v", p)
	}
}

// A sum of 10^24 (125,000 rows of 8 × 10^18 bytes, each near what one row
// holds) is exact in usage and on a priced invoice.
func TestSumTo10e24IsExact(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-31T00:00:00Z"))
	rows := make([]row, 0, 5000)
	for i := range 125_000 {
		at := ts("2026-10-01T00:00:00Z").Add(time.Duration(i) * 20 * time.Second)
		rows = append(rows, row{Customer: "c", Meter: "storage_bytes", Qty: q("8000000000000000000"), At: at})
		if len(rows) == cap(rows) {
			e.Write(rows...)
			rows = rows[:0]
		}
	}
	oct := month(t, "2026-10", "UTC")
	rep, err := ledger.Query(e.Ctx, e.DB, ledger.UsageQuery{From: oct.Start, To: oct.End, Meters: bytesMeters})
	if err != nil || len(rep.Lines) != 1 || rep.Lines[0].Quantity.String() != "1000000000000000000000000" || rep.Lines[0].Events != 125_000 {
		t.Fatalf("usage: %v %+v", err, rep)
	}
	res := e.closePeriod(t, invoice.CloseRequest{Period: oct, All: true, Meters: bytesMeters, Now: at("2026-11-02T00:00:00Z"), Pricing: bytesPricing(t)})
	// 10^24 × 0.000000000023 = 23,000,000,000,000.
	if s := amounts(res.Invoices[0]); s != "storage_bytes 2026-10=23000000000000.00 | fee 0.00 true-up 0.00 total 23000000000000.00 USD" {
		t.Fatalf("invoice: %s", s)
	}
	inv, err := invoice.GetInvoice(e.Ctx, e.DB, res.Invoices[0].ID)
	if err != nil || inv.Lines[0].Quantity.String() != "1000000000000000000000000" {
		t.Fatalf("stored invoice: %v %+v", err, inv)
	}
	if p := verified(t, e).First(); p != nil {
		t.Fatalf("verify: %v", p)
	}
}
