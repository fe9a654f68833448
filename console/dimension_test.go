package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"golang.org/x/net/html"
)

// dimensionEnv is a console whose meter api_requests declares dimension
// region, which the mapping reads from data.region, holding November's
// usage: cus_a 3 in eu, 2 in us, 1 without a region; cus_b 5 in eu.
func dimensionEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t, false, func(o *testenv.Options) {
		o.Edits = append(o.Edits, func(c *config.Config) {
			c.Meters = []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum, Dimensions: []string{"region"}, Properties: []string{"region"}}}
			c.Usage[0].Properties = map[string]ledger.Field{"region": {Path: "data.region"}}
		})
	})
	for i, ev := range []struct{ customer, region, quantity string }{
		{"cus_a", "eu", "3"}, {"cus_a", "us", "2"}, {"cus_a", "", "1"}, {"cus_b", "eu", "5"},
	} {
		region := ""
		if ev.region != "" {
			region = fmt.Sprintf(`,"region":%q`, ev.region)
		}
		body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":%q,"meter":"api_requests","quantity":%s,"occurred_at":"2026-11-20T10:00:00Z"%s}}`,
			ev.customer, ev.quantity, region)
		if r := e.Send(fmt.Sprintf("evt_%d", i), body); r.Code != 200 {
			t.Fatalf("send: %d %+v", r.Code, r.Body)
		}
	}
	e.signIn(t)
	return e
}

// usageLines are the usage table's rows as "customer|meter|region|quantity".
func usageLines(t *testing.T, doc *html.Node) []string {
	t.Helper()
	var out []string
	for _, r := range tableRows(t, doc, "usage") {
		out = append(out, strings.Join([]string{r[0], r[1], r[2], r[4]}, "|"))
	}
	slices.Sort(out)
	return out
}

