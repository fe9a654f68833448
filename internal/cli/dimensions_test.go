package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// TestUsageByDimensionCLIAndAPI groups and filters by a meter's dimensions
// on the CLI (table, CSV, JSON) and on GET /v1/usage, which answer the same;
// a row without the property is its own group with the empty value.
func TestUsageByDimensionCLIAndAPI(t *testing.T) {
	e := newCLIEnv(t)
	e.appendConfig("  - name: tokens\n    unit: tokens\n    dimensions: [model, region]\n")
	at := t0("2026-10-05T10:00:00Z")
	e.write(t0("2026-10-20T00:00:00Z"),
		usageEvent{customer: "c1", meter: "tokens", qty: "100", props: `{"model":"gpt-4o","region":"eu"}`, at: at},
		usageEvent{customer: "c1", meter: "tokens", qty: "10", props: `{"model":"gpt-4o","region":"us"}`, at: at},
		usageEvent{customer: "c1", meter: "tokens", qty: "1", props: `{"model":"o1","region":"eu"}`, at: at},
		usageEvent{customer: "c1", meter: "tokens", qty: "5", props: `{"region":"eu"}`, at: at}, // no model
		usageEvent{customer: "c2", meter: "tokens", qty: "1000", props: `{"model":"gpt-4o","region":"eu"}`, at: at},
	)
	out := e.mustRun("usage", "--from", "2026-10", "--to", "2026-11", "--group-by", "customer,meter,model", "--where", "region=eu", "--format", "csv")
	want := "customer,meter,model,aggregation,quantity,unit,events,adjustments\n" +
		"c1,tokens,,sum,5,tokens,1,0\n" +
		"c1,tokens,gpt-4o,sum,100,tokens,1,0\n" +
		"c1,tokens,o1,sum,1,tokens,1,0\n" +
		"c2,tokens,gpt-4o,sum,1000,tokens,1,0\n"
	if out != want {
		t.Fatalf("CSV:\n%s\nwant:\n%s", out, want)
	}
	out = e.mustRun("usage", "--from", "2026-10", "--to", "2026-11", "--group-by", "model", "--where", "model in (gpt-4o,o1),region!=us", "--format", "csv")
	if want := "model,aggregation,quantity,unit,events,adjustments\ngpt-4o,sum,1100,tokens,2,0\no1,sum,1,tokens,1,0\n"; out != want {
		t.Fatalf("CSV with in and !=:\n%s\nwant:\n%s", out, want)
	}
	if _, err := e.run("usage", "--group-by", "customer,colour"); err == nil || !strings.Contains(err.Error(), "--group-by: \"colour\"") {
		t.Fatalf("unknown dimension: %v", err)
	}

	c, err := config.Load(e.config)
	if err != nil {
		t.Fatal(err)
	}
	db, err := schema.Open(context.Background(), c.DBPath(), schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	adm, err := admin.New("127.0.0.1:0", []string{"admin-token"})
	if err != nil {
		t.Fatal(err)
	}
	adm.Mux.Handle("GET /v1/usage", admin.Usage(db, ledger.NewMeters(c.Meters)))
	srv := httptest.NewServer(adm.Handler())
	defer srv.Close()
	get := func(query string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/usage?"+query, nil)
		req.Header.Set("Authorization", "Bearer admin-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	v := url.Values{"from": {"2026-10"}, "to": {"2026-11"}, "group_by": {"customer,meter,model,region"}, "where": {"model!=o1"}}
	code, body := get(v.Encode())
	cliJSON := e.mustRun("usage", "--from", "2026-10", "--to", "2026-11", "--group-by", "customer,meter,model,region", "--where", "model!=o1", "--format", "json")
	var api, cli []ledger.UsageLine
	if err := json.Unmarshal([]byte(body), &api); err != nil {
		t.Fatalf("%d %s: %v", code, body, err)
	}
	if err := json.Unmarshal([]byte(cliJSON), &cli); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(api, cli) || len(api) != 4 {
		t.Fatalf("API and CLI differ or miss lines:\nAPI %+v\nCLI %+v", api, cli)
	}
	if d := api[0].Dimensions; d["model"] != "" || d["region"] != "eu" || !strings.Contains(body, `"dimensions":{"model":"","region":"eu"}`) {
		t.Fatalf("the row without a model: %+v in %s", d, body)
	}
	if code, body := get("where=colour%3Dred"); code != http.StatusBadRequest || !strings.Contains(body, "colour") {
		t.Fatalf("unknown dimension: %d %s", code, body)
	}
}
