package console_test

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// What an operator works from at month end (issue 24): the event list's
// customer, quantity and event-time columns and its customer filter, the
// usage page's default period and picker, the downloads, the totals of the
// invoice list, one time format, and the replication card's reason.

// The event list shows each event's customer, quantities and event time
// from its ledger rows, and filters by customer (with the other filters),
// paging on the customer's ledger rows without skipping or repeating.
func TestEventsByCustomer(t *testing.T) {
	e := newEnv(t, false)
	e.Console.ScanWindow = 60 // below cus_a's and cus_b's rows, above cus_c's
	occurred := time.Date(2026, 11, 20, 8, 30, 0, 0, time.UTC)
	var want []string // cus_b's events, newest first
	for i := range 230 {
		cus := []string{"cus_a", "cus_b", "cus_a", "cus_c"}[i%4]
		body := usageBody(cus, "api_requests", fmt.Sprintf("%d.5", i), occurred.Add(time.Duration(i)*time.Minute))
		id := fmt.Sprintf("evt_%03d", i)
		if r := e.Send(id, body); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
		if cus == "cus_b" {
			want = append([]string{id}, want...)
		}
	}
	// An ignored event (no usage) and a failed one: no customer.
	if r := e.Send("evt_ignored", []byte(`{"type":"customer.created","data":{}}`)); r.Code != 200 {
		t.Fatalf("ignored: %d", r.Code)
	}
	e.signIn(t)

	// The columns: customer, quantity with its meter, event time.
	rows := tableRows(t, e.page(t, "/ui/events"), "receipts")
	if got := rows[0]; got[3] != "evt_ignored" || got[5] != "—" || got[6] != "—" || got[7] != "—" {
		t.Errorf("the ignored event's row %q, want no customer, quantity or event time", got)
	}
	if got := rows[1]; got[3] != "evt_229" || got[5] != "cus_b" || got[6] != "229.5 api_requests" || got[7] != "2026-11-20 12:19 UTC" {
		t.Errorf("evt_229's row %q, want cus_b, 229.5 api_requests, 2026-11-20 12:19 UTC", got)
	}

	// Filtered by customer: every cus_b event once, newest first, over pages.
	var seen []string
	e.pages(t, "/ui/events?customer=cus_b", 10, func(doc *html.Node, n int) {
		for _, r := range tableRows(t, doc, "receipts") {
			if len(r) > 5 {
				if r[5] != "cus_b" {
					t.Errorf("page %d holds %q", n, r)
				}
				seen = append(seen, r[3])
			}
		}
		e.send(t, fmt.Sprintf("new_%d", n), "cus_b", "1") // arrivals go above the first page
	})
	if !slices.Equal(seen, want) {
		t.Errorf("cus_b's events over the pages:\n%q\nwant\n%q", seen, want)
	}
	// With more than a page of matches the page is full (50) and links on.
	doc := e.page(t, "/ui/events?customer=cus_a")
	if r := tableRows(t, doc, "receipts"); len(r) != 50 || r[0][5] != "cus_a" {
		t.Errorf("cus_a's first page: %d rows", len(r))
	}
	// The customer link of a row filters by that customer.
	if l := links(doc, func(a *html.Node) bool { return attr(a, "href") == "/ui/events?customer=cus_a" }); len(l) == 0 {
		t.Error("no row links to its customer's events")
	}
	// With the other filters: the received-time window and the status.
	if r := tableRows(t, e.page(t, "/ui/events?customer=cus_c&status=failed"), "receipts"); len(r) != 1 || !strings.Contains(r[0][0], "no receipts") {
		t.Errorf("cus_c failed: %q", r)
	}
	to := url.QueryEscape(e.Now().Add(-time.Hour).Format(time.RFC3339))
	if r := tableRows(t, e.page(t, "/ui/events?customer=cus_c&to="+to), "receipts"); len(r) != 1 || !strings.Contains(r[0][0], "no receipts") {
		t.Errorf("cus_c received over an hour ago: %q", r)
	}
	if r := tableRows(t, e.page(t, "/ui/events?customer=cus_c&provider=default&status=applied"), "receipts"); len(r) != 50 {
		t.Errorf("cus_c applied: %d rows, want a full page", len(r))
	}
	if r := tableRows(t, e.page(t, "/ui/events?customer=nobody"), "receipts"); len(r) != 1 || !strings.Contains(r[0][0], "no receipts") {
		t.Errorf("an unknown customer: %q", r)
	}
}

