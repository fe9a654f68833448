package cli

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// proPlan is plan pro for every customer: api graduated (1,000 free, 0.001
// up to 100,000, 0.0005 above), a 29.00 fee and a 50.00 minimum.
const proPlan = `plans:
  - name: pro
    currency: USD
    effective_from: 2026-01-01
    fee: "29.00"
    minimum: "50.00"
    unpriced: free
    prices:
      - {meter: api, model: graduated, tiers: [{up_to: 1000, unit: "0"}, {up_to: 100000, unit: "0.001"}, {unit: "0.0005"}]}
customers:
  default_plan: pro
`

// `invoice list` gains total and currency columns once some invoice is
// priced; a list of unpriced invoices prints as it always has. `invoice
// show` explains each priced line's amount.
func TestInvoiceListMoney(t *testing.T) {
	e := newCLIEnv(t)
	e.write(t0("2026-10-02T00:00:00Z"), usageEvent{customer: "c1", meter: "api", qty: "10", at: t0("2026-09-03T10:00:00Z")})
	e.mustRun("invoice", "close", "--period", "2026-09", "--all")
	unpriced := "id,customer,period,tz,cutoff,ledger_head,lines,late_lines,digest"
	if out := e.mustRun("invoice", "list", "--format", "csv"); !strings.HasPrefix(out, unpriced+"\n") {
		t.Fatalf("a ledger without plans lists:\n%s", out)
	}

	cfg, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.config, append(cfg, proPlan...), 0o600); err != nil {
		t.Fatal(err)
	}
	e.write(t0("2026-10-20T00:00:00Z"),
		usageEvent{customer: "c1", meter: "api", qty: "150001", at: t0("2026-10-03T10:00:00Z")},
		usageEvent{customer: "c2", meter: "api", qty: "500", at: t0("2026-10-03T10:00:00Z")},
	)
	e.mustRun("invoice", "close", "--period", "2026-10", "--all")

	out := e.mustRun("invoice", "list", "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 4 {
		t.Fatalf("list: %v\n%s", err, out)
	}
	if got := strings.Join(recs[0], ","); got != "id,customer,period,tz,cutoff,ledger_head,lines,late_lines,total,currency,digest" {
		t.Errorf("header %s", got)
	}
	// c1: 99,000 × 0.001 + 50,001 × 0.0005 = 124.0005 → 124.00, + 29.00.
	// c2: 500 requests are free: 29.00 + 21.00 up to the minimum.
	var got []string
	for _, r := range recs[1:] {
		got = append(got, strings.Join([]string{r[1], r[2], r[8], r[9]}, " "))
	}
	if want := "c1 2026-09 - -|c1 2026-10 153.00 USD|c2 2026-10 50.00 USD"; strings.Join(got, "|") != want {
		t.Errorf("rows %q, want %q", strings.Join(got, "|"), want)
	}
	table := e.mustRun("invoice", "list")
	if lines := strings.Split(table, "\n"); !strings.Contains(lines[0], "LATE_LINES  TOTAL   CURRENCY  DIGEST") ||
		!strings.Contains(table, "  153.00  USD  ") {
		t.Errorf("table:\n%s", table)
	}
	// Only the unpriced month: as before.
	if out := e.mustRun("invoice", "list", "--period", "2026-09", "--format", "csv"); !strings.HasPrefix(out, unpriced+"\n") {
		t.Errorf("September alone lists:\n%s", out)
	}
	show := e.mustRun("invoice", "show", "2")
	for _, want := range []string{"total     153.00 USD\n",
		"line 1 (api 2026-10): 124.0005000000 exactly: 1000 × 0 = 0; 99000 × 0.001 = 99; 50001 × 0.0005 = 25.0005; total 124.0005\n"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if show := e.mustRun("invoice", "show", "1"); strings.Contains(show, "exactly") || strings.Contains(show, "total ") {
		t.Errorf("an unpriced invoice shows money:\n%s", show)
	}
	var invs []struct {
		Customer, Total, Currency string
	}
	if err := json.Unmarshal([]byte(e.mustRun("invoice", "list", "--period", "2026-10", "--format", "json")), &invs); err != nil ||
		len(invs) != 2 || invs[0].Total != "153.00" || invs[0].Currency != "USD" {
		t.Errorf("json: %v %+v", err, invs)
	}
}
