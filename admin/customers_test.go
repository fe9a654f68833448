package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// customersConfig declares two plans, pro in two versions (the default
// plan), and basic.
const customersConfig = `data: %s
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
meters:
  - name: api_requests
plans:
  - name: basic
    currency: USD
    effective_from: 2026-01-01
    fee: "5.00"
    prices:
      - {meter: api_requests, model: unit, unit: "0.001"}
  - name: pro
    currency: USD
    effective_from: 2026-01-01
    fee: "29.00"
    minimum: "50.00"
    prices:
      - {meter: api_requests, model: graduated, tiers: [{up_to: 1000, unit: "0"}, {unit: "0.01"}]}
  - name: pro
    currency: USD
    effective_from: 2026-07-01
    fee: "39.00"
    prices:
      - {meter: api_requests, model: unit, unit: "0.002"}
customers:
  default_plan: pro
`

// customersEnv is a database with the webhook handler, configured by
// customersConfig, at testenv.DefaultNow (2026-11-29T12:00Z), and the
// customer endpoints behind the bearer token over real HTTP.
func customersEnv(t *testing.T, backend string) (*testenv.Env, *Customers, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "hookledger.yml")
	if err := os.WriteFile(path, fmt.Appendf(nil, customersConfig, filepath.Join(dir, "data")), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	e := testenv.New(t, testenv.Options{Dir: filepath.Join(dir, "data"), Config: cfg, Backend: backend})
	c := &Customers{DB: e.DB, Catalog: cfg.Catalog, DefaultPlan: cfg.Customers.DefaultPlan, Meters: ledger.NewMeters(cfg.Meters), Now: e.Clock.Now}
	s, err := New("127.0.0.1:0", []string{testToken})
	if err != nil {
		t.Fatal(err)
	}
	c.Routes(s.Mux)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return e, c, srv.URL
}

// callJSON calls the API with the token and decodes a 2xx reply into out.
func callJSON(t *testing.T, method, url, body string, want int, out any) {
	t.Helper()
	code, raw := call(t, method, url, testToken, body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, code, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, raw)
		}
	}
}

// registry is the registry's rows: customers and plan assignments, in id
// order, as "ID NAME EMAIL EXTERNAL_IDS" and "ID PLAN FROM".
func registry(t *testing.T, e *testenv.Env) (customers, assignments []string) {
	t.Helper()
	ctx := context.Background()
	rs, err := e.DB.CustomerHistory(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		customers = append(customers, strings.Join([]string{r.CustomerID, r.Name, r.Email, r.ExternalIDs}, " "))
	}
	as, err := e.DB.PlanAssignments(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		assignments = append(assignments, strings.Join([]string{a.CustomerID, a.Plan, a.EffectiveFrom}, " "))
	}
	return customers, assignments
}

