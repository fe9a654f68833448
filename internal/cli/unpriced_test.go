package cli

import (
	"bytes"
	"os"
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

// A customer moved from a USD plan to a EUR one: its late usage of the USD
// month goes on an invoice of its own in USD, beside its EUR invoice, and
// the close makes every invoice (exit 0).
func TestInvoiceCloseInvoicesLateUsageOfAnotherCurrencyApart(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig(`plans:
  - {name: us, currency: USD, effective_from: 2026-01-01, prices: [{meter: api, model: unit, unit: "1"}], unpriced: free}
  - {name: eu, currency: EUR, effective_from: 2026-01-01, prices: [{meter: api, model: unit, unit: "1"}], unpriced: free}
customers:
  default_plan: us
`)
	e.write(t0("2026-10-20T00:00:00Z"), usageEvent{customer: "c1", meter: "api", qty: "2", at: t0("2026-10-03T10:00:00Z")})
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &errOut
		err := app.Run(append([]string{"hookledger"}, args...))
		return out.String(), errOut.String(), err
	}
	if _, stderr, err := run("invoice", "close", "--config", e.config, "--period", "2026-10", "--all"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if _, stderr, err := run("plan", "assign", "--config", e.config, "c1", "eu", "--from", "2026-11-01"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	e.write(t0("2026-11-20T00:00:00Z"),
		usageEvent{customer: "c1", meter: "api", qty: "3", at: t0("2026-10-04T10:00:00Z")}, // late October, USD
		usageEvent{customer: "c1", meter: "api", qty: "5", at: t0("2026-11-04T10:00:00Z")},
		usageEvent{customer: "c2", meter: "api", qty: "7", at: t0("2026-11-05T10:00:00Z")})
	out, stderr, err := run("invoice", "close", "--config", e.config, "--period", "2026-11", "--all")
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{
		"invoice 2 (c1, plan eu): fee 0.00, true-up 0.00, total 5.00 EUR",
		"invoice 3 (c1, plan us): late usage only, total 3.00 USD",
		"invoice 4 (c2, plan us): fee 0.00, true-up 0.00, total 7.00 USD",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("invoice close lacks %q:\n%s", want, out)
		}
	}
	if n := e.count(`SELECT COUNT(*) FROM invoices WHERE period = '2026-11' AND customer_id = 'c1'`); n != 2 {
		t.Errorf("%d November invoices of c1, want 2 (EUR and USD)", n)
	}
	out, _, err = run("invoice", "show", "--config", e.config, "3")
	if err != nil || !strings.Contains(out, "none: late usage only, in the currency that priced its period") {
		t.Errorf("invoice show 3: %v\n%s", err, out)
	}
}

// A customer whose plan is no longer declared: invoice close --all makes
// every other invoice, names the customer and why on stderr and exits 3;
// with the plan declared again, a close of that customer alone invoices it.
func TestInvoiceCloseAllExcludesACustomerItCannotInvoice(t *testing.T) {
	e := newCLIEnv(t)
	base, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	plans := `plans:
  - {name: us, currency: USD, effective_from: 2026-01-01, prices: [{meter: api, model: unit, unit: "1"}], unpriced: free}
  - {name: legacy, currency: USD, effective_from: 2026-01-01, prices: [{meter: api, model: unit, unit: "2"}], unpriced: free}
customers:
  default_plan: us
`
	e.appendConfig(plans)
	run := func(args ...string) (string, string, error) {
		var out, errOut bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &errOut
		err := app.Run(append([]string{"hookledger"}, args...))
		return out.String(), errOut.String(), err
	}
	e.write(t0("2026-10-20T00:00:00Z"), usageEvent{customer: "c1", meter: "api", qty: "3", at: t0("2026-10-03T10:00:00Z")},
		usageEvent{customer: "c2", meter: "api", qty: "5", at: t0("2026-10-04T10:00:00Z")})
	if _, stderr, err := run("plan", "assign", "--config", e.config, "c1", "legacy", "--from", "2026-01-01"); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	// legacy taken out of the configuration.
	if err := os.WriteFile(e.config, append(base, strings.ReplaceAll(plans, `  - {name: legacy, currency: USD, effective_from: 2026-01-01, prices: [{meter: api, model: unit, unit: "2"}], unpriced: free}
`, "")...), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := run("invoice", "close", "--config", e.config, "--period", "2026-10", "--all")
	if exitStatus(err) != exitProblem {
		t.Fatalf("exit %d (%v), want 3\n%s%s", exitStatus(err), err, out, stderr)
	}
	want := `error: customer "c1" was not invoiced: customer "c1": no such plan version: plan "legacy" is not declared`
	if !strings.Contains(stderr, want) || !strings.Contains(out, "invoice 1 (c2, plan us)") {
		t.Errorf("stderr lacks %q, or stdout c2's invoice:\n%s%s", want, out, stderr)
	}
	if n := e.count(`SELECT COUNT(*) FROM invoices`); n != 1 {
		t.Errorf("%d invoices, want c2's", n)
	}
	// Declared again: c1's own close.
	if err := os.WriteFile(e.config, append(base, plans...), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, stderr, err = run("invoice", "close", "--config", e.config, "--period", "2026-10", "--customer", "c1"); err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr)
	}
	if !strings.Contains(out, "invoice 2 (c1, plan legacy): fee 0.00, true-up 0.00, total 6.00 USD") {
		t.Errorf("c1's close:\n%s", out)
	}
	if out, _, err = run("verify", "--config", e.config); err != nil {
		t.Errorf("verify: %v\n%s", err, out)
	}
}

// plan assign from a day inside a month prints, before it stores it, what
// it does to the month: the draft split at the change, each part's plan
// and prorated fee, beside the draft without it; a month's first day, or
// the same plan, prints nothing of the kind.
func TestPlanAssignPreviewsAMidMonthChange(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig(`plans:
  - {name: us, currency: USD, effective_from: 2026-01-01, fee: "31.00", prices: [{meter: api, model: unit, unit: "1"}], unpriced: free}
  - {name: big, currency: USD, effective_from: 2026-01-01, fee: "62.00", prices: [{meter: api, model: unit, unit: "1"}], unpriced: free}
  - {name: eu, currency: EUR, effective_from: 2026-01-01, fee: "10.00", prices: [{meter: api, model: unit, unit: "1"}], unpriced: free}
customers:
  default_plan: us
`)
	e.write(t0("2026-10-20T00:00:00Z"), usageEvent{customer: "c1", meter: "api", qty: "1", at: t0("2026-10-03T10:00:00Z")})
	for _, tc := range []struct{ plan, from, want string }{
		// 31.00 for 15 of 31 days, 62.00 for 16: 15.00 and 32.00.
		{"big", "2026-12-16", "2026-12 (UTC) splits at 2026-12-16: usage is priced by event time, each plan's fee and minimum prorated by its part:\n" +
			"  part 2026-12-01 to 2026-12-16: us@2026-01-01, fee 15.00, true-up 0.00 USD\n" +
			"  part 2026-12-16 to 2027-01-01: big@2026-01-01, fee 32.00, true-up 0.00 USD\n" +
			"  the draft of 2026-12 with the change: total 47.00 USD (without it: 31.00 USD)\n" +
			`customer "c1" is on plan "big" from 2026-12-16 (assignment 1)`},
		{"big", "2027-01-01", `customer "c1" is on plan "big" from 2027-01-01 (assignment 2)`},
		{"big", "2027-01-20", `customer "c1" is on plan "big" from 2027-01-20 (assignment 3)`}, // the same plan: nothing splits
	} {
		var out, errOut bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &errOut
		if err := app.Run([]string{"hookledger", "plan", "assign", "--config", e.config, "c1", tc.plan, "--from", tc.from}); err != nil {
			t.Fatalf("%v\n%s", err, errOut.String())
		}
		if got := strings.TrimSpace(out.String()); got != tc.want {
			t.Errorf("--from %s:\n%s\nwant\n%s", tc.from, got, tc.want)
		}
	}
	// A plan in another currency from a day inside a month is refused before
	// it is stored: one invoice has one currency.
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run([]string{"hookledger", "plan", "assign", "--config", e.config, "c1", "eu", "--from", "2027-02-10"})
	if err == nil || !strings.Contains(err.Error(), `changes plan inside 2027-02 from big@2026-01-01 (USD) to eu@2026-01-01 (EUR): one invoice has one currency`) {
		t.Errorf("a change of currency inside a month: %v", err)
	}
	if n := e.count(`SELECT COUNT(*) FROM plan_assignments`); n != 3 {
		t.Errorf("%d assignments after the refusal, want 3", n)
	}
}
