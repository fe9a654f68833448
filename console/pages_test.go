package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/console"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/internal/testenv"
)

// The overview counts inserted and failed events from the receipts table and
// duplicates and rejected requests from the process's tally, per minute.
func TestOverviewNumbers(t *testing.T) {
	e := newEnv(t, false)
	for i := range 5 {
		e.send(t, fmt.Sprintf("evt_%d", i), "cus_1", "2")
	}
	e.Clock.Add(time.Minute)
	e.send(t, "evt_0", "cus_1", "2") // duplicate
	e.send(t, "evt_1", "cus_1", "2") // duplicate
	body := testenv.UsageBody("cus_1", "api_requests", "1")
	h := e.SignDefault("evt_bad", body)
	h.Set("webhook-signature", "v1,AAAA") // rejected: bad signature
	if code, _ := e.Post("default", h, body); code != 401 && code != 400 {
		t.Fatalf("bad signature: %d", code)
	}
	// A failed receipt: the mapping finds no quantity.
	if r := e.Send("evt_failed", []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests"}}`)); r.Code != 200 {
		t.Fatalf("unmappable event: %d %+v", r.Code, r.Body)
	}
	e.signIn(t)
	doc := e.page(t, "/ui/")
	for id, want := range map[string]string{"total-inserted": "5", "total-duplicate": "2", "total-rejected": "1", "total-failed": "1"} {
		if got := text(byID(doc, id)); got != want {
			t.Errorf("%s = %q, want %s", id, got, want)
		}
	}
	rows := tableRows(t, doc, "minutes")
	want := [][]string{
		{"2026-11-29 12:01 UTC", "0", "2", "1", "1"},
		{"2026-11-29 12:00 UTC", "5", "0", "0", "0"},
	}
	if !slices.EqualFunc(rows, want, slices.Equal) {
		t.Errorf("per-minute rows %q, want %q", rows, want)
	}
	if got := text(byID(doc, "failed-count")); !strings.HasPrefix(got, "1 failed receipt(s)") {
		t.Errorf("failed count: %q", got)
	}
	if l := links(doc, func(n *html.Node) bool { return strings.Contains(attr(n, "href"), "evt_failed") }); len(l) != 1 {
		t.Errorf("no link to the oldest failed receipt: %v", l)
	}
	if got := text(byID(doc, "ledger-head")); !strings.HasPrefix(got, "ledger:5:") {
		t.Errorf("ledger head %q, want ledger:5:…", got)
	}
	if got := text(byID(doc, "replication-lag")); !strings.Contains(got, "Not replicating") {
		t.Errorf("replication: %q", got)
	}
	if len(find(doc, func(n *html.Node) bool { return n.Data == "svg" })) != 1 {
		t.Error("no chart")
	}
	// Six hours later the events have left the default window but not the 24-hour one.
	e.Clock.Add(6 * time.Hour)
	if got := text(byID(e.page(t, "/ui/"), "total-inserted")); got != "0" {
		t.Errorf("six hours later, inserted = %q", got)
	}
	if got := text(byID(e.page(t, "/ui/?hours=24"), "total-inserted")); got != "5" {
		t.Errorf("24 hours, inserted = %q", got)
	}
}