func sameRows(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The customer endpoints on both backends: register, list, show, assign,
// plans, and a preview that is what the close computes and stores nothing.
func TestCustomersAPI(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e, c, url := customersEnv(t, backend)

		var plans []map[string]any
		callJSON(t, "GET", url+"/v1/plans", "", 200, &plans)
		var got []string
		for _, p := range plans {
			got = append(got, fmt.Sprint(p["name"], " ", p["effective_from"], " ", p["currency"], " ", p["fee"]))
		}
		sameRows(t, "plans", got, []string{"basic 2026-01-01 USD 5.00", "pro 2026-01-01 USD 29.00", "pro 2026-07-01 USD 39.00"})
		if _, raw := call(t, "GET", url+"/v1/plans", testToken, ""); !strings.Contains(string(raw), `"tiers": [`) || !strings.Contains(string(raw), `"unit": "0.01"`) {
			t.Errorf("plans do not carry their prices as decimal strings: %s", raw)
		}

		var list []customer.CustomerToday
		callJSON(t, "GET", url+"/v1/customers", "", 200, &list)
		if len(list) != 0 {
			t.Errorf("customers before any: %+v", list)
		}

		code, raw := call(t, "POST", url+"/v1/customers", testToken,
			`{"id":"cus_1","name":"Acme","email":"billing@acme.test","external_ids":{"stripe":"cus_S1"},"plan":"basic","from":"2026-01-01","note":"signed"}`)
		var v customer.CustomerView
		if code != 201 || json.Unmarshal(raw, &v) != nil {
			t.Fatalf("add: %d %s", code, raw)
		}
		if v.Customer != "cus_1" || v.PlanToday != "basic" || v.Source != "assignment 1, from 2026-01-01" || len(v.History) != 1 || v.History[0].ExternalIDs["stripe"] != "cus_S1" {
			t.Errorf("added: %+v", v)
		}
		callJSON(t, "POST", url+"/v1/customers", `{"id":"cus_2","email":"ops@two.test"}`, 201, &v)
		if v.PlanToday != "pro" || v.Source != "the default plan (customers.default_plan)" || len(v.Assignments) != 0 {
			t.Errorf("added without a plan: %+v", v)
		}
		cs, as := registry(t, e)
		sameRows(t, "customers rows", cs, []string{`cus_1 Acme billing@acme.test {"stripe":"cus_S1"}`, `cus_2  ops@two.test {}`})
		sameRows(t, "assignment rows", as, []string{"cus_1 basic 2026-01-01"})

		callJSON(t, "GET", url+"/v1/customers", "", 200, &list)
		got = nil
		for _, l := range list {
			got = append(got, l.ID+" "+l.Name+" "+l.Plan)
		}
		sameRows(t, "list", got, []string{"cus_1 Acme basic", "cus_2  pro"})

		// From November cus_1 is on pro: its plan today (29 November).
		var a customer.PlanAssignment
		callJSON(t, "POST", url+"/v1/customers/cus_1/plan", `{"plan":"pro","from":"2026-11-01","note":"upgrade"}`, 201, &a)
		if a.ID != 2 || a.Customer != "cus_1" || a.Plan != "pro" || a.EffectiveFrom != "2026-11-01" || a.Note != "upgrade" {
			t.Errorf("assigned: %+v", a)
		}
		// An unregistered customer may be assigned a plan, as with the CLI.
		callJSON(t, "POST", url+"/v1/customers/cus_3/plan", `{"plan":"basic","from":"2026-11-01"}`, 201, &a)
		_, as = registry(t, e)
		sameRows(t, "assignment rows after assigning", as, []string{"cus_1 basic 2026-01-01", "cus_1 pro 2026-11-01", "cus_3 basic 2026-11-01"})
		callJSON(t, "GET", url+"/v1/customers/cus_1", "", 200, &v)
		if v.PlanToday != "pro" || v.Source != "assignment 2, from 2026-11-01" || len(v.Assignments) != 2 || len(v.History) != 1 {
			t.Errorf("shown: %+v", v)
		}
		callJSON(t, "GET", url+"/v1/customers/cus_3", "", 200, &v)
		if v.PlanToday != "basic" || len(v.History) != 0 {
			t.Errorf("an assigned, unregistered customer: %+v", v)
		}

		// The preview: 1,500 requests in November on pro's July version,
		// 1,500 × 0.002 + 39 = 42.00. Nothing is stored.
		if r := e.Send("evt_1", testenv.UsageBody("cus_1", "api_requests", "1500")); r.Code != 200 {
			t.Fatalf("send: %+v", r)
		}
		var res struct {
			Existing bool `json:"existing"`
			Invoices []struct {
				Customer, Period, TZ, Total string
				Lines                       []struct{ Meter, Quantity, Amount string }
			} `json:"invoices"`
		}
		code, raw = call(t, "GET", url+"/v1/customers/cus_1/invoice/preview", testToken, "")
		if err := json.Unmarshal(raw, &res); code != 200 || err != nil {
			t.Fatalf("preview: %d %v %s", code, err, raw)
		}
		if len(res.Invoices) != 1 || res.Existing {
			t.Fatalf("preview: %s", raw)
		}
		inv := res.Invoices[0]
		if inv.Customer != "cus_1" || inv.Period != "2026-11" || inv.TZ != "UTC" || inv.Total != "42.00" || len(inv.Lines) != 1 ||
			inv.Lines[0].Quantity != "1500" || inv.Lines[0].Amount != "3.00" {
			t.Errorf("preview invoice: %+v", inv)
		}
		for _, want := range []string{`"plan": "pro"`, `"total": "42.00"`, `"fee": "39.00"`, `"amount": "3.00"`, `"quantity": "1500"`, `"plan_version": "pro@2026-07-01"`} {
			if !strings.Contains(string(raw), want) {
				t.Errorf("preview lacks %s:\n%s", want, raw)
			}
		}
		// The same as `invoice preview` computes it (invoice.Close with Preview), field for field.
		nov, _ := ledger.MonthPeriod("2026-11", time.UTC)
		pr, _, err := invoice.LoadPricing(context.Background(), e.DB, c.Catalog, c.DefaultPlan)
		if err != nil {
			t.Fatal(err)
		}
		direct, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: nov, Customer: "cus_1", Meters: c.Meters, Now: e.Clock.Now, Preview: true, Pricing: pr})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.MarshalIndent(direct, "", "  ")
		if strings.TrimSpace(string(raw)) != string(want) {
			t.Errorf("the API's preview differs from the close's:\n%s\nwant\n%s", raw, want)
		}
		// October in Berlin: cus_1 was on basic, no usage: the fee alone.
		code, raw = call(t, "GET", url+"/v1/customers/cus_1/invoice/preview?period=2026-10&tz=Europe/Berlin", testToken, "")
		if code != 200 || !strings.Contains(string(raw), `"plan": "basic"`) || !strings.Contains(string(raw), `"total": "5.00"`) ||
			!strings.Contains(string(raw), `"tz": "Europe/Berlin"`) || !strings.Contains(string(raw), `"period_start": "2026-10-01T00:00:00+02:00"`) {
			t.Errorf("October preview: %d %s", code, raw)
		}
		for _, table := range []string{"period_closes", "invoices", "invoice_lines"} {
			if n := e.Count(table); n != 0 {
				t.Errorf("previews stored %d %s rows", n, table)
			}
		}

		// The preview's default zone is invoicing.tz (Zone).
		c.Zone, _ = ledger.LoadZone("Asia/Tokyo")
		code, raw = call(t, "GET", url+"/v1/customers/cus_1/invoice/preview", testToken, "")
		if code != 200 || !strings.Contains(string(raw), `"tz": "Asia/Tokyo"`) || !strings.Contains(string(raw), `"period": "2026-11"`) {
			t.Errorf("preview in the configured zone: %d %s", code, raw)
		}

		// A closed period previews as the closed invoice.
		if _, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: nov, All: true, Meters: c.Meters, Now: func() time.Time { return nov.End.Add(time.Hour) }, Pricing: pr}); err != nil {
			t.Fatal(err)
		}
		code, raw = call(t, "GET", url+"/v1/customers/cus_1/invoice/preview?tz=UTC&period=2026-11", testToken, "")
		if code != 200 || !strings.Contains(string(raw), `"existing": true`) || !strings.Contains(string(raw), `"total": "42.00"`) {
			t.Errorf("preview of a closed period: %d %s", code, raw)
		}
	})
}

