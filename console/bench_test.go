package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/console"
	"github.com/hookledger/hookledger/dispute"
	"github.com/hookledger/hookledger/internal/seed"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// BenchmarkPages times every console page on a large database made by
// `hookledger dev seed` (and `invoice close`), named by HOOKLEDGER_BENCH_DB;
// without it the benchmark skips, so `go test ./...` never seeds. See
// BENCHMARKS.md ("Web console") for the commands and the figures.
func BenchmarkPages(b *testing.B) {
	path := os.Getenv("HOOKLEDGER_BENCH_DB")
	if path == "" {
		b.Skip("HOOKLEDGER_BENCH_DB is not set: seed a database with `hookledger dev seed` (see BENCHMARKS.md)")
	}
	ctx := context.Background()
	db, err := schema.Open(ctx, path, schema.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	v, err := dispute.NewVerifier([]config.Provider{{Name: "seed", Scheme: "standard",
		Secrets: []config.Secret{{Value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}}}})
	if err != nil {
		b.Fatal(err)
	}
	meters := ledger.NewMeters(seed.Meters)
	c := &console.Console{DB: db, Tracer: &dispute.Tracer{DB: db, Verifier: v, Meters: meters}, Meters: meters,
		Authorized: func(tok string) bool { return tok == Token }, Tally: console.NewTally(time.Now()), Log: slog.New(slog.DiscardHandler)}
	h := c.Handler()
	cookie := benchSignIn(b, h)

	// Targets in the middle of the data: an event, an invoice and its line.
	newest, err := db.ConsoleReceipts(ctx, schema.ReceiptPage{Limit: 1, Window: 1})
	if err != nil || len(newest.Receipts) == 0 {
		b.Fatalf("no receipts: %v", err)
	}
	mid := newest.Receipts[0].ID / 2
	page, err := db.ConsoleReceipts(ctx, schema.ReceiptPage{Before: mid, Limit: 1, Window: 1})
	if err != nil || len(page.Receipts) == 0 {
		b.Fatalf("no receipt below %d: %v", mid, err)
	}
	ev := page.Receipts[0]
	invs, err := db.ConsoleInvoices(ctx, schema.InvoicePage{Limit: 1})
	if err != nil || len(invs) == 0 {
		b.Fatalf("no invoices (close a month: hookledger invoice close --period 2026-06 --all): %v", err)
	}
	inv := invs[0].ID / 2
	if inv == 0 {
		inv = invs[0].ID
	}
	invID := itoa(inv)
	month := invs[0].Period
	next, _ := time.Parse("2006-01", month)
	to := next.AddDate(0, 1, 0).Format("2006-01")
	cust := invs[0].Customer

	for _, p := range []struct{ name, path string }{
		{"overview", "/ui/"},
		{"overview_24h", "/ui/?hours=24"},
		{"events", "/ui/events"},
		{"events_deep_page", "/ui/events?before=" + itoa(mid)},
		{"events_filter_type_provider", "/ui/events?provider=seed&type=usage.recorded"},
		{"events_filter_rare_status", "/ui/events?status=failed"},
		{"events_search_id", "/ui/events?q=" + url.QueryEscape(ev.EventID)},
		{"events_filter_customer", "/ui/events?customer=" + url.QueryEscape(cust)},
		{"events_filter_customer_deep_page", "/ui/events?customer=" + url.QueryEscape(cust) + "&before=" + itoa(mid)},
		{"event", "/ui/event?provider=" + url.QueryEscape(ev.Provider) + "&id=" + url.QueryEscape(ev.EventID)},
		{"usage_page_of_customers", "/ui/usage?from=" + month + "&to=" + to},
		{"usage_one_customer_per_day", "/ui/usage?from=" + month + "&to=" + to + "&customer=" + url.QueryEscape(cust)},
		{"usage_default_period", "/ui/usage"},
		{"usage_csv", "/ui/usage.csv?from=" + month + "&to=" + to},
		{"invoices", "/ui/invoices"},
		{"invoices_of_period", "/ui/invoices?period=" + month},
		{"invoices_csv", "/ui/invoices.csv?period=" + month},
		{"invoice", "/ui/invoices/" + invID},
		{"customers", "/ui/customers"},
		{"customer", "/ui/customer?id=" + url.QueryEscape(cust)},
		{"trace_of_line", "/ui/dispute?target=invoice:" + invID + "/1"},
		{"bundle_of_line", "/ui/dispute/bundle?target=invoice:" + invID + "/1"},
	} {
		b.Run(p.name, func(b *testing.B) {
			req := httptest.NewRequest("GET", p.path, nil)
			req.AddCookie(cookie)
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("%s: %d %s", p.path, w.Code, w.Body.String())
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

func benchSignIn(b *testing.B, h http.Handler) *http.Cookie {
	req := httptest.NewRequest("POST", "http://console.test/ui/signin", strings.NewReader(url.Values{"token": {Token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://console.test")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	cks := w.Result().Cookies()
	if w.Code != http.StatusSeeOther || len(cks) != 1 {
		body, _ := io.ReadAll(w.Result().Body)
		b.Fatalf("sign-in: %d %s", w.Code, body)
	}
	return cks[0]
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