// The usage page groups by a declared dimension and keeps one value of it,
// as `hookledger usage --group-by customer,meter,DIM --where DIM=VALUE`
// does (ledger.Query), and its downloads hold the same lines.
func TestUsageDimensionPicker(t *testing.T) {
	e := dimensionEnv(t)
	doc := e.page(t, "/ui/usage?period=2026-11&dim=region")
	if got, want := usageLines(t, doc), []string{"cus_a|api_requests|(none)|1", "cus_a|api_requests|eu|3", "cus_a|api_requests|us|2", "cus_b|api_requests|eu|5"}; !slices.Equal(got, want) {
		t.Errorf("grouped by region:\n%q\nwant\n%q", got, want)
	}
	if sel := byID(doc, "dim"); sel == nil || !strings.Contains(text(sel), "and region") {
		t.Errorf("no dimension picker offering region")
	}
	doc = e.page(t, "/ui/usage?period=2026-11&dim=region&value=eu")
	if got, want := usageLines(t, doc), []string{"cus_a|api_requests|eu|3", "cus_b|api_requests|eu|5"}; !slices.Equal(got, want) {
		t.Errorf("region=eu:\n%q\nwant\n%q", got, want)
	}
	// The same numbers as the query the CLI runs.
	q, err := (ledger.UsageParams{From: "2026-11", To: "2026-12", GroupBy: "customer,meter,region", Where: "region=eu"}).Query(e.Console.Meters)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := ledger.Query(t.Context(), e.DB, q)
	if err != nil || len(rep.Lines) != 2 || rep.Lines[0].Quantity.String() != "3" || rep.Lines[1].Quantity.String() != "5" {
		t.Errorf("ledger.Query region=eu: %+v %v", rep, err)
	}
	// A customer's link and the downloads keep the dimension and value.
	var csvHref, jsonHref string
	for _, h := range links(doc, func(*html.Node) bool { return true }) {
		switch {
		case strings.HasPrefix(h, "/ui/usage.csv"):
			csvHref = h
		case strings.HasPrefix(h, "/ui/usage.json"):
			jsonHref = h
		case strings.HasPrefix(h, "/ui/usage?customer=cus_a"):
			if !strings.Contains(h, "dim=region") || !strings.Contains(h, "value=eu") {
				t.Errorf("customer link %s drops the dimension", h)
			}
		}
	}
	code, body, _ := e.get(t, csvHref)
	want := "from,to,tz,customer,meter,region,day,aggregation,quantity,unit,events,adjustments\n" +
		"2026-11,2026-12,UTC,cus_a,api_requests,eu,,sum,3,,1,0\n2026-11,2026-12,UTC,cus_b,api_requests,eu,,sum,5,,1,0\n"
	if code != 200 || body != want {
		t.Errorf("CSV %s: %d\n%s\nwant\n%s", csvHref, code, body, want)
	}
	code, body, _ = e.get(t, jsonHref)
	var f struct {
		Dimension, Value string
		Lines            []ledger.UsageLine
	}
	if err := json.Unmarshal([]byte(body), &f); code != 200 || err != nil || f.Dimension != "region" || f.Value != "eu" || len(f.Lines) != 2 ||
		f.Lines[1].Dimensions["region"] != "eu" || f.Lines[1].Quantity.String() != "5" {
		t.Errorf("JSON %s: %d %v %+v", jsonHref, code, err, f)
	}
	// One customer: the per-day chart keeps to the value.
	doc = e.page(t, "/ui/usage?period=2026-11&customer=cus_a&dim=region&value=us")
	if got := usageLines(t, doc); !slices.Equal(got, []string{"cus_a|api_requests|us|2"}) {
		t.Errorf("cus_a region=us: %q", got)
	}
	code, body, _ = e.get(t, "/ui/usage.csv?period=2026-11&customer=cus_a&dim=region&value=us")
	if code != 200 || !strings.Contains(body, "2026-11,2026-12,UTC,cus_a,api_requests,,2026-11-20,sum,2,") {
		t.Errorf("cus_a's days with region=us: %d\n%s", code, body)
	}
	// Bad picks are refused with the reason.
	for path, reason := range map[string]string{
		"/ui/usage?period=2026-11&dim=model":  `dim: &#34;model&#34; is not a dimension of any meter (region)`,
		"/ui/usage?period=2026-11&value=eu":   "value: pick the dimension it is a value of",
		"/ui/usage.csv?period=2026-11&dim=xx": `dim: "xx" is not a dimension of any meter (region)`,
	} {
		if code, body, _ := e.get(t, path); code != 400 || !strings.Contains(body, reason) {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
}

// In a browser, the dimension picker regroups the usage page and keeps one
// value; the CSV the browser downloads is the page's.
func TestBrowserUsageDimension(t *testing.T) {
	ctx := newBrowser(t)
	e := dimensionEnv(t)
	shots := screenshotDir(t, e)
	base := e.Admin.URL
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(sctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	step("sign in", chromedp.Navigate(base+"/ui/usage?period=2026-11"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), Token), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#dim")))
	step("pick region = eu", chromedp.SetValue(chromedp.CSS("#dim"), "region"), chromedp.SendKeys(chromedp.CSS("#value"), "eu"),
		chromedp.Submit(chromedp.CSS("#value")))
	step("regrouped", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		for {
			loc, err := chromedp.Run(ctx, chromedp.Location())
			if err != nil || strings.Contains(loc, "value=eu") {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}), chromedp.WaitVisible(chromedp.CSS("#usage td.dim")))
	rows := `Array.from(document.querySelectorAll("#usage tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent.trim()).join(" ")).join(" / ")`
	if got := eval(rows); got != "cus_a api_requests eu sum 3  1 0 / cus_b api_requests eu sum 5  1 0" {
		t.Errorf("region=eu reads %q", got)
	}
	screenshot(t, ctx, shots, "usage-dimension")
	href := eval(`document.getElementById("usage-csv").getAttribute("href")`)
	_, want, _ := e.get(t, href)
	if got := clickDownload(t, ctx, t.TempDir(), "#usage-csv"); string(got) != want || !strings.Contains(want, ",region,") {
		t.Errorf("the CSV the browser downloaded (%s):\n%s\nwant\n%s", href, got, want)
	}
}