// Every bad request is a clear 4xx that stores nothing.
func TestCustomersAPIErrors(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e, c, url := customersEnv(t, backend)
		callJSON(t, "POST", url+"/v1/customers", `{"id":"cus_1","plan":"basic","from":"2026-01-01"}`, 201, nil)
		sep, _ := ledger.MonthPeriod("2026-09", time.UTC)
		if _, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: sep, All: true, Meters: c.Meters, Now: e.Clock.Now}); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			method, path, body string
			code               int
			want               string
		}{
			{"POST", "/v1/customers", `not json`, 400, `"code": "bad_request"`},
			{"POST", "/v1/customers", ``, 400, `want JSON {\"id\": \"cus_1\"`},
			{"POST", "/v1/customers", `{"id":"cus_9","plan_name":"pro"}`, 400, `unknown field \"plan_name\"`},
			{"POST", "/v1/customers", `{"id":"cus_9"} {"id":"cus_10"}`, 400, "more than one JSON value"},
			{"POST", "/v1/customers", `{"id":"cus_9","name":"` + strings.Repeat("x", maxRequestBody) + `"}`, 413, `"code": "too_large"`},
			{"POST", "/v1/customers", `{"name":"nobody"}`, 400, "customer id: required"},
			{"POST", "/v1/customers", `{"id":"cus\u0001"}`, 400, "contains a control character"},
			{"POST", "/v1/customers", `{"id":"cus_9","external_ids":{"":"x"}}`, 400, `external id \"\"=\"x\": want SYSTEM=ID`},
			{"POST", "/v1/customers", `{"id":"cus_9","plan":"pro"}`, 400, `"code": "bad_date"`},
			{"POST", "/v1/customers", `{"id":"cus_9","from":"2026-01-01"}`, 400, "from goes with plan"},
			{"POST", "/v1/customers", `{"id":"cus_9","plan":"pro","from":"2026-13-01"}`, 400, `from: \"2026-13-01\" is not a date (YYYY-MM-DD)`},
			{"POST", "/v1/customers", `{"id":"cus_9","plan":"gold","from":"2026-01-01"}`, 400, `"code": "unknown_plan"`},
			{"POST", "/v1/customers", `{"id":"cus_9","plan":"pro","from":"2025-06-01"}`, 400, "2025-06-01"},
			{"POST", "/v1/customers", `{"id":"cus_1","name":"again"}`, 409, `"code": "customer_exists"`},
			{"POST", "/v1/customers/cus_1/plan", `{"from":"2026-12-01"}`, 400, "plan: required"},
			{"POST", "/v1/customers/cus_1/plan", `{"plan":"pro"}`, 400, `"code": "bad_date"`},
			{"POST", "/v1/customers/cus_1/plan", `{"plan":"pro","from":"1 December"}`, 400, `from: \"1 December\" is not a date`},
			{"POST", "/v1/customers/cus_1/plan", `{"plan":"gold","from":"2026-12-01"}`, 400, `no such plan \"gold\" in the configuration (plans: [basic pro])`},
			{"POST", "/v1/customers/cus_1/plan", `{"plan":"pro","from":"2025-12-01"}`, 400, `"code": "bad_request"`},
			{"POST", "/v1/customers/cus_1/plan", `{"plan":"pro","from":"2026-12-01","until":"2027-01-01"}`, 400, `unknown field \"until\"`},
			{"POST", "/v1/customers/cus%01/plan", `{"plan":"pro","from":"2026-12-01"}`, 400, "not a customer id"},
			{"GET", "/v1/customers/nobody", "", 404, `"code": "unknown_customer"`},
			{"GET", "/v1/customers/cus%01", "", 400, `"code": "bad_customer"`},
			{"GET", "/v1/customers/cus_1/invoice/preview?tz=Mars/Olympus", "", 400, `"code": "bad_tz"`},
			{"GET", "/v1/customers/cus_1/invoice/preview?tz=Local", "", 400, "name an IANA zone"},
			{"GET", "/v1/customers/cus_1/invoice/preview?period=2026-9", "", 400, `"code": "bad_period"`},
			{"GET", "/v1/customers/cus_1/invoice/preview?period=november", "", 400, "want a month as YYYY-MM"},
			{"GET", "/v1/customers/cus%01/invoice/preview", "", 400, `"code": "bad_customer"`},
			// September was closed in UTC: Berlin's September overlaps it.
			{"GET", "/v1/customers/cus_1/invoice/preview?period=2026-09&tz=Europe/Berlin", "", 409, `"code": "period_overlap"`},
			{"DELETE", "/v1/customers/cus_1", "", 405, ""},
		} {
			cs, as := registry(t, e)
			code, raw := call(t, tc.method, url+tc.path, testToken, tc.body)
			if code != tc.code || !strings.Contains(string(raw), tc.want) {
				t.Errorf("%s %s %.80s: %d %.300s, want %d with %s", tc.method, tc.path, tc.body, code, raw, tc.code, tc.want)
			}
			cs2, as2 := registry(t, e)
			sameRows(t, tc.path+" customers", cs2, cs)
			sameRows(t, tc.path+" assignments", as2, as)
		}
		if n := e.Count("period_closes"); n != 1 {
			t.Errorf("%d closes, want the one made by the test", n)
		}
		// Behind the token, like every admin endpoint.
		for _, path := range []string{"/v1/plans", "/v1/customers", "/v1/customers/cus_1", "/v1/customers/cus_1/invoice/preview"} {
			if code, _ := call(t, "GET", url+path, "", ""); code != 401 {
				t.Errorf("GET %s without a token: %d", path, code)
			}
		}
		if code, _ := call(t, "POST", url+"/v1/customers", "", `{"id":"cus_x"}`); code != 401 {
			t.Errorf("POST without a token: %d", code)
		}
		if cs, _ := registry(t, e); len(cs) != 1 {
			t.Errorf("customers after refused requests: %v", cs)
		}
	})
}

// A storage failure is a 500 naming it; an unrepresentable total a 422,
// as in GET /v1/usage.
func TestCustomersAPIFailures(t *testing.T) {
	e, c, url := customersEnv(t, "")
	db, err := schema.Open(context.Background(), e.Database(), schema.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	c.DB = db
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/v1/customers", ""},
		{"GET", "/v1/customers/cus_1", ""},
		{"POST", "/v1/customers", `{"id":"cus_1"}`},
		{"POST", "/v1/customers/cus_1/plan", `{"plan":"pro","from":"2026-12-01"}`},
		{"GET", "/v1/customers/cus_1/invoice/preview", ""},
	} {
		code, raw := call(t, tc.method, url+tc.path, testToken, tc.body)
		if code != 500 || !strings.Contains(string(raw), `"code": "failed"`) || !strings.Contains(string(raw), "closed") {
			t.Errorf("%s %s on a closed database: %d %s", tc.method, tc.path, code, raw)
		}
	}
}
