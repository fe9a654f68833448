package forward_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/stripe"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

// invoiceCalls is how many calls one invoice of three items takes when
// nothing fails: the lookup, the create, the items' lookup, three items,
// the finalize.
const invoiceCalls = 7

// kill -9 of serve at every step of sending an invoice to Stripe: the call
// in flight is held until serve is dead, then Stripe completes it (the
// answer never heard). Serve restarted finishes the same invoice, and
// Stripe holds exactly one, with three items adding up to the total.
func TestStripeInvoiceKill9AtEveryStep(t *testing.T) {
	bin := testenv.Binary(t)
	var cases []testenv.Case
	for step := 1; step <= invoiceCalls; step++ {
		cases = append(cases, testenv.Case{Name: fmt.Sprintf("killed at call %d", step), Run: func(t *testing.T, bin string) {
			testInvoiceKilledAt(t, bin, step)
		}})
	}
	testenv.Parallel(t, bin, cases)
}

func testInvoiceKilledAt(t *testing.T, bin string, step int) {
	dir := t.TempDir()
	fake := fakestripe.Serve(t, e2eStripeKey)
	fake.Gate, fake.HoldAt = make(chan struct{}), step
	if err := os.WriteFile(filepath.Join(dir, "hookledger.yml"), fmt.Appendf(nil, `data: ./data
providers:
  - name: default
    scheme: standard
    secrets: [%q]
stripe:
  api_key: ${STRIPE_API_KEY}
  api_base: %s
  customers: identity
  timeout: 2s
  backoff: 50ms
  max_backoff: 200ms
  invoices: {enabled: true}
meters:
  - name: api_requests
plans:
  - name: pro
    currency: USD
    effective_from: "2026-01-01"
    fee: "10.00"
    minimum: "50.00"
    prices: [{meter: api_requests, model: unit, unit: "0.0015"}]
customers:
  default_plan: pro
`+testenv.UsageYAML, e2e.Secret, fake.URL), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"STRIPE_API_KEY=" + e2eStripeKey}
	cmd, _, url := testenv.StartServe(t, bin, dir, env)
	now := time.Now().UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC).AddDate(0, -1, 0) // last month, whatever today's day
	sendUsage(t, func() string { return url }, "evt_1", "cus_1", "10000", time.Date(month.Year(), month.Month(), 10, 12, 0, 0, 0, time.UTC))
	if out, err := testenv.Run(bin, dir, env, "invoice", "close", "--period", month.Format("2006-01"), "--all"); err != nil {
		t.Fatalf("invoice close: %v\n%s", err, out)
	}
	await.Eventually(t, 30*time.Second, fmt.Sprintf("call %d in flight", step), func() bool {
		fake.Mu.Lock()
		defer fake.Mu.Unlock()
		return fake.Arrived >= step
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	close(fake.Gate) // Stripe does what the call asked; serve, killed, never hears
	cmd2, _, _ := testenv.StartServe(t, bin, dir, env)
	defer cmd2.Process.Signal(os.Interrupt)
	var lines []stripe.InvoiceLine
	await.Eventually(t, 30*time.Second, "stripe invoices agrees", func() bool {
		out, err := testenv.Run(bin, dir, env, "stripe", "invoices", "--period", month.Format("2006-01"), "--format", "json")
		lines = nil
		return err == nil && json.Unmarshal([]byte(out), &lines) == nil
	})
	invs := fake.Invoices()
	if len(invs) != 1 {
		t.Fatalf("Stripe holds %d invoices, want 1: %+v", len(invs), invs)
	}
	var amounts []string
	for _, it := range invs[0].Items {
		amounts = append(amounts, it.Amount.String())
	}
	if fmt.Sprint(amounts) != "[1500 1000 2500]" || invs[0].Status != "open" || invs[0].AmountDue().String() != "5000" {
		t.Errorf("Stripe's invoice: items %v, %s, due %s; want [1500 1000 2500], open, 5000", amounts, invs[0].Status, invs[0].AmountDue())
	}
	if len(lines) != 1 || lines[0].Stripe.StripeInvoice != invs[0].ID || lines[0].Stripe.AmountDue != "5000" {
		t.Errorf("stripe invoices: %+v, want %s due 5000", lines, invs[0].ID)
	}
}
