// Package console is the read-only web console at /ui/ on the admin
// listener: an overview, the events with their delivery attempts and
// re-verified signatures, usage, invoices with their money, customers with
// their plans, and each invoice line's dispute trace with its evidence
// bundle. It changes no data.
//
// It reuses the code behind the CLI rather than repeating it: usage totals
// are ledger.Query (what `hookledger usage` and GET /v1/usage run), a
// customer's limits are entitle.Checker's answers (what GET
// /v1/entitlements runs) and its Stripe pushes stripe.Status (what
// `hookledger stripe status` runs), an invoice's digests are
// invoice.InvoiceDigest and invoice.CheckLine (what
// `hookledger verify` runs), an event and a dispute trace are
// dispute.Tracer (what `hookledger dispute` runs, including the signature
// re-verification and the hash-chain check of the rows), and the bundle
// download is dispute.Verifier.WriteBundle (what `dispute export` writes),
// so the two can never disagree.
//
// Pages are html/template, rendered on the server; the templates and the
// stylesheet are embedded in the binary. Charts are SVG drawn on the server
// (chart.go), not a JavaScript library: the console then has no script at
// all, so every page works without JavaScript, the Content-Security-Policy
// can forbid scripts outright (script-src 'self' with nothing to load),
// there is no vendored code to keep patched, and the numbers behind each
// chart are in the page as a table for anyone (or any test) to read. A bar
// per minute or per day is all these charts need; zooming and hover
// tooltips, what uPlot or Chart.js would add, are not worth a dependency
// that renders untrusted strings in the browser.
//
// Authentication (session.go): the sign-in page takes an admin token,
// checked by admin.Server.Authorized (the same tokens and the same
// constant-time comparison as the bearer check), and sets a session cookie
// holding a random 256-bit session id, never the token. The server keeps
// only the id's SHA-256 with its expiry, in memory: restarting serve signs
// everyone out, and a stolen database or log holds nothing that signs in.
package console

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/dispute"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/redact"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Store is what the console reads beyond what dispute and ledger read
// through it; *schema.DB satisfies it.
type Store interface {
	dispute.Store
	ledger.UsageSource
	ledger.HeadSource
	ConsoleReceipts(ctx context.Context, p schema.ReceiptPage) (schema.ReceiptPageResult, error)
	ReceiptsByEventID(ctx context.Context, providers []string, eventID string) ([]schema.ReceiptSummary, error)
	ReceiptProviders(ctx context.Context) ([]string, error)
	ReceiptsPerMinute(ctx context.Context, from, to int64) ([]schema.MinuteCount, error)
	OldestFailedReceipt(ctx context.Context) (schema.ReceiptSummary, int64, error)
	LedgerCustomers(ctx context.Context, after string, limit int) ([]string, error)
	ConsoleInvoices(ctx context.Context, p schema.InvoicePage) ([]schema.InvoiceSummary, error)
	ClosesForAll(ctx context.Context) ([]schema.PeriodClose, error)
	HoldsUsage(ctx context.Context, from, to int64) (bool, error)
	// The customer registry and plan assignments (customers.go).
	CustomerHistory(ctx context.Context, customer string) ([]schema.CustomerRecord, error)
	PlanAssignments(ctx context.Context, customer string) ([]schema.PlanAssignment, error)
	// Forwarding: the operator views of package forward, and an event's messages.
	forward.ReadStore
	MessageAttempts(ctx context.Context, messageID string) ([]schema.OutboxAttempt, error)
	ReceiptMessages(ctx context.Context, provider, eventID string) ([]string, error)
	// A customer's threshold crossings with the rows that crossed them, and
	// its Stripe pushes (stripe.Status) (customers.go).
	entitle.CrossingStore
	entitle.SpendCrossingStore
	GetLedgerRow(ctx context.Context, id int64) (*schema.LedgerRow, error)
	stripe.StatusStore
	// What Stripe says of close-mode invoices (stripe.States).
	stripe.InvoiceStore
	// The customer page's draft invoice: invoice.Preview, priced as
	// `invoice preview` prices it (invoice.LoadPricing).
	invoice.PreviewStore
	invoice.InvoiceSource
	// The usage page's late usage (invoice.LateUsage, `usage late`).
	invoice.LateSource
}

// Entitlements answers entitlement checks (*entitle.Checker).
type Entitlements interface {
	Reply(ctx context.Context, customer string, meters []string, spend bool) (entitle.Reply, error)
}

// Replication is what the overview shows of Litestream.
type Replication struct {
	Enabled  bool
	Replica  string
	Healthy  bool
	Error    string
	Lag      time.Duration
	LastSync time.Time // zero: none yet
}