// The usage page opens on the last month until it is closed for all
// customers, then on the current month; the picker offers both, marked.
func TestUsageDefaultPeriod(t *testing.T) {
	e := newEnv(t, false)
	e.Clock.Set(time.Date(2026, 12, 1, 15, 16, 0, 0, time.UTC))
	for i, at := range []time.Time{time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} {
		if r := e.Send(fmt.Sprintf("evt_%d", i), usageBody("cus_1", "api_requests", fmt.Sprint(10+i), at)); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	e.signIn(t)
	quantity := func(doc *html.Node) string {
		r := tableRows(t, doc, "usage")
		if len(r) != 1 || len(r[0]) < 4 {
			return fmt.Sprint(r)
		}
		return r[0][3]
	}
	selected := func(doc *html.Node) string {
		picker := byID(doc, "period")
		if picker == nil {
			return "no period picker"
		}
		o := find(picker, func(n *html.Node) bool { return n.Data == "option" && hasAttr(n, "selected") })
		if len(o) != 1 {
			return ""
		}
		return attr(o[0], "value")
	}
	doc := e.page(t, "/ui/usage")
	if got, q := selected(doc), quantity(doc); got != "2026-11" || q != "10" {
		t.Errorf("before November is closed: period %q, quantity %q; want 2026-11, 10", got, q)
	}
	if txt := text(byID(doc, "window")); !strings.Contains(txt, "the last month, until it is closed") {
		t.Errorf("the page does not say why: %q", txt)
	}
	e.closeMonth(t, "2026-11", e.Now())
	doc = e.page(t, "/ui/usage")
	if got, q := selected(doc), quantity(doc); got != "2026-12" || q != "11" {
		t.Errorf("once November is closed: period %q, quantity %q; want 2026-12, 11", got, q)
	}
	if byID(doc, "period") == nil {
		t.Fatal("no period picker")
	}
	var months []string
	for _, o := range find(byID(doc, "period"), func(n *html.Node) bool { return n.Data == "option" }) {
		months = append(months, text(o))
	}
	if len(months) != 14 || months[0] != "2026-12" || months[1] != "2026-11 · closed" || months[12] != "2025-12" || months[13] != "from/to →" {
		t.Errorf("the picker offers %q", months)
	}
	// Picking a month; a custom window overrides it.
	if q := quantity(e.page(t, "/ui/usage?period=2026-11")); q != "10" {
		t.Errorf("period=2026-11: %q", q)
	}
	doc = e.page(t, "/ui/usage?period=2026-11&from=2026-11-30&to=2026-12-02")
	if got, q := selected(doc), quantity(doc); got != "" || q != "21" {
		t.Errorf("a custom window: period %q, quantity %q; want the picker on from/to, 21", got, q)
	}
	if code, _, _ := e.get(t, "/ui/usage?period=November"); code != http.StatusBadRequest {
		t.Errorf("a bad period: %d", code)
	}
}

func hasAttr(n *html.Node, key string) bool {
	for _, a := range n.Attr {
		if a.Key == key {
			return true
		}
	}
	return false
}

// download GETs a download link of a page and checks its headers.
func (e *env) download(t *testing.T, href, contentType string) string {
	t.Helper()
	code, body, h := e.get(t, href)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", href, code, body)
	}
	if ct, cd := h.Get("Content-Type"), h.Get("Content-Disposition"); !strings.HasPrefix(ct, contentType) || !strings.HasPrefix(cd, "attachment; filename=") {
		t.Errorf("%s: %s, %s", href, ct, cd)
	}
	return body
}

// downloadLink is the href of the page's download link id.
func downloadLink(t *testing.T, doc *html.Node, id string) string {
	t.Helper()
	l := links(doc, func(a *html.Node) bool { return attr(a, "id") == id })
	if len(l) != 1 {
		t.Fatalf("the page has %d links #%s", len(l), id)
	}
	return l[0]
}

