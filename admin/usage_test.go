package admin

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// usageConfig maps data.model to the tokens meter's model dimension.
const usageConfig = `data: %s
providers:
  - name: default
    scheme: standard
    secrets: ["` + testenv.Secret + `"]
usage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
    properties:
      model: data.model
meters:
  - name: tokens
    unit: tokens
    dimensions: [model]
`

// GET /v1/usage?format=csv writes a customer id or a dimension value that a
// spreadsheet would run as a formula with a leading apostrophe (issue 40,
// item 7); quantities stay numbers.
func TestUsageCSVGuardsFormulaCells(t *testing.T) {
	const link, sum = `=HYPERLINK("http://x","y")`, "@SUM(1)"
	dir := t.TempDir()
	path := filepath.Join(dir, "hookledger.yml")
	if err := os.WriteFile(path, fmt.Appendf(nil, usageConfig, filepath.Join(dir, "data")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := testenv.New(t, testenv.Options{Dir: filepath.Join(dir, "data"), Config: cfg})
	body := func(customer, model, qty string) []byte {
		return fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":%q,"meter":"tokens","quantity":%s,"model":%q,"occurred_at":"2026-11-29T10:00:00Z"}}`,
			customer, qty, model)
	}
	for i, b := range [][]byte{body(link, sum, "5"), body(sum, link, "2.5")} {
		if r := e.Send(fmt.Sprint("evt_", i), b); r.Code != 200 || r.Body.Status != "applied" {
			t.Fatalf("send %s: %+v", b, r)
		}
	}
	s, err := New("127.0.0.1:0", []string{testToken})
	if err != nil {
		t.Fatal(err)
	}
	s.Mux.Handle("GET /v1/usage", Usage(e.DB, ledger.NewMeters(cfg.Meters)))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()

	code, raw := call(t, "GET", srv.URL+"/v1/usage?format=csv&from=2026-11&to=2026-12&group_by=customer,meter,model", testToken, "")
	if code != 200 {
		t.Fatalf("GET /v1/usage: %d %s", code, raw)
	}
	got, err := csv.NewReader(strings.NewReader(string(raw))).ReadAll()
	if err != nil {
		t.Fatalf("%v in %s", err, raw)
	}
	want := [][]string{
		{"customer", "meter", "model", "aggregation", "quantity", "unit", "events", "adjustments"},
		{"'" + link, "tokens", "'" + sum, "sum", "5", "tokens", "1", "0"},
		{"'" + sum, "tokens", "'" + link, "sum", "2.5", "tokens", "1", "0"},
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("CSV cells:\n%q\nwant\n%q", got, want)
	}
}

// where=model in () is refused, naming the term, instead of selecting the
// rows without the dimension (issue 40, item 9).
func TestUsageRefusesAnEmptyList(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookledger.yml")
	if err := os.WriteFile(path, fmt.Appendf(nil, usageConfig, filepath.Join(dir, "data")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := testenv.New(t, testenv.Options{Dir: filepath.Join(dir, "data"), Config: cfg})
	// A row without the model: what the empty list selected.
	if r := e.Send("evt_0", testenv.UsageBody("c1", "tokens", "5")); r.Code != 200 || r.Body.Status != "applied" {
		t.Fatalf("send: %+v", r)
	}
	s, err := New("127.0.0.1:0", []string{testToken})
	if err != nil {
		t.Fatal(err)
	}
	s.Mux.Handle("GET /v1/usage", Usage(e.DB, ledger.NewMeters(cfg.Meters)))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for _, where := range []string{"model+in+()", "model+not+in+(+)"} {
		code, raw := call(t, "GET", srv.URL+"/v1/usage?from=2026-11&to=2026-12&where="+where, testToken, "")
		var body struct{ Error string }
		json.Unmarshal(raw, &body)
		term := strings.ReplaceAll(where, "+", " ")
		want := `where: "` + term + `": the list is empty: give at least one value, name in (a,b); name= selects rows without the dimension`
		if code != 400 || body.Error != want {
			t.Errorf("where=%s: %d %s, want 400 %q", term, code, raw, want)
		}
	}
}
