package invoice_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// tokenMeters declares a sum meter of tokens by model, and api.
var tokenMeters = ledger.NewMeters([]ledger.Meter{
	{Name: "tokens", Aggregation: ledger.AggSum, Unit: "tokens", Dimensions: []string{"model"}, Properties: []string{"model"}},
	{Name: "api", Aggregation: ledger.AggSum, Unit: "requests"},
})

// tokenPricing is plan "ai": from 2026-01-01 tokens priced as a whole (the
// version invoices closed before prices by dimension have), from 2026-10-01
// by model with a card for gpt-4o and gpt-4o-mini and, when withDefault, a
// default for every other model.
func tokenPricing(t *testing.T, withDefault bool) *invoice.Pricing {
	t.Helper()
	byModel := pricing.Price{Meter: "tokens", By: "model", Rates: map[string]*pricing.Price{
		"gpt-4o": {Model: pricing.Unit, Unit: dec("0.00001")},
		"gpt-4o-mini": {Model: pricing.Graduated, Tiers: []pricing.Tier{
			{UpTo: dec("100000"), Unit: pricing.MustDecimal("0.000001")}, {Unit: pricing.MustDecimal("0.0000005")}}},
	}}
	if withDefault {
		byModel.Default = &pricing.Price{Model: pricing.Unit, Unit: dec("0.00002")}
	}
	plans := []pricing.Plan{
		{Name: "ai", Currency: "USD", EffectiveFrom: "2026-01-01", Prices: []pricing.Price{
			{Meter: "tokens", Model: pricing.Unit, Unit: dec("0.00001")},
			{Meter: "api", Model: pricing.Unit, Unit: dec("0.01")},
		}},
		{Name: "ai", Currency: "USD", EffectiveFrom: "2026-10-01", Prices: []pricing.Price{
			byModel,
			{Meter: "api", Model: pricing.Unit, Unit: dec("0.01")},
		}},
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
	return &invoice.Pricing{Catalog: cat, Plans: customer.NewPlans("ai", nil)}
}

// dimAmounts lists an invoice's lines as meter[dimension] period=quantity@amount.
func dimAmounts(inv invoice.Invoice) string {
	var parts []string
	for _, l := range inv.Lines {
		p := l.Meter
		if l.Dimensions != "" {
			p += "[" + invoice.DimensionLabel(l.Dimensions) + "]"
		}
		p += " " + l.Period
		if l.Late {
			p += "*"
		}
		parts = append(parts, p+"="+l.Quantity.String()+"@"+l.Money.Amount)
	}
	return strings.Join(parts, " ") + " | total " + inv.Money.Total + " " + inv.Money.Currency
}

func model(m string) string { return `{"model":"` + m + `"}` }

// October's tokens are billed per model, each by its card, worked out by
// hand: gpt-4o 1,500,000 (two events) × 0.00001 = 15.00; gpt-4o-mini
// 200,000 on its own graduated tiers, 100,000 × 0.000001 + 100,000 ×
// 0.0000005 = 0.15; llama-3 300,000 at the default 0.00002 = 6.00; 50,000
// without a model at the default = 1.00; api 10 × 0.01 = 0.10. Total 22.25.
// September, closed with the version that priced tokens as a whole, keeps
// its one line and its digest version; verify passes on both and fails when
// a line's value is changed.
func TestPricesByDimension(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	pr := tokenPricing(t, true)
	e.SetClock(ts("2026-09-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "tokens", Qty: q("1000"), At: ts("2026-09-10T00:00:00Z"), Props: model("gpt-4o")},
		row{Customer: "c1", Meter: "tokens", Qty: q("2000"), At: ts("2026-09-11T00:00:00Z"), Props: model("gpt-4o-mini")},
	)
	sep := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-09", "UTC"), All: true, Meters: tokenMeters, Now: at("2026-10-02T00:00:00Z"), Pricing: pr})
	if got := dimAmounts(sep.Invoices[0]); got != "tokens 2026-09=3000@0.03 | total 0.03 USD" {
		t.Errorf("September, priced as a whole: %s", got)
	}

	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "tokens", Qty: q("1000000"), At: ts("2026-10-03T00:00:00Z"), Props: model("gpt-4o")},
		row{Customer: "c1", Meter: "tokens", Qty: q("200000"), At: ts("2026-10-04T00:00:00Z"), Props: model("gpt-4o-mini")},
		row{Customer: "c1", Meter: "tokens", Qty: q("500000"), At: ts("2026-10-05T00:00:00Z"), Props: model("gpt-4o")},
		row{Customer: "c1", Meter: "tokens", Qty: q("300000"), At: ts("2026-10-06T00:00:00Z"), Props: model("llama-3")},
		row{Customer: "c1", Meter: "tokens", Qty: q("50000"), At: ts("2026-10-07T00:00:00Z")},
		row{Customer: "c1", Meter: "api", Qty: q("10"), At: ts("2026-10-07T00:00:00Z")},
	)
	oct := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: tokenMeters, Now: at("2026-11-02T00:00:00Z"), Pricing: pr})
	inv := oct.Invoices[0]
	want := `api 2026-10=10@0.10 tokens[model=""] 2026-10=50000@1.00 tokens[model=gpt-4o] 2026-10=1500000@15.00 ` +
		`tokens[model=gpt-4o-mini] 2026-10=200000@0.15 tokens[model=llama-3] 2026-10=300000@6.00 | total 22.25 USD`
	if got := dimAmounts(inv); got != want {
		t.Errorf("October by model:\n got %s\nwant %s", got, want)
	}
	if l := inv.Lines[2]; l.Dimensions != `{"model":"gpt-4o"}` || l.Rows != 2 {
		t.Errorf("gpt-4o line: dimensions %s, %d rows; want {\"model\":\"gpt-4o\"} and 2", l.Dimensions, l.Rows)
	}
	stored, err := invoice.GetInvoice(e.Ctx, e.DB, inv.ID)
	if err != nil || dimAmounts(*stored) != want {
		t.Fatalf("stored October invoice: %v\n%s", err, dimAmounts(*stored))
	}
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Fatalf("verify: %s", problems(rep))
	}

	// The trace's view of a line: only the rows of its value.
	check, err := invoice.CheckLine(e.Ctx, e.DB, inv.Lines[3])
	if err != nil || check.Problem != "" || len(check.Rows) != 1 || !check.Rows[0].Quantity.Equal(q("200000")) {
		t.Fatalf("gpt-4o-mini line's rows: %+v %v", check, err)
	}

	// The gpt-4o line relabelled as gpt-4o-mini's: its rows, quantity and
	// digest no longer match, and the invoice's digest (v4) covers the value.
	e.allowInvoiceEdits()
	e.Exec(`UPDATE invoice_lines SET dimensions = ? WHERE invoice_id = ? AND line_no = 3`, model("gpt-4o-mini"), inv.ID)
	rep, err = invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	p := problems(rep)
	for _, w := range []string{"stored digest does not match", "line 3 (tokens model=gpt-4o-mini 2026-10): covers 1 usage", "line 4 bills meter \"tokens\" (model=gpt-4o-mini) for 2026-10 a second time",
		`meter "tokens" has rows with model=gpt-4o in 2026-10`} {
		if !strings.Contains(p, w) {
			t.Errorf("verify after relabelling a line: want %q in\n%s", w, p)
		}
	}
	if strings.Contains(p, "2026-09") || strings.Contains(p, fmt.Sprintf("invoices row %d:", sep.Invoices[0].ID)) {
		t.Errorf("September's invoice (the older digest version) no longer verifies:\n%s", p)
	}
}

