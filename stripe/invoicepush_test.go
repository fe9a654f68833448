package stripe

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

func TestInvoicePush(t *testing.T) {
	off := false
	send := &config.StripeInvoices{Enabled: true, CollectionMethod: config.SendInvoice, DaysUntilDue: 14, Finalize: &off}
	inv := invoice.Invoice{ID: 7, Customer: "cus_1", Period: "2026-11", PeriodStart: 1793491200000, PeriodEnd: 1796083200000,
		Digest: []byte{0xab, 0xcd},
		Lines: []invoice.InvoiceLine{
			{LineNo: 1, Meter: "api_requests", Period: "2026-11", Dimensions: `{"model":"gpt-4o"}`, Quantity: ledger.RowQuantity(40000, 0),
				Money: invoice.LineMoney{Amount: "12.34", PlanVersion: "pro@2026-01-01"}, PeriodStart: 1793491200000, PeriodEnd: 1796083200000},
			{LineNo: 2, Meter: "storage_gb", Period: "2026-11", Quantity: ledger.RowQuantity(3, 0)}, // unpriced: no item
			{LineNo: 3, Meter: "api_requests", Period: "2026-10", Late: true, Quantity: ledger.RowQuantity(-1000, 0),
				Money: invoice.LineMoney{Amount: "-0.30", PlanVersion: "pro@2026-01-01"}, PeriodStart: 1790812800000, PeriodEnd: 1793491200000},
		},
		Money: invoice.InvoiceMoney{Plan: "pro", Currency: "USD", Fee: "10.00", TrueUp: "0.01", Total: "22.05"}}
	p, ok, err := InvoicePush(inv, true, send)
	if err != nil || !ok {
		t.Fatalf("push: %v, %v", ok, err)
	}
	var items []InvoiceItemPush
	if err := json.Unmarshal([]byte(p.Items), &items); err != nil {
		t.Fatal(err)
	}
	var keys, amounts []string
	for _, it := range items {
		keys, amounts = append(keys, it.Key), append(amounts, it.Amount)
	}
	if strings.Join(keys, " ") != "line:1 line:3 fee minimum" || strings.Join(amounts, " ") != "1234 -30 1000 1" {
		t.Errorf("items %v of %v, want lines 1 and 3, the fee and the minimum: 1234 -30 1000 1", keys, amounts)
	}
	if p.TotalMinor != "2205" || p.Currency != "USD" || p.StripeCustomer != "cus_1" || p.DaysUntilDue != 14 || p.Finalize != 0 ||
		p.CollectionMethod != config.SendInvoice || !strings.HasPrefix(p.Identifier, "hl_") {
		t.Errorf("push %+v", p)
	}
	if d := items[0].Description; d != "api_requests model=gpt-4o, 2026-11: 40000 at pro@2026-01-01" {
		t.Errorf("line 1 described as %q", d)
	}
	if d := items[1].Description; !strings.Contains(d, "2026-10 (late usage)") || items[1].PeriodStart != 1790812800 {
		t.Errorf("the late line described as %q from %d, want its own period", d, items[1].PeriodStart)
	}
	if items[0].Digest == "" && inv.Lines[0].Digest != nil {
		t.Error("line 1's item has no digest")
	}

	// Linked customers: the Stripe customer is read when sent.
	if p, _, _ := InvoicePush(inv, false, send); p.StripeCustomer != "" {
		t.Errorf("a linked customer's push names %q", p.StripeCustomer)
	}
	// Nothing to charge, or nothing priced: not sent.
	for _, total := range []string{"0.00", "-5.00", ""} {
		z := inv
		z.Money.Total = total
		if _, ok, err := InvoicePush(z, true, send); ok || err != nil {
			t.Errorf("total %q: sent %v, %v; want not sent", total, ok, err)
		}
	}
	// Items that do not add up to the total are a fault, never sent.
	bad := inv
	bad.Money.Total = "22.06"
	if _, _, err := InvoicePush(bad, true, send); err == nil || !strings.Contains(err.Error(), "add up to 22.05") {
		t.Errorf("items not adding up: %v", err)
	}
	// An amount finer than the currency's minor unit is refused, not rounded.
	jpy := inv
	jpy.Money.Currency, jpy.Money.Total, jpy.Money.Fee, jpy.Money.TrueUp = "JPY", "1.5", "0", "0"
	jpy.Lines = []invoice.InvoiceLine{{LineNo: 1, Meter: "api_requests", Money: invoice.LineMoney{Amount: "1.5"}}}
	if _, _, err := InvoicePush(jpy, true, send); err == nil {
		t.Error("1.5 JPY was sent")
	}

	// Credits: one negative item; the items add up to the amount due, which
	// is what Stripe is asked to charge. Fully paid by credits: not sent.
	cr := inv
	cr.Credits = []invoice.InvoiceCredit{{Grant: "topup", Amount: "20.00", Balance: "0.00"}, {Grant: "promo", Amount: "1.05", Balance: "3.95"}}
	cr.Money.Credits, cr.Money.AmountDue = "21.05", "1.00"
	p, ok, err = InvoicePush(cr, true, send)
	if err != nil || !ok {
		t.Fatalf("push with credits: %v, %v", ok, err)
	}
	items = nil
	if err := json.Unmarshal([]byte(p.Items), &items); err != nil {
		t.Fatal(err)
	}
	last := items[len(items)-1]
	if last.Key != "credits" || last.Amount != "-2105" || !strings.Contains(last.Description, "topup 20.00, promo 1.05") ||
		p.Total != "1.00" || p.TotalMinor != "100" {
		t.Errorf("credits item %+v, push total %s (%s minor): want -2105 and an amount due of 1.00 (100)", last, p.Total, p.TotalMinor)
	}
	cr.Money.Credits, cr.Money.AmountDue = "22.05", "0.00"
	if _, ok, err := InvoicePush(cr, true, send); ok || err != nil {
		t.Errorf("an invoice credits paid whole: sent %v, %v; want not sent", ok, err)
	}

	// A period split at a plan change: each part's fee and true-up are items.
	sp := inv
	sp.Money.Fee, sp.Money.TrueUp, sp.Money.Total = "20.00", "1.00", "33.04"
	sp.Credits, sp.Money.Credits, sp.Money.AmountDue = nil, "", ""
	sp.Parts = []invoice.InvoicePart{
		{Start: 1793491200000, End: 1794787200000, Version: "basic@2026-01-01", Fee: "5.00", TrueUp: "1.00"},
		{Start: 1794787200000, End: 1796083200000, Version: "pro@2026-01-01", Fee: "15.00", TrueUp: "0.00"}}
	p, ok, err = InvoicePush(sp, true, send)
	if err != nil || !ok {
		t.Fatalf("push of a split period: %v, %v", ok, err)
	}
	items = nil
	if err := json.Unmarshal([]byte(p.Items), &items); err != nil {
		t.Fatal(err)
	}
	keys, amounts = nil, nil
	for _, it := range items {
		keys, amounts = append(keys, it.Key), append(amounts, it.Amount)
	}
	if strings.Join(keys, " ") != "line:1 line:3 fee:1 minimum:1 fee:2" || strings.Join(amounts, " ") != "1234 -30 500 100 1500" ||
		items[2].Description != "Plan basic, 2026-11, 2026-11-01 to 2026-11-16" || items[4].PeriodStart != 1794787200 {
		t.Errorf("items of a split period: %v %v %+v", keys, amounts, items)
	}
	// The part's days are the invoice's zone's: Berlin's 16 November begins
	// at 23:00 UTC on the 15th.
	berlin := sp
	berlin.TZ = "Europe/Berlin"
	berlin.Parts = []invoice.InvoicePart{
		{Start: 1793487600000, End: 1794783600000, Version: "basic@2026-01-01", Fee: "5.00", TrueUp: "1.00"},
		{Start: 1794783600000, End: 1796079600000, Version: "pro@2026-01-01", Fee: "15.00", TrueUp: "0.00"}}
	if p, _, err = InvoicePush(berlin, true, send); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Items, "Plan pro, 2026-11, 2026-11-16 to 2026-12-01") {
		t.Errorf("a Berlin part's days: %s", p.Items)
	}
}