func readCSV(t *testing.T, body string) [][]string {
	t.Helper()
	recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatalf("CSV: %v\n%s", err, body)
	}
	return recs
}

// The usage page's downloads hold exactly its rows: the same window, the
// same page of customers, one customer's days.
func TestUsageDownloads(t *testing.T) {
	e := newEnv(t, false)
	at := time.Date(2026, 11, 3, 10, 0, 0, 0, time.UTC)
	for i := range 60 { // 30 customers: two pages of them
		if r := e.Send(fmt.Sprintf("evt_%d", i), usageBody(fmt.Sprintf("cus_%02d", i%30), "api_requests", fmt.Sprintf("%d.125", i), at.Add(time.Duration(i)*time.Hour))); r.Code != 200 {
			t.Fatalf("send: %d", r.Code)
		}
	}
	// A customer id a spreadsheet would run as a formula.
	if r := e.Send("evt_formula", usageBody("=HYPERLINK(1)", "api_requests", "-2", at)); r.Code != 200 {
		t.Fatalf("send: %d", r.Code)
	}
	e.signIn(t)
	e.pages(t, "/ui/usage?period=2026-11", 3, func(doc *html.Node, n int) {
		rows := tableRows(t, doc, "usage")
		csvHref := downloadLink(t, doc, "usage-csv")
		recs := readCSV(t, e.download(t, csvHref, "text/csv"))
		if !slices.Equal(recs[0], []string{"from", "to", "tz", "customer", "meter", "day", "aggregation", "quantity", "unit", "events", "adjustments"}) {
			t.Fatalf("CSV header %q", recs[0])
		}
		if len(recs)-1 != len(rows) {
			t.Fatalf("page %d: %d rows, the CSV %d", n, len(rows), len(recs)-1)
		}
		for i, r := range rows {
			c := recs[i+1]
			cust := strings.TrimPrefix(c[3], "'")
			if c[0] != "2026-11" || c[1] != "2026-12" || c[2] != "UTC" || cust != r[0] || c[4] != r[1] || c[5] != "" || c[6] != r[2] || c[7] != r[3] || c[9] != r[5] {
				t.Errorf("page %d row %d: page %q, CSV %q", n, i, r, c)
			}
			if r[0] == "=HYPERLINK(1)" && (c[3] != "'=HYPERLINK(1)" || c[7] != "-2") {
				t.Errorf("a formula-like customer is written %q (quantity %q)", c[3], c[7])
			}
		}
		jsonHref := downloadLink(t, doc, "usage-json")
		var f struct {
			From, To, TZ string
			Lines        []ledger.UsageLine
		}
		if err := json.Unmarshal([]byte(e.download(t, jsonHref, "application/json")), &f); err != nil {
			t.Fatal(err)
		}
		if f.From != "2026-11" || f.To != "2026-12" || len(f.Lines) != len(rows) {
			t.Fatalf("page %d: JSON %s to %s with %d lines, the page %d", n, f.From, f.To, len(f.Lines), len(rows))
		}
		for i, l := range f.Lines {
			if l.Customer != rows[i][0] || l.Quantity.String() != rows[i][3] {
				t.Errorf("page %d line %d: JSON %s %s, page %q", n, i, l.Customer, l.Quantity, rows[i])
			}
		}
	})
	// One customer: its totals, then a row per day of the window.
	doc := e.page(t, "/ui/usage?period=2026-11&customer=cus_07")
	recs := readCSV(t, e.download(t, downloadLink(t, doc, "usage-csv"), "text/csv"))
	if len(recs) != 1+1+2 || recs[1][3] != "cus_07" || recs[1][7] != "44.25" || recs[1][5] != "" {
		t.Fatalf("cus_07's CSV: %d rows, %q", len(recs), recs)
	}
	if recs[2][5] != "2026-11-03" || recs[2][7] != "7.125" || recs[3][5] != "2026-11-04" || recs[3][7] != "37.125" {
		t.Errorf("cus_07's days %q %q", recs[2], recs[3])
	}
	// No session: no download.
	anon := &http.Client{}
	resp, err := anon.Get(e.Admin.URL + "/ui/usage.csv")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("usage.csv without a session: %d", resp.StatusCode)
	}
}

