package invoice

import (
	"fmt"
	"testing"

	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// DrawCredit, hand-computed: of seven grants only three may pay USD at
// now (one is scheduled, one past its expiry without its row yet, one
// voided, one in JPY), and they are drawn in the burn order: priority 10
// before 50, the earlier expiry first, each up to what it has left (a's
// 100.00 less a burn of 20.00).
func TestDrawCreditInTheBurnOrder(t *testing.T) {
	const now = 1_000
	var es []schema.CreditEntry
	add := func(e schema.CreditEntry) {
		e.ID, e.Customer, e.RecordedAt = int64(len(es)+1), "cus_1", 1
		if e.Currency == "" {
			e.Currency = "USD"
		}
		es = append(es, e)
	}
	grant := func(id, amount string, priority, effective, expires int64) {
		add(schema.CreditEntry{Kind: CreditGranted, GrantID: id, Amount: amount, Balance: amount, Category: "paid",
			Priority: priority, EffectiveAt: effective, ExpiresAt: expires})
	}
	grant("a", "100.00", 50, 0, 0)
	grant("b", "50.00", 10, 0, 5_000)
	grant("c", "30.00", 10, 0, 0)
	grant("d", "20.00", 1, 2_000, 0) // scheduled
	grant("e", "10.00", 1, 0, 900)   // expired, its row not written yet
	grant("f", "40.00", 1, 0, 0)
	add(schema.CreditEntry{Kind: CreditVoided, GrantID: "f", Amount: "40.00", Balance: "0.00"})
	es = append(es, schema.CreditEntry{ID: int64(len(es) + 1), Kind: CreditGranted, GrantID: "g", Customer: "cus_1", Currency: "JPY",
		Amount: "10000", Balance: "10000", Category: "paid", Priority: 1})
	add(schema.CreditEntry{Kind: CreditBurned, GrantID: "a", Amount: "20.00", Balance: "80.00", InvoiceID: 1})
	grants, err := GrantsOf(es)
	if err != nil {
		t.Fatal(err)
	}
	if !HasCredit(grants, now) || HasCredit(grants[3:6], now) {
		t.Errorf("HasCredit: want true for all, false for the scheduled, expired and voided")
	}
	for _, tc := range []struct {
		spent, balance, drawn, available string
		grants                           string // id:drawn/available, in the burn order
	}{
		{"100.00", "160.00", "100.00", "60.00", "b:50.00/0.00 c:30.00/0.00 a:20.00/60.00"},
		{"0.00", "160.00", "0.00", "160.00", "b:0.00/50.00 c:0.00/30.00 a:0.00/80.00"},
		{"49.99", "160.00", "49.99", "110.01", "b:49.99/0.01 c:0.00/30.00 a:0.00/80.00"},
		{"160.00", "160.00", "160.00", "0.00", "b:50.00/0.00 c:30.00/0.00 a:80.00/0.00"},
		{"200.00", "160.00", "160.00", "0.00", "b:50.00/0.00 c:30.00/0.00 a:80.00/0.00"},
	} {
		d, err := DrawCredit(grants, "USD", pricing.MustDecimal(tc.spent), now)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for i, g := range d.Grants {
			if i > 0 {
				got += " "
			}
			got += fmt.Sprintf("%s:%s/%s", g.Grant.ID, g.Drawn, g.Available)
		}
		if d.Currency != "USD" || d.Spent.String() != tc.spent || d.Balance.String() != tc.balance || d.Drawn.String() != tc.drawn ||
			d.Available.String() != tc.available || got != tc.grants {
			t.Errorf("spent %s: balance %s drawn %s available %s, %s; want %s %s %s, %s", tc.spent, d.Balance, d.Drawn, d.Available, got,
				tc.balance, tc.drawn, tc.available, tc.grants)
		}
	}
	// Yen pay only yen; no grant at all is no credit.
	d, err := DrawCredit(grants, "JPY", pricing.MustDecimal("2500"), now)
	if err != nil || d.Balance.String() != "10000" || d.Available.String() != "7500" || len(d.Grants) != 1 {
		t.Errorf("JPY: %+v %v", d, err)
	}
	d, err = DrawCredit(nil, "USD", pricing.MustDecimal("10.00"), now)
	if err != nil || d.Balance.String() != "0.00" || d.Drawn.String() != "0.00" || d.Available.String() != "0.00" || len(d.Grants) != 0 {
		t.Errorf("no grants: %+v %v", d, err)
	}
	if _, err := DrawCredit(grants, "usd", pricing.MustDecimal("1"), now); err == nil {
		t.Error("a bad currency draws nothing: want an error")
	}
	if _, err := DrawCredit(grants, "USD", pricing.MustDecimal("1.001"), now); err == nil {
		t.Error("a spend finer than the currency's minor unit: want an error")
	}
}