// Console serves the pages. Set the fields, then mount Handler; Authorized
// is required.
type Console struct {
	DB     Store
	Tracer *dispute.Tracer
	Meters ledger.Meters
	// Authorized reports whether a token signs in (admin.Server.Authorized).
	Authorized func(token string) bool
	// Destinations are the configured forwarding destinations' names; the
	// overview shows their backlog, the event page its messages.
	Destinations []string
	// Secrets are scrubbed from the outbox errors and responses the pages
	// show (forward.Secrets; nil: the credential shapes only).
	Secrets *redact.Secrets
	// DefaultPlan is customers.default_plan: the plan of a customer no
	// assignment puts on another ("" for none).
	DefaultPlan string
	// Catalog is the declared plans (config plans:): the customer page's
	// draft invoice is priced with them, as `invoice preview` prices it.
	// Nil: drafts carry quantities only.
	Catalog *pricing.Catalog
	// Entitlements answers the customer page's limits: the checks of GET
	// /v1/entitlements, from the usage state. Nil leaves them out.
	Entitlements Entitlements
	// Stripe says meters are pushed to Stripe (config stripe:): the customer
	// page then shows the month's pushes as `hookledger stripe status` does.
	Stripe bool
	// Zone is invoicing.tz: the customer page's Stripe month is read in it,
	// as `stripe status` reads it. Default UTC.
	Zone *time.Location
	// Replication reports the replica's state; nil when not replicating.
	Replication func() Replication
	// NotReplicating says why there is no Replication, as serve logs it
	// ("the database is PostgreSQL, …", "no ./litestream.yml and no
	// --litestream-config", "--no-replication"); the overview shows it.
	NotReplicating string
	// Tally counts what the database does not hold (rejected requests,
	// duplicates per minute); nil shows those series as unavailable.
	Tally *Tally
	// SessionTTL is how long a sign-in lasts. Default DefaultSessionTTL.
	SessionTTL time.Duration
	// ScanWindow is how many receipts one page of the filtered event list
	// examines at most. Default DefaultScanWindow.
	ScanWindow int
	Now        func() time.Time
	Log        *slog.Logger

	sessions *sessions
	failures *failureLimit
	pages    map[string]*template.Template
}

// DefaultScanWindow bounds the receipts one filtered page of the event list
// examines: about 30 ms on the benchmark machine (BENCHMARKS.md).
const DefaultScanWindow = 20_000

// Page sizes.
const (
	eventsPerPage   = 50
	invoicesPerPage = 50
	customersPage   = 25
)

// Handler returns the console's routes under admin.ConsolePath.
func (c *Console) Handler() http.Handler {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = DefaultSessionTTL
	}
	if c.ScanWindow <= 0 {
		c.ScanWindow = DefaultScanWindow
	}
	c.sessions = newSessions(c.Now)
	c.failures = newFailureLimit(c.Now)
	c.pages = mustParse()
	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
	mux.HandleFunc("GET /ui/signin", c.signInPage)
	mux.HandleFunc("POST /ui/signin", c.signIn)
	mux.Handle("POST /ui/signout", c.page(c.signOut))
	mux.Handle("GET /ui/{$}", c.page(c.overview))
	mux.Handle("GET /ui/events", c.page(c.events))
	mux.Handle("GET /ui/event", c.page(c.event))
	mux.Handle("GET /ui/usage", c.page(c.usage))
	mux.Handle("GET /ui/usage.csv", c.download("csv", c.usage))
	mux.Handle("GET /ui/usage.json", c.download("json", c.usage))
	mux.Handle("GET /ui/invoices", c.page(c.invoices))
	mux.Handle("GET /ui/invoices.csv", c.download("csv", c.invoices))
	mux.Handle("GET /ui/invoices.json", c.download("json", c.invoices))
	mux.Handle("GET /ui/invoices/{id}", c.page(c.invoice))
	mux.Handle("GET /ui/customers", c.page(c.customers))
	mux.Handle("GET /ui/customer", c.page(c.customer))
	mux.Handle("GET /ui/dispute", c.page(c.trace))
	mux.Handle("GET /ui/dispute/bundle", c.asset(c.bundle))
	mux.Handle("GET /ui/static/", c.asset(http.StripPrefix("/ui/static/", http.FileServerFS(static)).ServeHTTP))
	mux.Handle("/ui/", c.page(func(w http.ResponseWriter, r *http.Request, s *session) {
		c.fail(w, r, s, http.StatusNotFound, "There is no console page at this address.")
	}))
	return securityHeaders(mux)
}

// contentSecurityPolicy allows the console's own stylesheet and images and
// nothing else: no script runs on these pages (there is none), no inline
// style, no frame, no form posting elsewhere.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// signInCSS is the sign-in page's inline style; signInCSP allows exactly it.
const signInCSS = `body{font-family:system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}` +
	`header{background:#1d2330;padding:.6rem 1rem}header a{color:#fff;font-weight:600;text-decoration:none}` +
	`main{max-width:28rem;margin:4rem auto;background:#fff;padding:1.5rem 2rem;border-radius:6px;box-shadow:0 1px 3px #0002}` +
	`label{display:block;margin:.8rem 0 .3rem}input[type=password]{width:100%;padding:.5rem;box-sizing:border-box;font-family:monospace}` +
	`button{margin-top:1rem;padding:.5rem 1.2rem}.error{color:#a00}footer{text-align:center;color:#777;font-size:.8rem}`