// The invoice list adds up its invoices' money per currency, and its
// downloads hold exactly its invoices and totals.
func TestInvoicesTotalsAndDownloads(t *testing.T) {
	e := newEnv(t, false)
	// Plan starter: 2 requests at 1.00, 3 more at 0.50, then 0.25; a 3.00
	// fee and a 5.00 minimum.
	e.Pricing = planPricing(t, "starter", "3.00", "5.00", [2]string{"2", "1"}, [2]string{"5", "0.50"}, [2]string{"", "0.25"})
	invoices(t, e)
	e.signIn(t)
	doc := e.page(t, "/ui/invoices")
	rows := tableRows(t, doc, "invoices")
	// November: cus_0 6 requests (3.75 + 3.00 = 6.75), cus_1..3 likewise;
	// December: cus_1's late request 0.25, at least the 5.00 minimum.
	var totals []string
	for _, r := range rows {
		totals = append(totals, r[7])
	}
	foot := text(byID(doc, "totals"))
	if !strings.Contains(foot, "5 invoice(s) in USD") || !strings.Contains(foot, "this page: 5 invoice(s)") {
		t.Errorf("the totals %q (invoice totals %q)", foot, totals)
	}
	sum := ledger.Total{}
	for _, tot := range totals {
		q, err := ledger.ParseTotal(strings.TrimSuffix(tot, " USD"))
		if err != nil {
			t.Fatalf("total %q: %v", tot, err)
		}
		sum = sum.Plus(q)
	}
	if want := sum.String() + " USD"; !strings.Contains(foot, want) {
		t.Errorf("the totals %q lack the sum of the invoices %q, %s", foot, totals, want)
	}

	recs := readCSV(t, e.download(t, downloadLink(t, doc, "invoices-csv"), "text/csv"))
	if len(recs) != 1+len(rows) || recs[0][0] != "id" || recs[0][7] != "total" {
		t.Fatalf("invoices CSV %q", recs)
	}
	for i, r := range rows {
		c := recs[i+1]
		if c[0] != r[0] || c[1] != r[1] || c[2] != r[2] || c[7]+" "+c[8] != r[7] || c[10] != r[9] {
			t.Errorf("invoice row %d: page %q, CSV %q", i, r, c)
		}
		if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(c[11]) {
			t.Errorf("closed_at %q is not RFC 3339", c[11])
		}
	}
	var f struct {
		Invoices []struct {
			ID    int64
			Total string
		}
		Totals []struct{ Currency, Total string }
	}
	if err := json.Unmarshal([]byte(e.download(t, downloadLink(t, doc, "invoices-json"), "application/json")), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Invoices) != len(rows) || len(f.Totals) != 1 || f.Totals[0].Currency != "USD" || f.Totals[0].Total+" USD" != sum.String()+" USD" {
		t.Errorf("invoices JSON %+v", f)
	}
	// Filtered: the download follows the filter.
	doc = e.page(t, "/ui/invoices?period=2026-12")
	recs = readCSV(t, e.download(t, downloadLink(t, doc, "invoices-csv"), "text/csv"))
	if len(recs) != 2 || recs[1][2] != "2026-12" || recs[1][1] != "cus_1" {
		t.Errorf("December's CSV %q", recs)
	}
}

