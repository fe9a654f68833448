package cli_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hookledger/hookledger/dispute"
	"github.com/hookledger/hookledger/internal/testenv"
)

const disputeYAML = `data: ./data
providers:
  - name: default
    scheme: standard
    secrets: ["%SECRET%"]
  - name: stripe
    scheme: stripe
    secrets: ["whsec_stripe5a1f0c2e9b7d4e1f"]
` + testenv.UsageYAML

// The scenario end to end through the real binary: serve, send,
// invoice close, then every dispute command, its exit codes and its output.
func TestDisputeCLI(t *testing.T) {
	bin := testenv.Binary(t)
	dir := t.TempDir()
	writeConfig := func(secret string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(strings.ReplaceAll(disputeYAML, "%SECRET%", secret)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeConfig("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	_, _, url := testenv.StartServe(t, bin, dir, nil)
	mustRun := func(args ...string) string {
		t.Helper()
		out, err := testenv.Run(bin, dir, nil, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	send := func(provider, id, customer, qty, at string) {
		out := mustRun("send", "--config", "hookledger.yml", "--url", url, "--provider", provider, "--id", id, "--customer", customer, "--quantity", qty, "--occurred-at", at)
		if !strings.Contains(out, "200 OK") {
			t.Fatalf("send %s: %s", id, out)
		}
	}
	send("default", "evt_a", "cus_1", "3", "2026-10-20T10:00:00Z")
	for range 3 {
		send("default", "evt_b", "cus_1", "2", "2026-10-20T11:00:00Z")
	}
	send("default", "evt_c", "cus_1", "5.5", "2026-10-21T09:30:00Z")
	send("stripe", "evt_s", "cus_2", "7", "2026-10-22T09:30:00Z")
	mustRun("invoice", "close", "--period", "2026-10", "--all")

	// Flags after the target, JSON.
	var tr dispute.Trace
	if err := json.Unmarshal([]byte(mustRun("dispute", "invoice:1/1", "--format", "json")), &tr); err != nil {
		t.Fatal(err)
	}
	if s := tr.Summary; len(tr.Rows) != 3 || s.Attempts != 5 || s.Duplicates != 2 || s.Bodies.Valid != 3 || s.Signatures.Valid != 5 ||
		!s.ChainOK || !s.InvoicesOK || tr.Invoices[0].Lines[0].Quantity.String() != "10.5" {
		t.Errorf("dispute invoice:1/1: %d rows, summary %+v", len(tr.Rows), s)
	}

	table := mustRun("dispute", "invoice:1")
	for i, line := range strings.Split(table, "\n") {
		if utf8.RuneCountInString(line) > 100 {
			t.Errorf("table line %d is %d wide: %s", i+1, utf8.RuneCountInString(line), line)
		}
	}
	for _, want := range []string{"LINE invoice:1/1  api_requests  sum", "EVENT default:evt_b", "duplicate", "bodies: 3 valid"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	customer := mustRun("dispute", "customer", "cus_2", "--period", "2026-10")
	if !strings.Contains(customer, "EVENT stripe:evt_s") || strings.Contains(customer, "evt_a") {
		t.Errorf("dispute customer cus_2:\n%s", customer)
	}
	if out := mustRun("dispute", "default:evt_b", "--format", "json"); !strings.Contains(out, `"outcome": "duplicate"`) {
		t.Errorf("dispute default:evt_b: %s", out)
	}

	// Export twice: byte-identical. An existing file is kept unless --force.
	mustRun("dispute", "export", "invoice:1/1", "--out", "a.zip")
	mustRun("dispute", "export", "--out", "b.zip", "invoice:1/1")
	a, _ := os.ReadFile(filepath.Join(dir, "a.zip"))
	b, _ := os.ReadFile(filepath.Join(dir, "b.zip"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("two exports differ: %d and %d bytes", len(a), len(b))
	}
	if out, err := testenv.Run(bin, dir, nil, "dispute", "export", "invoice:1", "--out", "a.zip"); testenv.ExitCode(err) != 1 || !strings.Contains(out, "--force") {
		t.Errorf("export over an existing file: exit %d\n%s", testenv.ExitCode(err), out)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "a.zip")); !bytes.Equal(after, a) {
		t.Errorf("a refused export changed the existing file")
	}
	mustRun("dispute", "export", "invoice:1", "--out", "a.zip", "--force")
	if out := mustRun("dispute", "export", "--customer", "cus_1", "--period", "2026-10", "--out", "c.zip"); !strings.Contains(out, "customer:cus_1@2026-10, 3 events") {
		t.Errorf("customer export: %s", out)
	}

	// Bad input: a clear message and exit code 1; a wrong command line exits 2.
	for _, c := range []struct {
		args []string
		want string
		code int
	}{
		{[]string{"dispute", "invoice:99"}, "there is no invoice 99", 0},
		{[]string{"dispute", "invoice:1/9"}, "invoice 1 has no line 9", 0},
		{[]string{"dispute", "row:404"}, "the ledger has no row 404", 0},
		{[]string{"dispute", "default:evt_zzz"}, `no receipt and no ledger row for event "evt_zzz"`, 0},
		{[]string{"dispute", "evt_a"}, `"evt_a" names no provider: did you mean default:evt_a?`, 0},
		{[]string{"dispute", "evt_nowhere"}, "PROVIDER:EVENT_ID", 0},
		{[]string{"dispute"}, "give one TARGET", 2},
		{[]string{"dispute", "invoice:1", "--format", "csv"}, "--format", 2},
		{[]string{"dispute", "invoice:1", "--nope"}, "--nope", 2},
		{[]string{"dispute", "customer", "cus_1"}, "--period", 2},
		{[]string{"dispute", "customer", "cus_9", "--period", "2026-10"}, `customer "cus_9": not found`, 0},
		{[]string{"dispute", "export", "invoice:1"}, "--out", 2},
		{[]string{"dispute", "export", "invoice:77", "--out", "x.zip"}, "there is no invoice 77", 0},
		{[]string{"dispute", "export", "invoice:1", "--out", filepath.Join("no-such-dir", "x.zip")}, "no such file or directory", 0},
	} {
		if c.code == 0 {
			c.code = 1
		}
		out, err := testenv.Run(bin, dir, nil, c.args...)
		if testenv.ExitCode(err) != c.code || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, want %d and %q in:\n%s", c.args, testenv.ExitCode(err), c.code, c.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.zip")); !os.IsNotExist(err) {
		t.Errorf("a failed export left x.zip behind")
	}

	// Rotate the default provider's secret away: intact bodies are not verifiable, not invalid.
	writeConfig("whsec_" + strings.Repeat("QUJD", 8))
	if err := json.Unmarshal([]byte(mustRun("dispute", "--format", "json", "invoice:1/1")), &tr); err != nil {
		t.Fatal(err)
	}
	if s := tr.Summary.Bodies; s.NotVerifiable != 3 || s.Invalid != 0 || tr.Events[0].Verification.Text != "not verifiable (no current secret matches)" {
		t.Errorf("after rotation: %+v %+v", s, tr.Events[0].Verification)
	}
}