// Pages of the event list neither skip nor repeat a receipt while events
// arrive between page loads, and the filters and the id search find what
// they name.
func TestEventsPagination(t *testing.T) {
	e := newEnv(t, false)
	const n = 137
	for i := range n {
		e.send(t, fmt.Sprintf("evt_%03d", i), fmt.Sprintf("cus_%d", i%3), "1")
	}
	e.signIn(t)
	var seen []string
	e.pages(t, "/ui/events", 10, func(doc *html.Node, n int) {
		seen = append(seen, eventIDs(t, doc)...)
		// New events arrive while someone reads: they go above the first page.
		e.send(t, fmt.Sprintf("new_%d", n), "cus_9", "1")
	})
	if len(seen) != n {
		t.Fatalf("%d receipts over the pages, want %d", len(seen), n)
	}
	for i, id := range seen {
		if want := fmt.Sprintf("evt_%03d", n-1-i); id != want {
			t.Fatalf("row %d is %s, want %s (newest first, no skip, no repeat)", i, id, want)
		}
	}
	// The first page now starts with the newest arrival.
	if r := tableRows(t, e.page(t, "/ui/events"), "receipts"); r[0][3] != "new_2" {
		t.Errorf("first row %q, want new_2", r[0])
	}

	// Filters.
	if r := tableRows(t, e.page(t, "/ui/events?status=failed"), "receipts"); len(r) != 1 || !strings.Contains(r[0][0], "no receipts") {
		t.Errorf("status=failed: %q", r)
	}
	if r := tableRows(t, e.page(t, "/ui/events?status=applied&provider=default&source=webhook&type=usage.recorded"), "receipts"); len(r) != 50 {
		t.Errorf("all filters matching: %d rows, want a full page", len(r))
	}
	r := tableRows(t, e.page(t, "/ui/events?q=evt_042"), "receipts")
	if len(r) != 1 || r[0][3] != "evt_042" || r[0][2] != "default" {
		t.Errorf("search evt_042: %q", r)
	}
	from := url.QueryEscape(e.Now().Add(-time.Second).Format(time.RFC3339))
	if r := tableRows(t, e.page(t, "/ui/events?from="+from), "receipts"); len(r) != 50 {
		t.Errorf("from a second ago: %d rows", len(r))
	}
	to := url.QueryEscape(e.Now().Add(-time.Hour).Format(time.RFC3339))
	if r := tableRows(t, e.page(t, "/ui/events?to="+to), "receipts"); len(r) != 1 || !strings.Contains(r[0][0], "no receipts") {
		t.Errorf("to an hour ago: %q", r)
	}
	if code, _, _ := e.get(t, "/ui/events?from=yesterday"); code != http.StatusBadRequest {
		t.Errorf("bad from: %d", code)
	}
	if r := tableRows(t, e.page(t, "/ui/events?source=api"), "receipts"); len(r) != 1 || !strings.Contains(r[0][0], "no receipts") {
		t.Errorf("source=api (the ingest API's): %q", r)
	}
	if code, _, _ := e.get(t, "/ui/events?status=deleted"); code != http.StatusBadRequest {
		t.Errorf("bad status: %d", code)
	}
}

// The event page shows the receipt, the body pretty-printed and raw, every
// attempt, the signature re-verified, and the usage rows with their chain.
func TestEventPage(t *testing.T) {
	e := newEnv(t, false)
	e.send(t, "evt_1", "cus_1", "7")
	e.Clock.Add(time.Second)
	e.send(t, "evt_1", "cus_1", "7") // a retry
	e.signIn(t)
	doc := e.page(t, "/ui/event?provider=default&id=evt_1")
	pretty := text(byID(doc, "body-pretty"))
	if !strings.Contains(pretty, `"customer": "cus_1"`) {
		t.Errorf("pretty body %q", pretty)
	}
	if raw := text(byID(doc, "body-raw")); raw != string(testenv.UsageBody("cus_1", "api_requests", "7")) {
		t.Errorf("raw body %q", raw)
	}
	attempts := tableRows(t, doc, "attempts")
	if len(attempts) != 2 || attempts[0][2] != "inserted" || attempts[1][2] != "duplicate" || attempts[0][8] != "valid" || attempts[1][8] != "valid" {
		t.Errorf("attempts %q", attempts)
	}
	if v := text(byID(doc, "verification")); v != "valid" {
		t.Errorf("receipt signature %q", v)
	}
	rows := tableRows(t, doc, "rows")
	if len(rows) != 1 || rows[0][2] != "default:evt_1" || rows[0][3] != "cus_1" || rows[0][5] != "7" || rows[0][8] != "ok" {
		t.Errorf("ledger rows %q", rows)
	}
	if code, _, _ := e.get(t, "/ui/event?provider=default&id=nope"); code != http.StatusNotFound {
		t.Errorf("unknown event: %d", code)
	}
	if code, _, _ := e.get(t, "/ui/event?provider=default"); code != http.StatusBadRequest {
		t.Errorf("no id: %d", code)
	}
}