// Every page shows times one way, "2026-12-01 15:16 UTC", each in a <time>
// whose title (shown on hover) and datetime hold the exact RFC 3339 instant.
func TestTimestampsOneFormat(t *testing.T) {
	e := newEnv(t, false)
	invoices(t, e)
	e.signIn(t)
	readable := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d UTC$`)
	exact := regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	old := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d`)
	for _, path := range []string{"/ui/", "/ui/events", "/ui/event?provider=default&id=evt_0_0", "/ui/usage", "/ui/invoices",
		"/ui/invoices/1", "/ui/dispute?target=invoice:1/1", "/ui/customers", "/ui/customer?id=cus_1"} {
		doc := e.page(t, path)
		times := find(doc, func(n *html.Node) bool { return n.Data == "time" })
		if len(times) == 0 && path != "/ui/usage" && path != "/ui/customers" {
			t.Errorf("%s shows no time", path)
		}
		for _, n := range times {
			shown, title := text(n), attr(n, "title")
			at, err := time.Parse(time.RFC3339, title)
			if !readable.MatchString(shown) || !exact.MatchString(title) || attr(n, "datetime") != title || err != nil ||
				at.UTC().Format("2006-01-02 15:04 UTC") != shown {
				t.Errorf("%s: a time shown %q with title %q, datetime %q", path, shown, title, attr(n, "datetime"))
			}
		}
		main := find(doc, func(n *html.Node) bool { return n.Data == "main" })[0]
		if m := old.FindString(text(main)); m != "" {
			t.Errorf("%s still shows a time as %q", path, m)
		}
	}
}

// The replication card says why there is no replica.
func TestReplicationOffReason(t *testing.T) {
	e := newEnv(t, false)
	e.signIn(t)
	for _, reason := range []string{"the database is PostgreSQL, which replicates itself (Litestream is for SQLite)",
		"no ./litestream.yml and no --litestream-config", "--no-replication"} {
		e.Console.NotReplicating = reason
		if got := text(byID(e.page(t, "/ui/"), "replication-lag")); got != "Not replicating with Litestream: "+reason+"." {
			t.Errorf("the card says %q", got)
		}
	}
}

// The event list's new statements are served by indexes, not by reading
// every row: a customer's page walks migration 0020's (customer_id, id)
// index in order (no sort of the customer's rows), and a page's usage rows
// are one lookup each by (provider, event_id). On PostgreSQL the plan is made with
// sequential scans disabled (ExplainConsoleReceipts), so it shows that the
// index serves the statement, whatever a small test table makes cheapest.
func TestEventsQueryPlans(t *testing.T) {
	e := newEnv(t, false)
	for i := range 20 {
		e.send(t, fmt.Sprintf("evt_%d", i), fmt.Sprintf("cus_%d", i%3), "1")
	}
	ctx := t.Context()
	customer, err := e.DB.ExplainConsoleReceipts(ctx, schema.ReceiptPage{Customer: "cus_1", Status: "applied", Limit: 50, Window: 1000})
	if err != nil {
		t.Fatal(err)
	}
	usage, err := e.DB.ExplainConsoleReceipts(ctx, schema.ReceiptPage{Limit: 50, Window: 1000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a customer's page:\n%s\nthe usage rows of a page:\n%s", customer, usage)
	if e.DB.Postgres() {
		// The window: the customer's rows newest first, straight off the
		// index, stopped after Window rows (what follows is bounded by it).
		if !regexp.MustCompile(`Limit .*\n\s+->  Index Scan Backward using metered_usage_customer_rows on metered_usage`).MatchString(customer) ||
			strings.Contains(customer, "Seq Scan") {
			t.Errorf("a customer's page does not walk metered_usage_customer_rows in order:\n%s", customer)
		}
		if strings.Contains(usage, "Seq Scan") || !strings.Contains(usage, "Index Cond: (receipt_id =") {
			t.Errorf("the usage rows of a receipt are not an index lookup:\n%s", usage)
		}
		return
	}
	if !strings.Contains(customer, "SEARCH metered_usage USING INDEX metered_usage_customer_rows (customer_id=? AND id<?)") ||
		strings.Contains(customer, "TEMP B-TREE") || strings.Contains(customer, "SCAN metered_usage") || strings.Contains(customer, "SCAN r") {
		t.Errorf("a customer's page does not walk metered_usage_customer_rows in order:\n%s", customer)
	}
	if strings.Contains(usage, "SCAN metered_usage") || !strings.Contains(usage, "USING INDEX metered_usage_receipt (receipt_id=?)") {
		t.Errorf("the usage rows of a receipt are not an index lookup:\n%s", usage)
	}
}
