package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/customer"
)

// customers list and show, and plan show, print the registry as the admin
// API does (customer.CustomersToday, customer.ViewCustomer).
func TestCustomersCLI(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookledger.yml")
	err := os.WriteFile(cfg, fmt.Appendf(nil, `data: %s
providers:
  - name: test
    scheme: github
    secrets: ["s3cret"]
meters:
  - name: api
plans:
  - name: basic
    currency: USD
    effective_from: 2026-01-01
    fee: "5.00"
  - name: pro
    currency: USD
    effective_from: 2026-01-01
    fee: "29.00"
customers:
  default_plan: pro
`, filepath.Join(dir, "data")), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &out
		if args[0] != "migrate" {
			args = append(args[:2:2], append([]string{"--config", cfg}, args[2:]...)...)
		}
		err := app.Run(append([]string{"hookledger"}, args...))
		return out.String(), err
	}
	must := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	if _, err := run("migrate", "--config", cfg); err != nil { // creates the database
		t.Fatal(err)
	}
	must("customers", "add", "--name", "Acme", "--external-id", "stripe=cus_S1", "--plan", "basic", "--from", "2026-01-01", "cus_1")
	must("customers", "add", "cus_2")

	var list []map[string]any
	if err := json.Unmarshal([]byte(must("customers", "list", "--format", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0]["id"] != "cus_1" || list[0]["plan"] != "basic" || list[0]["name"] != "Acme" || list[1]["plan"] != "pro" {
		t.Errorf("customers list: %v", list)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(must("customers", "show", "--format", "json", "cus_1")), &v); err != nil {
		t.Fatal(err)
	}
	if v["customer"] != "cus_1" || v["plan_today"] != "basic" || v["plan_source"] != "assignment 1, from 2026-01-01" ||
		len(v["history"].([]any)) != 1 || len(v["assignments"].([]any)) != 1 {
		t.Errorf("customers show: %v", v)
	}
	out := must("customers", "show", "cus_2")
	if !strings.Contains(out, "plan today (") || !strings.Contains(out, "pro — the default plan (customers.default_plan)") {
		t.Errorf("customers show (table):\n%s", out)
	}
	if _, err := run("customers", "show", "nobody"); !errors.Is(err, customer.ErrNoCustomer) {
		t.Errorf("customers show of an unknown customer: %v", err)
	}
	// plan show also answers for a customer the registry does not know.
	if err := json.Unmarshal([]byte(must("plan", "show", "--format", "json", "nobody")), &v); err != nil {
		t.Fatal(err)
	}
	if v["plan_today"] != "pro" || len(v["history"].([]any)) != 0 || len(v["assignments"].([]any)) != 0 {
		t.Errorf("plan show of an unregistered customer: %v", v)
	}
}