// After a secret rotation the same body is "not verifiable".
func TestEventNotVerifiableAfterRotation(t *testing.T) {
	testenv.SQLiteOnly(t, "reopens the database file in the same directory")
	dir := t.TempDir()
	e := newEnv(t, false, func(o *testenv.Options) { o.Dir = dir })
	e.send(t, "evt_1", "cus_1", "1")
	e.Env.Close()
	e2 := newEnv(t, false, func(o *testenv.Options) {
		o.Dir = dir
		o.Edits = append(o.Edits, func(c *config.Config) {
			c.Providers[0].Secrets = []config.Secret{{Value: "whsec_" + strings.Repeat("QUJD", 8)}}
		})
	})
	e2.signIn(t)
	doc := e2.page(t, "/ui/event?provider=default&id=evt_1")
	if v := text(byID(doc, "verification")); !strings.HasPrefix(v, "not verifiable") {
		t.Errorf("after rotation: %q", v)
	}
}

// Untrusted text (event id, body, user agent, event type) is escaped: the
// page holds it as text and no element the payload tried to inject.
func TestXSSEscaped(t *testing.T) {
	e := newEnv(t, false)
	const payload = `<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">`
	id := "evt_" + payload
	body := []byte(`{"type":"usage.recorded","note":"` + strings.ReplaceAll(payload, `"`, `\"`) + `","data":{"customer":"cus_x","meter":"api_requests","quantity":1,"occurred_at":"2026-11-29T10:00:00Z"}}`)
	h := e.SignDefault(id, body)
	h.Set("User-Agent", payload)
	if code, raw := e.Post("default", h, body); code != 200 {
		t.Fatalf("post: %d %s", code, raw)
	}
	// A customer id and a plan name full of markup, on a priced invoice
	// (invoice 1: "cus_<" sorts before "cus_x").
	e.send(t, "evt_money", "cus_"+payload, "1500")
	e.Pricing = planPricing(t, "pro"+payload, "29.00", "50.00", [2]string{"1000", "0"}, [2]string{"", "0.001"})
	e.closeMonth(t, "2026-11", time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	// The same customer registered with markup in its name, email and note.
	if err := customer.AddCustomer(context.Background(), e.DB, customer.Customer{ID: "cus_" + payload, Name: payload, Email: payload,
		ExternalIDs: map[string]string{"crm": "c1"}, Note: payload, RecordedAt: e.Now()}, nil, nil); err != nil {
		t.Fatal(err)
	}
	e.Console.DefaultPlan = "pro" + payload
	e.signIn(t)
	for _, p := range []string{"/ui/event?provider=default&id=" + url.QueryEscape(id), "/ui/events", "/ui/events?q=" + url.QueryEscape(id),
		"/ui/dispute?target=" + url.QueryEscape("default:"+id), "/ui/invoices", "/ui/invoices/1", "/ui/dispute?target=invoice:1",
		"/ui/customers", "/ui/customer?id=" + url.QueryEscape("cus_"+payload)} {
		code, raw, _ := e.get(t, p)
		if code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
		if strings.Contains(raw, "<script") || strings.Contains(raw, "<img") || strings.Contains(raw, "onerror=\"window") {
			t.Errorf("%s: the payload reached the page as markup", p)
		}
		if !strings.Contains(raw, "&lt;script&gt;window.__xss=1&lt;/script&gt;") {
			t.Errorf("%s: the payload is not shown as text", p)
		}
	}
	inv := e.page(t, "/ui/invoices/1")
	if got := textOf(inv, "plan"); got != "pro"+payload {
		t.Errorf("plan shown as %q", got)
	}
	// 500 requests above the free 1,000 at 0.001: 0.50, + 29 fee, + 20.50 up to the minimum.
	if got := textOf(inv, "total"); got != "50.00 USD" {
		t.Errorf("total shown as %q", got)
	}
	if r := tableRows(t, e.page(t, "/ui/customers"), "customers"); len(r) != 1 || r[0][0] != "cus_"+payload || r[0][1] != payload || r[0][4] != "pro"+payload {
		t.Errorf("customers %q", r)
	}
	doc := e.page(t, "/ui/event?provider=default&id="+url.QueryEscape(id))
	if ua := tableRows(t, doc, "attempts")[0][6]; ua != payload {
		t.Errorf("user agent shown as %q", ua)
	}
	if n := len(find(doc, func(n *html.Node) bool { return n.Data == "script" || n.Data == "img" })); n != 0 {
		t.Errorf("%d script or img elements", n)
	}
}

// Unknown invoices and bad ids are 404s, bad targets 400s.
func TestNotFound(t *testing.T) {
	e := newEnv(t, false)
	e.signIn(t)
	for p, want := range map[string]int{
		"/ui/invoices/1": 404, "/ui/invoices/x": 404, "/ui/invoices/-1": 404,
		"/ui/dispute?target=invoice:9": 404, "/ui/dispute?target=bogus": 400, "/ui/dispute/bundle?target=invoice:9": 404,
		"/ui/nope": 404, "/ui/usage?tz=Mars/Olympus": 400, "/ui/usage?from=2026-12&to=2026-11": 400,
	} {
		if code, _, _ := e.get(t, p); code != want {
			t.Errorf("%s: %d, want %d", p, code, want)
		}
	}
	if r := tableRows(t, e.page(t, "/ui/invoices"), "invoices"); len(r) != 1 || !strings.Contains(r[0][0], "no invoices") {
		t.Errorf("no invoices: %q", r)
	}
	_ = strconv.Itoa
}

// With a filter that matches rarely, each page examines a bounded window of
// receipts and "search older" goes on below it: following the links finds
// every match exactly once, in order.
func TestEventsScanWindow(t *testing.T) {
	e := newEnv(t, false)
	e.Console.ScanWindow = 7
	for i := range 40 {
		body := testenv.UsageBody("cus_1", "api_requests", "1")
		if i%9 == 0 {
			body = []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests"}}`) // fails to map
		}
		if r := e.Send(fmt.Sprintf("evt_%02d", i), body); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	e.signIn(t)
	var seen []string
	searched := 0
	e.pages(t, "/ui/events?status=failed", 20, func(doc *html.Node, _ int) {
		seen = append(seen, eventIDs(t, doc)...)
		if strings.Contains(text(doc), "without filling this page") {
			searched++
		}
	})
	if want := []string{"evt_36", "evt_27", "evt_18", "evt_09", "evt_00"}; !slices.Equal(seen, want) {
		t.Errorf("failed receipts over the pages %q, want %q", seen, want)
	}
	if searched < 4 {
		t.Errorf("%d pages said they searched a window without filling up", searched)
	}
}

// With replication, the overview shows the replica, its state, lag and last sync.
func TestOverviewReplication(t *testing.T) {
	e := newEnv(t, false)
	last := e.Now().Add(-3 * time.Second)
	healthy := true
	e.Console.Replication = func() console.Replication {
		r := console.Replication{Enabled: true, Replica: "s3://bucket/hookledger", Healthy: healthy, Lag: 1500 * time.Millisecond, LastSync: last}
		if !healthy {
			r.Error = "s3: access denied"
		}
		return r
	}
	e.signIn(t)
	doc := e.page(t, "/ui/")
	txt := text(doc)
	for _, want := range []string{"s3://bucket/hookledger", "healthy", "1.5s", "2026-11-29 11:59 UTC"} {
		if !strings.Contains(txt, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	// The readable time carries the exact one for hovering.
	if ts := find(doc, func(n *html.Node) bool { return n.Data == "time" && attr(n, "title") == "2026-11-29T11:59:57.000Z" }); len(ts) != 1 ||
		attr(ts[0], "datetime") != "2026-11-29T11:59:57.000Z" || text(ts[0]) != "2026-11-29 11:59 UTC" {
		t.Errorf("the last sync is not a <time> with its RFC 3339 instant in title and datetime: %d", len(ts))
	}
	healthy = false
	if txt := text(e.page(t, "/ui/")); !strings.Contains(txt, "down: s3: access denied") {
		t.Errorf("a failing replica is not shown down: %s", txt)
	}
}

// eventIDs are the event ids of an event list page, in order.
func eventIDs(t testing.TB, doc *html.Node) []string {
	var ids []string
	for _, r := range tableRows(t, doc, "receipts") {
		if len(r) > 3 {
			ids = append(ids, r[3])
		}
	}
	return ids
}