// allowInvoiceEdits drops what refuses an edit of an invoice line, to tamper.
func (e *env) allowInvoiceEdits() { e.allowEdits("invoice_lines") }

// allowEdits drops what refuses an edit or a delete of table's rows, to
// tamper: its triggers (SQLite's TABLE_no_update and TABLE_no_delete; on
// PostgreSQL every trigger of the table's own).
func (e *env) allowEdits(table string) {
	if e.DB.Postgres() {
		e.Exec(`ALTER TABLE ` + table + ` DISABLE TRIGGER USER`)
		return
	}
	e.Exec(`DROP TRIGGER IF EXISTS ` + table + `_no_update`)
	e.Exec(`DROP TRIGGER IF EXISTS ` + table + `_no_delete`)
}

// A model with no card and no default is refused at close, naming the
// customer, the meter and the value: a close of that customer writes
// nothing; a close for all invoices everyone else and leaves the period
// open for that customer (Excluded).
func TestCloseRefusesValueWithoutCard(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "tokens", Qty: q("1000"), At: ts("2026-10-03T00:00:00Z"), Props: model("gpt-4o")},
		row{Customer: "c7", Meter: "tokens", Qty: q("5"), At: ts("2026-10-04T00:00:00Z"), Props: model("llama-3")},
	)
	want := `customer "c7": meter "tokens" has usage with model "llama-3" in 2026-10, and plan "ai" from 2026-10-01 has no rate card for it and no default`
	_, err := invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), Customer: "c7", Meters: tokenMeters,
		Now: at("2026-11-02T00:00:00Z"), Pricing: tokenPricing(t, false)})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("close of c7: %v", err)
	}
	if n, m := e.Count("invoices"), e.Count("period_closes"); n != 0 || m != 0 {
		t.Errorf("the refused close wrote %d invoices and %d closes", n, m)
	}
	res, err := invoice.Close(e.Ctx, e.DB, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: tokenMeters,
		Now: at("2026-11-02T00:00:00Z"), Pricing: tokenPricing(t, false)})
	if err != nil || len(res.Invoices) != 1 || res.Invoices[0].Customer != "c1" || len(res.Excluded) != 1 || !strings.Contains(res.Excluded[0].Error, want) {
		t.Fatalf("close for all: %v, %+v; want c1 invoiced and c7 excluded with why", err, res)
	}
}

