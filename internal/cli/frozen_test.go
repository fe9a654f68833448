package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// Issue 40, item 5, through the commands: October closed with
// pro@2026-01-01 (third tier 0.0005); the tier edited in place to 0.0009 in
// hookledger.yml. invoice close, invoice preview and adjust refuse the
// configuration, naming the plan, the date and the invoice, and saying how
// to add a new version; plan assign refuses a date that reaches into the
// closed October, naming the close, and accepts the first open day.
func TestCommandsRefuseAnEditedPlanVersion(t *testing.T) {
	e := newCLIEnv(t)
	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, append(cfg, proPlan...), 0o600); err != nil {
		t.Fatal(err)
	}
	e.write(t0("2026-10-20T00:00:00Z"), usageEvent{customer: "c1", meter: "api", qty: "150000", at: t0("2026-10-03T10:00:00Z")})
	e.mustRun("invoice", "close", "--period", "2026-10", "--all")
	e.write(t0("2026-11-05T00:00:00Z"), usageEvent{customer: "c1", meter: "api", qty: "10000", at: t0("2026-10-30T10:00:00Z")})

	edited := strings.Replace(string(cfg)+proPlan, `{unit: "0.0005"}`, `{unit: "0.0009"}`, 1)
	if err := os.WriteFile(e.config, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"invoice", "close", "--period", "2026-11", "--all"},
		{"invoice", "preview", "--period", "2026-11", "c1"},
	} {
		_, err := e.runSub(args...)
		if err == nil || !strings.Contains(err.Error(), `plan "pro" version 2026-01-01`) || !strings.Contains(err.Error(), "invoice 1") ||
			!strings.Contains(err.Error(), "add the change as a new version") {
			t.Errorf("%s with an edited version: %v", strings.Join(args, " "), err)
		}
	}
	// A command whose writer prices spend with the plans refuses it too.
	if _, err := e.run("adjust", "--customer", "c1", "--meter", "api", "--quantity", "1", "--reason", "test"); err == nil || !strings.Contains(err.Error(), `plan "pro" version 2026-01-01`) {
		t.Errorf("adjust with an edited version: %v", err)
	}
	if n := e.count(`SELECT COUNT(*) FROM metered_usage`); n != 2 {
		t.Errorf("%d ledger rows after the refused adjustment, want 2", n)
	}
	if n := e.count(`SELECT COUNT(*) FROM invoices`); n != 1 {
		t.Errorf("%d invoices after the refusals, want October's 1", n)
	}

	if err := os.WriteFile(e.config, append(cfg, proPlan...), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = e.runSub("plan", "assign", "--from", "2026-10-01", "c1", "pro")
	if err == nil || !strings.Contains(err.Error(), `would change the plan of 2026-10 (2026-10-01 to 2026-10-31, UTC), closed for all customers by close 1`) ||
		!strings.Contains(err.Error(), "assign from 2026-11-01") {
		t.Errorf("plan assign into the closed October: %v", err)
	}
	if out, err := e.runSub("plan", "assign", "--from", "2026-11-01", "c1", "pro"); err != nil || !strings.Contains(out, `customer "c1" is on plan "pro" from 2026-11-01`) {
		t.Errorf("plan assign from November: %s %v", out, err)
	}
}

// runSub runs a command and subcommand (its first two arguments) with
// --config right after them and the rest after that.
func (e *cliEnv) runSub(args ...string) (string, error) {
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(append([]string{"hookledger", args[0], args[1], "--config", e.config}, args[2:]...))
	return out.String(), err
}
