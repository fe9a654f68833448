package forward_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/stripe"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

// stripe status answers a month from the usage state once serve keeps it
// (no scan of the month's rows), and the answer is the one the ledger's
// rows give: the same lines before the state is built (read from the
// rows) and after.
func TestStripeStatusFromTheUsageState(t *testing.T) {
	fake := fakestripe.Serve(t, stripeKey)
	e, _, _ := stripeEnv(t, fake.URL, ledger.StripeStream, "1")
	for i, c := range []string{"cus_1", "cus_2", "cus_1", "cus_3", "cus_1"} {
		if r := e.Send(fmt.Sprintf("evt_%d", i), testenv.UsageBody(c, "api_requests", fmt.Sprint(i+1))); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	await.Eventually(t, 10*time.Second, "5 pushes delivered", func() bool { return rowsPushed(e, "delivered") == 5 })
	p, err := ledger.MonthPeriod("2026-11", time.UTC) // testenv.UsageBody's month
	if err != nil {
		t.Fatal(err)
	}
	status := func() string {
		t.Helper()
		lines, err := stripe.Status(context.Background(), e.DB, e.Config.Meters, p, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%+v", lines)
	}
	if _, built, _ := e.DB.StateZone(context.Background()); built {
		t.Fatal("the usage state is built before the test builds it")
	}
	fromRows := status()
	if built, err := e.Writer.BuildUsageState(context.Background(), "UTC"); err != nil || !built {
		t.Fatalf("build the usage state: %v, %v", built, err)
	}
	if fromState := status(); fromState != fromRows {
		t.Errorf("from the usage state:\n%s\nfrom the rows:\n%s", fromState, fromRows)
	}
	// cus_1's 1 + 3 + 5 = 9, agreeing with what Stripe took.
	lines, err := stripe.Status(context.Background(), e.DB, e.Config.Meters, p, "cus_1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 1 || lines[0].Ledger != "9" || lines[0].State != stripe.StateAgrees {
		t.Errorf("cus_1: %+v, want 9 agreeing", lines)
	}
	// It is the state that answered: a state edited behind the ledger's back
	// (verify's usage state check reports that) shows in the status.
	e.Exec(`UPDATE usage_state SET used = '100' WHERE customer_id = 'cus_1'`)
	if lines, err = stripe.Status(context.Background(), e.DB, e.Config.Meters, p, "cus_1", nil); err != nil || len(lines) != 1 || lines[0].Ledger != "100" {
		t.Errorf("after the state was edited: %+v, %v; want the state's 100", lines, err)
	}
}