var signInCSP = func() string {
	sum := sha256.Sum256([]byte(signInCSS))
	return strings.Replace(contentSecurityPolicy, "style-src 'self'", "style-src 'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'", 1)
}()

// securityHeaders are set on every response, sign-in page and errors included.
// Referrer-Policy same-origin keeps console URLs (they name customers and
// events) from other sites, while the browser still sends a real Origin on
// the sign-in and sign-out POSTs (no-referrer would make it "null", which
// the CSRF check refuses).
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

// view is what every page template gets.
type view struct {
	Title   string
	Nav     string // which tab is current
	Session *session
	Data    any
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, s *session, status int, name, title string, data any) {
	t := c.pages[name]
	if t == nil {
		panic("console: no template " + name)
	}
	// Rendered before anything is sent, so a template error is a clean 500.
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "layout", view{Title: title, Nav: name, Session: s, Data: data}); err != nil {
		c.Log.Error("console: render", "page", name, "error", err.Error())
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// fail renders an error page; a storage error is logged, not shown.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *session, status int, msg string) {
	c.render(w, r, s, status, "error", http.StatusText(status), msg)
}

func (c *Console) internal(w http.ResponseWriter, r *http.Request, s *session, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	c.Log.Error("console: read failed", "path", r.URL.Path, "error", err.Error())
	c.fail(w, r, s, http.StatusInternalServerError, "Reading the database failed; the error is in serve's log.")
}

func mustParse() map[string]*template.Template {
	funcs := template.FuncMap{
		"ms":       stampMillis,
		"time":     stamp,
		"ago":      fmtAgo,
		"query":    withQuery,
		"eventURL": eventURL,
		"traceURL": traceURL,
		"external": externalIDs,
		"add":      func(a, b int) int { return a + b },
		"part":     invoice.PartLabel, // a split month's part of a line, "" for a whole period
		// Stripe's times are unix seconds.
		"unix":        func(sec int64) template.HTML { return stampMillis(sec * 1000) },
		"stripeEvent": stripe.InvoiceEventText,
		// customers are the distinct customers of an event's usage rows.
		"customers": func(us []schema.EventUsage) []string {
			var out []string
			for _, u := range us {
				if !slices.Contains(out, u.Customer) {
					out = append(out, u.Customer)
				}
			}
			return out
		},
		"rowQuantity": func(u schema.EventUsage) string { return ledger.RowQuantity(u.Quantity, int(u.Decimals)).String() },
		"derefInt":    func(p *int) int { return *p },
		"timep": func(t *time.Time) template.HTML {
			if t == nil {
				return "—"
			}
			return stamp(*t)
		},
		"seconds": func(s float64) string { return fmtAgo(time.Duration(s * float64(time.Second))) },
		// The sign-in page is the one page shown without a session, so it
		// cannot load the stylesheet (an asset, behind the session): its
		// few rules are inline, allowed by their hash in its CSP alone.
		"signinCSS": func() template.CSS { return template.CSS(signInCSS) },
	}
	pages := map[string]*template.Template{}
	for _, name := range []string{"signin", "error", "overview", "events", "event", "usage", "invoices", "invoice", "trace", "customers", "customer"} {
		t := template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+name+".html"))
		pages[name] = t
	}
	return pages
}

// stamp is how every page shows a time: one readable form, to the minute
// in UTC with the zone named ("2026-12-01 15:16 UTC"), in a <time> element
// whose datetime and title hold the exact RFC 3339 instant (milliseconds
// kept), so hovering shows it and a script or test can read it.
func stamp(t time.Time) template.HTML {
	if t.IsZero() {
		return "—"
	}
	exact := template.HTMLEscapeString(exactTime(t))
	return template.HTML(`<time datetime="` + exact + `" title="` + exact + `">` + readableTime(t) + `</time>`)
}

// stampMillis is stamp of a unix-millisecond time (0: none).
func stampMillis(ms int64) template.HTML {
	if ms == 0 {
		return "—"
	}
	return stamp(time.UnixMilli(ms))
}

// readableTime is the visible form of a time (downloads use exactTime).
func readableTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// exactTime is RFC 3339 in UTC with milliseconds: the title of a shown time,
// and the form of every time in a download.
func exactTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func fmtAgo(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// withQuery returns the path with the key/value pairs as its query,
// leaving out empty values, so links keep only the filters in use.
func withQuery(path string, kv ...any) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		k := fmt.Sprint(kv[i])
		var s string
		switch x := kv[i+1].(type) {
		case int64:
			if x != 0 {
				s = strconv.FormatInt(x, 10)
			}
		case int:
			if x != 0 {
				s = strconv.Itoa(x)
			}
		default:
			s = fmt.Sprint(x)
		}
		if s != "" {
			v.Set(k, s)
		}
	}
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

func eventURL(provider, eventID string) string {
	return withQuery("/ui/event", "provider", provider, "id", eventID)
}

func traceURL(target string) string { return withQuery("/ui/dispute", "target", target) }
