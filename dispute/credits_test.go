package dispute

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
)

// A trace of an invoice prepaid credits paid shows the grants behind it:
// what each gave, what it had left, and the grant as it was made.
func TestTraceShowsCreditGrants(t *testing.T) {
	e := newEnv(t)
	pr := proPricing(t)
	op := &custody.GrantCredit{Request: invoice.GrantRequest{ID: "prepay-1", Customer: "cus_2", Currency: "USD", Amount: "30.00",
		Priority: 1, Reason: "prepaid in September", Actor: "billing@acme"}}
	if err := e.Writer.Submit(context.Background(), op); err != nil {
		t.Fatal(err)
	}
	e.send("default", "evt_3", "cus_2", "500", "2026-10-21T11:00:00Z")
	e.Clock.Set(time.Date(2026, 11, 1, 2, 0, 0, 0, time.UTC))
	res := e.closePriced("2026-10", pr)
	if len(res.Invoices) != 1 {
		t.Fatalf("close: %+v", res)
	}
	inv := res.Invoices[0]
	// 500 requests are free; the 29.00 fee and 21.00 true-up make 50.00, of which the grant pays 30.00.
	if inv.Money.Total != "50.00" || inv.Money.Credits != "30.00" || inv.Money.AmountDue != "20.00" {
		t.Fatalf("invoice: total %s, credits %s, due %s; want 50.00, 30.00, 20.00", inv.Money.Total, inv.Money.Credits, inv.Money.AmountDue)
	}

	tr := e.trace(fmt.Sprintf("invoice:%d", inv.ID))
	v := tr.Invoices[0]
	if v.CreditsApplied != "30.00" || v.AmountDue != "20.00" || len(v.Credits) != 1 || v.Credits[0].Granted == nil ||
		v.Credits[0].Granted.Reason != "prepaid in September" || v.Credits[0].BalanceAfter != "0.00" || !v.DigestOK {
		t.Fatalf("trace of the invoice: %+v, credits %+v", v.Money, v.Credits)
	}
	var out bytes.Buffer
	if err := WriteTable(&out, tr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"30.00 USD applied, amount due 20.00 USD", "grant prepay-1 gave 30.00 (0.00 left) of 30.00 USD, paid, priority 1", "granted by billing@acme: prepaid in September"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, out.String())
		}
	}
}
