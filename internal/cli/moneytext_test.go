package cli

import (
	"slices"
	"strings"
	"testing"
)

// A period whose usage is a one-unit correction is a tiny negative amount:
// invoice show writes its line amount and the invoice's total as zero
// without a sign, in USD, JPY and KWD alike (issue 40, item 9).
func TestInvoiceZeroAmountHasNoSign(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig(`plans:
  - {name: usd, currency: USD, effective_from: 2026-01-01, unpriced: free, prices: [{meter: api, model: unit, unit: "0.001"}]}
  - {name: jpy, currency: JPY, effective_from: 2026-01-01, unpriced: free, prices: [{meter: api, model: unit, unit: "0.1"}]}
  - {name: kwd, currency: KWD, effective_from: 2026-01-01, unpriced: free, prices: [{meter: api, model: unit, unit: "0.0001"}]}
customers:
  default_plan: usd
`)
	at := t0("2026-10-03T10:00:00Z")
	e.write(t0("2026-10-20T00:00:00Z"),
		usageEvent{customer: "c_usd", meter: "api", qty: "-1", at: at},
		usageEvent{customer: "c_jpy", meter: "api", qty: "-1", at: at},
		usageEvent{customer: "c_kwd", meter: "api", qty: "-1", at: at},
	)
	for _, c := range []string{"jpy", "kwd"} {
		app := newApp()
		app.Writer, app.ErrWriter = new(strings.Builder), new(strings.Builder)
		if err := app.Run([]string{"hookledger", "plan", "assign", "--config", e.config, "--from", "2026-01-01", "c_" + c, c}); err != nil {
			t.Fatal(err)
		}
	}
	e.mustRun("invoice", "close", "--period", "2026-10", "--all")
	e.mustRun("verify") // recomputes the same amounts
	for _, c := range []struct{ id, customer, amount, currency string }{
		{"1", "c_jpy", "0", "JPY"}, {"2", "c_kwd", "0.000", "KWD"}, {"3", "c_usd", "0.00", "USD"},
	} {
		show := e.mustRun("invoice", "show", c.id)
		if want := "total     " + c.amount + " " + c.currency + "\n"; !strings.Contains(show, c.customer) || !strings.Contains(show, want) {
			t.Errorf("invoice %s lacks %q:\n%s", c.id, want, show)
		}
		rows := readCSV(t, e.mustRun("invoice", "show", c.id, "--format", "csv"))
		at := slices.Index(rows[0], "amount")
		if len(rows) != 2 || at < 0 || rows[1][at] != c.amount || rows[1][at+1] != c.currency {
			t.Errorf("invoice %s lines: %q, want the amount %s %s", c.id, rows, c.amount, c.currency)
		}
	}
}
