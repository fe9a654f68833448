package ops_test

import (
	"context"
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

// Two signed usage events of 5,000,000,000,000 units for one customer and
// meter, against the real binary: their total, 10^13 units, is beyond 64-bit
// micro-units (once refused); usage, /v1/usage and invoice close answer it
// exactly, the invoice line stores it as decimal text, and verify catches
// that text edited.
func opsWideTotals(t *testing.T, bin string) {
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
		args []string
		want string
	}{
		{[]string{"usage"}, "cus_1     api_requests  sum          10000000000000"},
		{[]string{"usage", "--from", "2026-10", "--to", "2026-11", "--format", "json"}, `"quantity": "10000000000000"`},
		{[]string{"usage", "--group-by", "customer,meter,day", "--format", "csv"}, "cus_1,api_requests,2026-10-05,sum,10000000000000,"},
	} {
		out, err := hookledger(c.args...)
		if err != nil || !strings.Contains(out, c.want) {
			t.Errorf("%v: %v, output lacks %q:\n%s", c.args, err, c.want, out)
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
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"quantity":"10000000000000"`) {
		t.Fatalf("/v1/usage: %d %s", resp.StatusCode, b)
	}

	out, err := hookledger("invoice", "close", "--period", "2026-10", "--all", "--format", "csv")
	if err != nil || !strings.Contains(out, ",api_requests,2026-10,no,sum,10000000000000,,2,0,2,") {
		t.Fatalf("close: %v\n%s", err, out)
	}
	if n := rows(`SELECT COUNT(*) FROM invoice_lines WHERE quantity = 0 AND quantity_wide = '10000000000000' AND row_count = 2`); n != 1 {
		t.Fatalf("%d invoice lines of 10000000000000 units over 2 rows, want 1", n)
	}
	if out, err := hookledger("verify"); err != nil {
		t.Fatalf("verify: %v\n%s", err, out)
	}

	// The frozen invoice's quantity edited: verify exits non-zero.
	db, err := sqlx.Open("sqlite", "file:"+s.dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`DROP TRIGGER invoice_lines_no_update`, `UPDATE invoice_lines SET quantity_wide = '10000000000001'`} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	out, err = hookledger("verify")
	if err == nil || !strings.Contains(out, "verify failed: invoices row 1") || !strings.Contains(out, "quantity recomputes to 10000000000000, invoice says 10000000000001") {
		t.Fatalf("verify after editing the invoice: %v\n%s", err, out)
	}
	s.stop(t)
}