// After October is closed, late gpt-4o-mini usage is billed on November's
// invoice as a late line of that model only, at the margin of its own
// tiers, carrying October's rounding: 200,000 tokens were billed 0.15
// (100,000 × 0.000001 + 100,000 × 0.0000005); 250,000 priced once are
// 0.175 → 0.18 (half even), so the late line bills 0.18 − 0.15 = 0.03
// (its margin, 0.025, rounded on its own would be 0.02 and October would
// add up to 0.17). A void of a gpt-4o event of October is a late line of
// gpt-4o only: 10.00 − 15.00 = −5.00.
func TestLateUsageAndVoidsByDimension(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	pr := tokenPricing(t, true)
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "tokens", Qty: q("1000000"), At: ts("2026-10-03T00:00:00Z"), Props: model("gpt-4o")},
		row{Customer: "c1", Meter: "tokens", Qty: q("500000"), At: ts("2026-10-04T00:00:00Z"), Props: model("gpt-4o")},
		row{Customer: "c1", Meter: "tokens", Qty: q("200000"), At: ts("2026-10-05T00:00:00Z"), Props: model("gpt-4o-mini")},
	)
	e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-10", "UTC"), All: true, Meters: tokenMeters, Now: at("2026-11-02T00:00:00Z"), Pricing: pr})

	e.SetClock(ts("2026-11-03T00:00:00Z"))
	e.Write(row{Customer: "c1", Meter: "tokens", Qty: q("50000"), At: ts("2026-10-30T00:00:00Z"), Props: model("gpt-4o-mini")})
	if _, err := e.void("evt_000002", "test traffic"); err != nil {
		t.Fatal(err)
	}
	nov := e.closePeriod(t, invoice.CloseRequest{Period: month(t, "2026-11", "UTC"), All: true, Meters: tokenMeters, Now: at("2026-12-02T00:00:00Z"), Pricing: pr})
	inv := byCustomer(nov.Invoices)["c1"]
	if got, want := dimAmounts(inv), "tokens[model=gpt-4o] 2026-10*=-500000@-5.00 tokens[model=gpt-4o-mini] 2026-10*=50000@0.03 | total -4.97 USD"; got != want {
		t.Fatalf("November's late lines:\n got %s\nwant %s", got, want)
	}
	for _, l := range inv.Lines {
		if want := map[string]string{model("gpt-4o"): "1500000", model("gpt-4o-mini"): "200000"}[l.Dimensions]; l.Money.BilledBefore != want {
			t.Errorf("late %s billed before %s, want %s (the value's own total)", l.Dimensions, l.Money.BilledBefore, want)
		}
	}
	if l := inv.Lines[0]; l.Adjustments != 1 || l.Rows != 0 {
		t.Errorf("late void line covers %d rows and %d corrections, want 0 and 1", l.Rows, l.Adjustments)
	}
	rep, err := invoice.Verify(e.Ctx, e.DB)
	if err != nil {
		t.Fatal(err)
	}
	if rep.First() != nil {
		t.Fatalf("verify: %s", problems(rep))
	}
}

