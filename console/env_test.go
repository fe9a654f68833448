package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/hookledger/hookledger/admin"
	"github.com/hookledger/hookledger/console"
	"github.com/hookledger/hookledger/dispute"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Token is the admin token of every test console.
const Token = "console-test-token-0123456789abcdef"

// env is a console on a real database behind a real admin listener, wired
// as serve wires it (internal/server/console.go), on the Env's clock.
type env struct {
	*testenv.Env
	Console *console.Console
	Tally   *console.Tally
	Admin   *httptest.Server
	// Client keeps cookies and does not follow redirects.
	Client *http.Client
	// Pricing prices the invoices closeMonth closes; nil: quantities only.
	Pricing *invoice.Pricing
}

func newEnv(t testing.TB, tls bool, edits ...func(*testenv.Options)) *env {
	t.Helper()
	o := testenv.Options{}
	for _, ed := range edits {
		ed(&o)
	}
	e := &env{Env: testenv.New(t, o)}
	v, err := dispute.NewVerifier(e.Config.Providers)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New("127.0.0.1:0", []string{Token})
	if err != nil {
		t.Fatal(err)
	}
	meters := ledger.NewMeters(e.Config.Meters)
	e.Tally = console.NewTally(e.Now())
	e.Server.Observe = func(o receiver.Observation) { e.Tally.Observe(o.Outcome, e.Now()) }
	e.Console = &console.Console{DB: e.DB, Tracer: &dispute.Tracer{DB: e.DB, Verifier: v, Meters: meters}, Meters: meters,
		Authorized: adm.Authorized, Tally: e.Tally, Now: e.Now, Log: slog.New(slog.NewTextHandler(testLog{t}, nil))}
	adm.Console = e.Console.Handler()
	adm.Mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metrics\n") })
	if tls {
		e.Admin = httptest.NewUnstartedServer(adm.Handler())
		e.Admin.StartTLS()
	} else {
		e.Admin = httptest.NewServer(adm.Handler())
	}
	t.Cleanup(e.Admin.Close)
	jar, _ := cookiejar.New(nil)
	e.Client = &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if tls {
		e.Client.Transport = e.Admin.Client().Transport
	}
	return e
}

// do sends a request with the Origin a browser on the console would send.
func (e *env) do(t testing.TB, method, path string, form url.Values) *http.Response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, e.Admin.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", e.Admin.URL)
	}
	resp, err := e.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// get returns the status and body of a GET.
func (e *env) get(t testing.TB, path string) (int, string, http.Header) {
	t.Helper()
	resp := e.do(t, "GET", path, nil)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// page GETs a page that must answer 200 and parses it.
func (e *env) page(t testing.TB, path string) *html.Node {
	t.Helper()
	code, body, _ := e.get(t, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func (e *env) signIn(t testing.TB) {
	t.Helper()
	resp := e.do(t, "POST", "/ui/signin", url.Values{"token": {Token}, "next": {"/ui/"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", resp.StatusCode)
	}
}

// send delivers a usage event for customer to the default provider now.
func (e *env) send(t testing.TB, id, customer, quantity string) {
	t.Helper()
	if r := e.Send(id, testenv.UsageBody(customer, "api_requests", quantity)); r.Code != 200 {
		t.Fatalf("send %s: %d %+v", id, r.Code, r.Body)
	}
}

// closeMonth closes a month for every customer, as `invoice close --all`
// does, priced with e.Pricing.
func (e *env) closeMonth(t testing.TB, month string, now time.Time) {
	t.Helper()
	p, err := ledger.MonthPeriod(month, time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := invoice.Close(context.Background(), e.DB, invoice.CloseRequest{Period: p, All: true, Meters: e.Console.Meters,
		Now: func() time.Time { return now }, Pricing: e.Pricing}); err != nil {
		t.Fatal(err)
	}
}

// The HTML helpers: find elements, read their text.

func find(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func byID(doc *html.Node, id string) *html.Node {
	ns := find(doc, func(n *html.Node) bool { return attr(n, "id") == id })
	if len(ns) == 0 {
		return nil
	}
	return ns[0]
}

func text(n *html.Node) string {
	if n == nil {
		return ""
	}
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// tableRows returns the text of each body row's cells of table id.
func tableRows(t testing.TB, doc *html.Node, id string) [][]string {
	t.Helper()
	tbl := byID(doc, id)
	if tbl == nil {
		t.Fatalf("no table #%s", id)
	}
	var rows [][]string
	for _, tr := range find(tbl, func(n *html.Node) bool { return n.Data == "tr" }) {
		if tr.Parent != nil && (tr.Parent.Data == "thead" || tr.Parent.Data == "tfoot") {
			continue
		}
		var cells []string
		for _, td := range find(tr, func(n *html.Node) bool { return n.Data == "td" }) {
			cells = append(cells, text(td))
		}
		rows = append(rows, cells)
	}
	return rows
}

// links returns the hrefs of the a elements matching.
func links(doc *html.Node, match func(*html.Node) bool) []string {
	var out []string
	for _, a := range find(doc, func(n *html.Node) bool { return n.Data == "a" && match(n) }) {
		out = append(out, attr(a, "href"))
	}
	return out
}

// testLog sends the console's log lines to the test's log.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// pages follows a list's rel="next" links from path, calling fn with each
// page and its number, and fails after max pages.
func (e *env) pages(t testing.TB, path string, max int, fn func(doc *html.Node, n int)) {
	t.Helper()
	for n := 0; path != ""; n++ {
		if n >= max {
			t.Fatalf("more than %d pages from %s", max, path)
		}
		doc := e.page(t, path)
		fn(doc, n)
		path = ""
		if l := links(doc, func(a *html.Node) bool { return attr(a, "rel") == "next" }); len(l) == 1 {
			path = l[0]
		}
	}
}
