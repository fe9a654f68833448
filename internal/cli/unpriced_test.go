package cli

import (
	"bytes"
	"strings"
	"testing"
)

// invoice close says on stderr which usage no price bills (a version with
// a fee and no price for api), and still makes the invoice.
func TestInvoiceCloseWarnsOfUnpricedUsage(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig(`plans:
  - {name: basic, currency: USD, effective_from: 2026-01-01, fee: "5.00"}
customers:
  default_plan: basic
`)
	e.write(t0("2026-10-20T00:00:00Z"), usageEvent{customer: "c1", meter: "api", qty: "7", at: t0("2026-10-03T10:00:00Z")})
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	if err := app.Run([]string{"hookledger", "invoice", "close", "--config", e.config, "--period", "2026-10", "--all"}); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	want := `warning: customer "c1": plan basic@2026-01-01 has no price for meter "api", so its usage in 2026-10 is billed as a quantity with no amount`
	if !strings.Contains(errOut.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
	}
	if n := e.count(`SELECT COUNT(*) FROM invoices WHERE total = '5.00'`); n != 1 {
		t.Errorf("%d invoices of 5.00, want the fee-only invoice", n)
	}
}
