package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// The reproduction against the real binary: two signed usage events
// of 5,000,000,000,000 units for one customer and meter. usage, /v1/usage and
// invoice close refuse the total, naming customer, meter and period, and the
// close stores nothing; an adjustment brings the total back into range and
// the period then closes with the exact amount.
func opsTotalsOutOfRange(t *testing.T, bin string) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookledger.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `listen: 127.0.0.1:0
data: %s
admin:
  listen: 127.0.0.1:0
providers:
  - name: acme
    scheme: standard
    secrets: [%q]
`+testenv.UsageYAML, filepath.Join(dir, "data"), opsSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	s := opsStart(t, bin, dir, []string{"HOOKLEDGER_ADMIN_TOKEN=" + opsAdminToken}, "--config", cfg)
	for _, id := range []string{"evt_big_1", "evt_big_2"} {
		body := fmt.Sprintf(`{"id":%q,"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":5000000000000,"occurred_at":"2026-10-05T12:00:00Z"}}`, id)
		d := delivery{provider: "acme", id: id, typ: "usage.recorded", body: body, secret: opsSecret, requestID: id}
		if code := d.send(t, http.DefaultClient, s.url); code != 200 {
			t.Fatalf("%s: status %d\n%s", id, code, s.logs)
		}
	}
	hookledger := func(args ...string) (string, error) {
		return testenv.Run(bin, dir, nil, append(args[:len(args):len(args)], "--config", cfg)...)
	}
	rows := func(query string) int {
		db, err := schema.Open(context.Background(), s.dbPath, schema.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var n int
		if err := db.Read.Get(&n, query); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(`SELECT COUNT(*) FROM metered_usage WHERE quantity = 5000000000000000000`); n != 2 {
		t.Fatalf("%d usage rows of 5000000000000 units, want 2", n)
	}

	for _, c := range []struct {
		args   []string
		period string
	}{
		{[]string{"usage"}, "period any event time"},
		{[]string{"usage", "--from", "2026-10", "--to", "2026-11", "--format", "json"}, "period from 2026-10-01T00:00:00Z to 2026-11-01T00:00:00Z"},
		{[]string{"usage", "--group-by", "customer,meter,day", "--format", "csv"}, "period 2026-10-05"},
	} {
		out, err := hookledger(c.args...)
		if err == nil {
			t.Errorf("%v: exit 0\n%s", c.args, out)
		}
		for _, want := range []string{`total out of range for customer "cus_1", meter "api_requests", ` + c.period, "10000000000000 is beyond the largest quantity"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", c.args, want, out)
			}
		}
		if strings.Contains(out, "-8446744073709") {
			t.Errorf("%v: printed the wrapped total:\n%s", c.args, out)
		}
	}

	req, _ := http.NewRequest("GET", s.admin+"/v1/usage?from=2026-10&to=2026-11", nil)
	req.Header.Set("Authorization", "Bearer "+opsAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var apiErr map[string]string
	if err := json.Unmarshal(b, &apiErr); err != nil || resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("/v1/usage: %d %s (%v)", resp.StatusCode, b, err)
	}
	if apiErr["code"] != "total_out_of_range" || apiErr["customer"] != "cus_1" || apiErr["meter"] != "api_requests" ||
		apiErr["period"] != "from 2026-10-01T00:00:00Z to 2026-11-01T00:00:00Z" || apiErr["total"] != "10000000000000" ||
		!strings.Contains(apiErr["error"], `customer "cus_1", meter "api_requests"`) {
		t.Fatalf("/v1/usage error: %s", b)
	}

	const invoiceRows = `SELECT (SELECT COUNT(*) FROM period_closes) + (SELECT COUNT(*) FROM invoices) + (SELECT COUNT(*) FROM invoice_lines)`
	for _, args := range [][]string{{"--all"}, {"--customer", "cus_1"}, {"--all", "--dry-run"}} {
		out, err := hookledger(append([]string{"invoice", "close", "--period", "2026-10"}, args...)...)
		if err == nil || !strings.Contains(out, `close 2026-10: total out of range for customer "cus_1", meter "api_requests", period 2026-10: 10000000000000`) ||
			!strings.Contains(out, "nothing was closed") {
			t.Errorf("invoice close %v: %v\n%s", args, err, out)
		}
	}
	if n := rows(invoiceRows); n != 0 {
		t.Fatalf("refused closes stored %d rows in period_closes, invoices and invoice_lines", n)
	}
	if out, err := hookledger("verify"); err != nil {
		t.Fatalf("verify of a database holding nothing wrong: %v\n%s", err, out)
	}

	// One of the two events was a mistake: the adjustment brings the total
	// into range, and the period closes with the exact amount.
	if out, err := hookledger("adjust", "--customer", "cus_1", "--meter", "api_requests", "--quantity", "-5000000000000",
		"--reason", "test event sent twice", "--ref", "row:2"); err != nil {
		t.Fatalf("adjust: %v\n%s", err, out)
	}
	out, err := hookledger("invoice", "close", "--period", "2026-10", "--all", "--format", "csv")
	if err != nil || !strings.Contains(out, ",api_requests,2026-10,no,sum,5000000000000,,2,1,3,") {
		t.Fatalf("close after the adjustment: %v\n%s", err, out)
	}
	if n := rows(`SELECT COUNT(*) FROM invoice_lines WHERE quantity = 5000000000000000000 AND row_count = 2 AND adjustments = 1`); n != 1 {
		t.Fatalf("%d invoice lines of 5000000000000 units over 2 rows and 1 adjustment, want 1", n)
	}
	if out, err := hookledger("verify"); err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}

	// The frozen invoice edited to the wrapped amount: verify exits non-zero.
	db, err := sqlx.Open("sqlite", "file:"+s.dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`DROP TRIGGER invoice_lines_no_update`, `UPDATE invoice_lines SET quantity = -8446744073709551616`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	out, err = hookledger("verify")
	if err == nil || !strings.Contains(out, "verify failed: invoices row 1") || !strings.Contains(out, "quantity recomputes to 5000000000000, invoice says -8446744073709.551616") {
		t.Fatalf("verify after editing the invoice: %v\n%s", err, out)
	}
	s.stop(t)
}