// A correction's dry run prices its change at the margin, per model: voiding
// 500,000 gpt-4o tokens of October takes 5 off; moving 150,000 gpt-4o-mini
// tokens to another customer takes them off the top of c1's 200,000 on the
// card's tiers (100,000 × 0.0000005 + 50,000 × 0.000001 = 0.1) and adds them
// at the bottom of c2's (100,000 × 0.000001 + 50,000 × 0.0000005 = 0.125).
func TestCorrectionDryRunMoney(t *testing.T) {
	e := newEnv(t)
	defer e.Close()
	pr := tokenPricing(t, true)
	e.SetClock(ts("2026-10-20T00:00:00Z"))
	e.Write(
		row{Customer: "c1", Meter: "tokens", Qty: q("1000000"), At: ts("2026-10-03T00:00:00Z"), Props: model("gpt-4o")},
		row{Customer: "c1", Meter: "tokens", Qty: q("500000"), At: ts("2026-10-04T00:00:00Z"), Props: model("gpt-4o")},
		row{Customer: "c1", Meter: "tokens", Qty: q("50000"), At: ts("2026-10-05T00:00:00Z"), Props: model("gpt-4o-mini")},
		row{Customer: "c1", Meter: "tokens", Qty: q("150000"), At: ts("2026-10-05T00:00:00Z"), Props: model("gpt-4o-mini")},
	)
	rows := func(id string) []ledger.Row {
		recs, err := e.DB.EventLedgerRows(e.Ctx, "test", id)
		if err != nil {
			t.Fatal(err)
		}
		return ledger.StoredRows(recs)
	}
	void := ledger.Changes(rows("evt_000002"), nil, tokenMeters, time.UTC)
	moved := rows("evt_000004")
	after := []ledger.Row{moved[0]}
	after[0].Customer = "c2"
	amend := ledger.Changes(moved, after, tokenMeters, time.UTC)
	changes := ledger.MergeChanges(append(void, amend...))
	if err := invoice.PriceChanges(e.Ctx, e.DB, pr, tokenMeters, changes); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, c.Customer+" "+c.Meter+" "+c.Period+" "+c.Change.String()+" "+c.Money+" "+c.Currency)
	}
	want := []string{"c1 tokens 2026-10 -650000 -5.1000000000000 USD", "c2 tokens 2026-10 150000 0.1250000000000 USD"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("dry-run money:\n got %s\nwant %s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
