package console_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// ScreenshotsEnv names the directory the browser test saves its screenshots
// in, as they are: docs/console.md's pictures are made with
// HOOKLEDGER_CONSOLE_SCREENSHOTS=../docs/console (from this package's
// directory).
const ScreenshotsEnv = "HOOKLEDGER_CONSOLE_SCREENSHOTS"

// ArtifactsEnv names a directory for what tests leave for a reviewer; the
// browser test saves a screenshot of every page in its console-sqlite or
// console-postgres directory. .ci/run sets it and prints it. Without either
// variable the screenshots go to the test's artifact directory
// (t.ArtifactDir: kept with `go test -artifacts -outputdir DIR`, else
// removed after the test).
const ArtifactsEnv = "HOOKLEDGER_ARTIFACTS"

func screenshotDir(t *testing.T, e *env) string {
	dir := os.Getenv(ScreenshotsEnv)
	if dir == "" && os.Getenv(ArtifactsEnv) != "" {
		backend := "sqlite"
		if e.DB.Postgres() {
			backend = "postgres"
		}
		dir = filepath.Join(os.Getenv(ArtifactsEnv), "console-"+backend)
	}
	if dir == "" {
		return t.ArtifactDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// chromiumPath is Debian's chromium (.ci/run installs it); HOOKLEDGER_CHROMIUM
// names another.
func chromiumPath() (string, error) {
	if p := os.Getenv("HOOKLEDGER_CHROMIUM"); p != "" {
		return exec.LookPath(p)
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no chromium on PATH or at /usr/bin/chromium (apt-get install chromium)")
}

// newBrowser starts headless chromium with the flags that work on a CI VM
// and a fresh profile. NeedService fails the test in CI and skips it
// elsewhere when chromium is missing or does not start.
func newBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := chromiumPath()
	if err != nil {
		testenv.NeedService(t, "chromium", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first Run starts the browser: a failure here is a missing service.
	if _, err = chromedp.Run(ctx, chromedp.Evaluate[int]("1")); err != nil {
		testenv.NeedService(t, "chromium", err)
	}
	return ctx
}

// traffic delivers events over the last two hours (some duplicates, a
// rejected request, a failed event) so the overview's chart has a shape.
func traffic(t *testing.T, e *env) {
	t.Helper()
	for i := range 120 {
		e.Clock.Add(time.Minute)
		for j := range 1 + i%7 {
			id := fmt.Sprintf("live_%d_%d", i, j)
			e.send(t, id, fmt.Sprintf("cus_%d", j%4), "1")
			if j == 3 {
				e.send(t, id, fmt.Sprintf("cus_%d", j%4), "1") // a retry
			}
		}
		if i%20 == 7 {
			body := testenv.UsageBody("cus_0", "api_requests", "1")
			h := e.SignDefault("forged", body)
			h.Set("webhook-signature", "v1,Zm9yZ2Vk")
			e.Post("default", h, body)
		}
	}
	if r := e.Send("evt_failed", []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests"}}`)); r.Code != 200 {
		t.Fatalf("failed event: %d", r.Code)
	}
}

// screenshot saves a screenshot of the page in dir at each width an
// operator's screen has (NAME.png at 1,280 px, NAME-1400.png at 1,400 px),
// and fails the test when at either width something overflows (overflowJS):
// the page scrolls sideways or a cell is cut off.
func screenshot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	for _, width := range []int64{1400, 1280} {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := chromedp.Do(sctx, chromedp.EmulateViewport(width, 900))
		cancel()
		if err != nil {
			t.Fatalf("%d px wide: %v", width, err)
		}
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](overflowJS))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != "" {
			t.Errorf("%s at %d px overflows: %s", name, width, got)
		}
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		file := name + ".png"
		if width != 1280 {
			file = fmt.Sprintf("%s-%d.png", name, width)
		}
		if err := os.WriteFile(filepath.Join(dir, file), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// overflowJS describes what overflows the page ("" for nothing): the page
// wider than the window (it scrolls sideways), an element reaching past the
// window's right edge, or a cell whose content is cut off by its own
// box (one ending in an ellipsis, such as a digest, is shortened on
// purpose and shows the whole in its title).
const overflowJS = `(() => {
	const out = [], de = document.documentElement, right = de.clientWidth;
	if (de.scrollWidth > right) out.push("the page is " + de.scrollWidth + " px wide in a " + right + " px window");
	const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "");
	for (const el of document.querySelectorAll("body *")) {
		const r = el.getBoundingClientRect();
		if (r.width === 0 || el.closest("svg") && el.tagName.toLowerCase() !== "svg") continue;
		if (r.right > right + 0.5) { out.push(name(el) + " ends at " + Math.round(r.right) + " px"); if (out.length > 5) break; continue; }
		const cs = getComputedStyle(el);
		if ((el.tagName === "TD" || el.tagName === "TH") && cs.overflowX !== "visible" && cs.textOverflow !== "ellipsis" && el.scrollWidth > el.clientWidth + 1) {
			out.push(name(el) + " cuts off its content (" + el.scrollWidth + " px in " + el.clientWidth + ")");
			if (out.length > 5) break;
		}
	}
	return out.join("; ");
})()`

const xssPayload = `<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">`

// The browser test signs in, opens an event, reads a priced invoice's total,
// follows an invoice line to its trace, downloads the evidence bundle and
// compares it with `dispute export`, checks that an event full of markup
// runs no script, and saves a screenshot of each page.
func TestBrowser(t *testing.T) {
	ctx := newBrowser(t)
	// A destination the events are forwarded to: the overview shows its
	// backlog and last error (nothing sends: the relay does not run).
	dest := config.Destination{Name: "analytics-warehouse-eu-west-1", URL: "http://127.0.0.1:9/hooks", MaxAttempts: 5, Concurrency: 1,
		Secrets: []config.Secret{{Value: "whsec_" + strings.Repeat("QUJD", 8)}}}
	dest.Timeout.Duration, dest.MaxAge.Duration, dest.Backoff.Duration, dest.MaxBackoff.Duration = time.Second, time.Hour, time.Second, time.Minute
	e := newEnv(t, false, func(o *testenv.Options) {
		o.Edits = append(o.Edits, func(c *config.Config) { c.Destinations = []config.Destination{dest} })
	})
	e.Console.Destinations = []string{dest.Name}
	// Plan starter prices the invoices: 2 requests at 1.00, 3 more at 0.50,
	// then 0.25; a 3.00 fee and a 5.00 minimum.
	e.Pricing = planPricing(t, "starter", "3.00", "5.00", [2]string{"2", "1"}, [2]string{"5", "0.50"}, [2]string{"", "0.25"})
	e.Console.Catalog, e.Console.DefaultPlan = e.Pricing.Catalog, "starter"
	invoices(t, e)
	xssID := "evt_" + xssPayload
	body := []byte(`{"type":"usage.recorded","note":"` + strings.ReplaceAll(xssPayload, `"`, `\"`) +
		`","data":{"customer":"cus_3","meter":"api_requests","quantity":1,"occurred_at":"2026-12-02T00:30:00Z"}}`)
	h := e.SignDefault(xssID, body)
	h.Set("User-Agent", xssPayload)
	if code, raw := e.Post("default", h, body); code != 200 {
		t.Fatalf("xss event: %d %s", code, raw)
	}
	// A customer with usage on every day of November, for the per-day chart.
	for d := range 30 {
		at := time.Date(2026, 11, 1+d, 9, 0, 0, 0, time.UTC)
		body := usageBody("cus_daily", "api_requests", fmt.Sprint(20+(d*37)%90), at)
		if r := e.Send(fmt.Sprintf("daily_%02d", d), body); r.Code != 200 {
			t.Fatalf("daily event: %d", r.Code)
		}
	}
	traffic(t, e)
	e.Console.NotReplicating = "no ./litestream.yml and no --litestream-config"
	// What overflowed a 1,400 px window: an ingest API event's long id and
	// customer, and a destination's long last error (a URL, no spaces).
	longID := "api:app:api-gateway#cus_big_enterprise_customer_0000000001#2026-11-29T10:00:00.000Z#req_7f3a9c2e4b1d"
	longCustomer := "cus_big_enterprise_customer_0000000001_with_a_long_external_reference"
	if r := e.Send(longID, usageBody(longCustomer, "api_requests", "3", time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC))); r.Code != 200 {
		t.Fatalf("long event: %d", r.Code)
	}
	msgs, err := e.DB.ListOutbox(context.Background(), schema.OutboxFilter{})
	if err != nil || len(msgs) == 0 {
		t.Fatalf("%d messages (%v)", len(msgs), err)
	}
	err = e.Writer.Submit(context.Background(), custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		at := e.Now().UnixMilli()
		why := "Post \"http://127.0.0.1:9/hooks/analytics-warehouse-eu-west-1/ingest/v2/events?source=hookledger&batch=" + strings.Repeat("x", 80) + "\": dial tcp 127.0.0.1:9: connect: connection refused"
		return tx.Outbox().RecordOutboxResults(ctx, []schema.OutboxResult{{ID: msgs[0].ID, Status: schema.OutboxPending,
			AttemptedAt: at, NextAttemptAt: at + 60_000, Error: why}})
	}))
	if err != nil {
		t.Fatal(err)
	}

	shots := screenshotDir(t, e)
	t.Logf("screenshots in %s", shots)
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
	shot := func(name string) {
		t.Helper()
		screenshot(t, ctx, shots, name)
	}
	at := func() string {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(loc, base)
	}

	// waitFor waits until the browser's address contains part (after a
	// form's submit, which the page it leaves would otherwise satisfy).
	waitFor := func(part string) {
		t.Helper()
		step("wait for "+part, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			for {
				loc, err := chromedp.Run(ctx, chromedp.Location())
				if err != nil || strings.Contains(loc, part) {
					return err
				}
				select {
				case <-ctx.Done():
					return fmt.Errorf("the browser stayed at %s: %w", loc, ctx.Err())
				case <-time.After(50 * time.Millisecond):
				}
			}
		}))
	}
	// fetch is what the console's download at href holds, asked for
	// outside the browser (the env's own signed-in client).
	e.signIn(t)
	fetch := func(href string) []byte {
		t.Helper()
		code, body, _ := e.get(t, href)
		if code != 200 {
			t.Fatalf("GET %s: %d", href, code)
		}
		return []byte(body)
	}
	// A time on the page shows the readable form and the exact one on hover.
	stampRE := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d UTC \| \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)
	checkStamp := func(page, sel string) {
		t.Helper()
		if got := eval(`(e => e.textContent + " | " + e.title)(document.querySelector(` + strconvQuote(sel) + `))`); !stampRE.MatchString(got) {
			t.Errorf("%s: a time reads %q, want the readable form with the RFC 3339 instant as its title", page, got)
		}
	}

	// Sign in: the console sends the browser to the sign-in page and back.
	step("open the console", chromedp.Navigate(base+"/ui/invoices"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if got := at(); got != "/ui/signin?next=%2Fui%2Finvoices" {
		t.Fatalf("without a session the console is at %s", got)
	}
	shot("signin")
	step("sign in", chromedp.SendKeys(chromedp.CSS("#token"), Token), chromedp.Submit(chromedp.CSS("#token")),
		chromedp.WaitVisible(chromedp.CSS("#invoices")))
	if got := at(); got != "/ui/invoices" {
		t.Fatalf("after sign-in the browser is at %s", got)
	}
	if c := eval(`document.cookie`); c != "" {
		t.Errorf("scripts can read the session cookie %q (want HttpOnly)", c)
	}
	shot("invoices")
	// The invoices' money adds up per currency: the footer's total is the
	// sum of the totals above it (in cents, exact for these amounts).
	sums := eval(`(() => {
		let cents = 0;
		for (const td of document.querySelectorAll("#invoices tbody td.total")) cents += Math.round(parseFloat(td.textContent) * 100);
		return (cents / 100).toFixed(2) + " USD = " + document.querySelector("#totals tr.sum td.total").textContent;
	})()`)
	if a, b, _ := strings.Cut(sums, " = "); a != b || a == "0.00 USD" {
		t.Errorf("the invoices' totals add up to %s, the page says %s", a, b)
	}
	checkStamp("invoices", "#invoices time")
	dl := t.TempDir()
	if got, want := clickDownload(t, ctx, dl, "#invoices-csv"), fetch("/ui/invoices.csv"); len(got) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the invoices CSV the browser downloaded:\n%s\nwant\n%s", got, want)
	} else if n := bytes.Count(got, []byte("\n")); n != 1+5 {
		t.Errorf("the invoices CSV has %d lines, want a header and 5 invoices:\n%s", n, got)
	}

	step("overview", chromedp.Navigate(base+"/ui/?hours=3"), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
	if got := eval(`document.getElementById("total-rejected").textContent`); got != "6" {
		t.Errorf("rejected in the browser: %q", got)
	}
	if got := eval(`document.getElementById("replication-lag").textContent`); got != "Not replicating with Litestream: no ./litestream.yml and no --litestream-config." {
		t.Errorf("the replication card says %q", got)
	}
	checkStamp("overview", "#minutes time")
	shot("overview")

	// Open an event from the list.
	step("events", chromedp.Navigate(base+"/ui/events"), chromedp.WaitVisible(chromedp.CSS("#receipts")))
	// The newest receipt is the long one, then the failed event (no usage
	// row); below it, traffic's last event: cus_0, 1 request, at
	// 2026-11-29 10:00 UTC.
	row := `Array.from(document.querySelectorAll("#receipts tbody tr")[%d].cells).slice(5, 8).map(c => c.textContent.trim()).join(" | ")`
	if got := eval(fmt.Sprintf(row, 0)); got != longCustomer+" | 3 api_requests | 2026-11-29 10:00 UTC" {
		t.Errorf("the long event's customer, quantity and event time read %q", got)
	}
	if got := eval(fmt.Sprintf(row, 1)); got != "— | — | —" {
		t.Errorf("the failed event's customer, quantity and event time read %q", got)
	}
	if got := eval(fmt.Sprintf(row, 2)); got != "cus_0 | 1 api_requests | 2026-11-29 10:00 UTC" {
		t.Errorf("the newest usage event's customer, quantity and event time read %q", got)
	}
	checkStamp("events", "#receipts td.occurred time")
	shot("events")
	// Filter by customer with the form, then by status too.
	step("filter by customer", chromedp.SendKeys(chromedp.CSS(`input[name="customer"]`), "cus_daily"),
		chromedp.Submit(chromedp.CSS(`input[name="customer"]`)))
	waitFor("customer=cus_daily")
	step("customer's events", chromedp.WaitVisible(chromedp.CSS("#receipts")))
	if got := eval(`Array.from(document.querySelectorAll("#receipts td.customer")).map(c => c.textContent.trim()).join(",")`); got != strings.TrimSuffix(strings.Repeat("cus_daily,", 30), ",") {
		t.Errorf("the customer filter shows %q", got)
	}
	if got := eval(`document.querySelector("#receipts td.occurred").textContent`); got != "2026-11-30 09:00 UTC" {
		t.Errorf("cus_daily's newest event time %q", got)
	}
	shot("events-customer")
	step("open an event", chromedp.Navigate(base+"/ui/events?q=evt_0_0"), chromedp.WaitVisible(chromedp.CSS("#receipts a")),
		chromedp.Click(chromedp.CSS("#receipts a")), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	if got := at(); got != "/ui/event?id=evt_0_0&provider=default" {
		t.Errorf("the event link opened %s", got)
	}
	if got := eval(`document.getElementById("verification").textContent.trim()`); got != "valid" {
		t.Errorf("signature %q", got)
	}
	if got := eval(`String(document.querySelectorAll("#attempts tbody tr").length)`); got != "2" {
		t.Errorf("%s attempts, want 2", got)
	}
	shot("event")

	// The event full of markup: shown as text, no script ran, nothing injected,
	// and the browser logged no CSP violation (which would mean markup got
	// through the escaping and only the policy stopped it).
	lctx, stopLog := context.WithCancel(ctx)
	logged := make(chan []string, 1)
	entries := chromedp.Events(lctx, cdplog.EntryAdded)
	go func() {
		var out []string
		for ev, err := range entries {
			if err != nil {
				break
			}
			out = append(out, ev.Entry.Source.String()+": "+ev.Entry.Text)
		}
		logged <- out
	}()
	step("log", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{})
		return err
	}))
	step("xss event", chromedp.Navigate(base+"/ui/event?"+url.Values{"provider": {"default"}, "id": {xssID}}.Encode()),
		chromedp.WaitVisible(chromedp.CSS("#attempts")))
	if got := eval(`String(window.__xss)`); got != "undefined" {
		t.Errorf("the payload ran: window.__xss = %s", got)
	}
	if got := eval(`String(document.querySelectorAll("script, img, [onerror]").length)`); got != "0" {
		t.Errorf("%s injected elements", got)
	}
	if got := eval(`document.querySelector("h1 .mono").textContent`); got != xssID {
		t.Errorf("the event id is shown as %q", got)
	}
	if got := eval(`document.querySelector("#attempts td.ua").textContent`); got != xssPayload {
		t.Errorf("the user agent is shown as %q", got)
	}
	if got := eval(`document.getElementById("body-raw").textContent`); got != string(body) {
		t.Errorf("the raw body is shown as %q", got)
	}
	step("xss in the list", chromedp.Navigate(base+"/ui/events"), chromedp.WaitVisible(chromedp.CSS("#receipts")))
	if got := eval(`String(window.__xss) + document.querySelectorAll("script, img, [onerror]").length`); got != "undefined0" {
		t.Errorf("event list: %s", got)
	}
	stopLog()
	for _, l := range <-logged {
		// The browser's own /favicon.ico request meets the admin API's 401:
		// noise. A CSP report or a script error is not.
		if strings.Contains(l, "Content Security Policy") || strings.HasPrefix(l, "security") ||
			strings.HasPrefix(l, "violation") || strings.HasPrefix(l, "javascript") {
			t.Errorf("the browser logged %s", l)
		} else {
			t.Logf("the browser logged %s", l)
		}
	}

	// Usage opens on December: November, the last month, is closed.
	step("usage", chromedp.Navigate(base+"/ui/usage"), chromedp.WaitVisible(chromedp.CSS("#usage")))
	if got := eval(`document.getElementById("period").value + " | " + document.getElementById("window").textContent`); !strings.HasPrefix(got, "2026-12 | 2026-12 (the default: the current month, since the last one is closed)") {
		t.Errorf("usage opens on %q", got)
	}
	// Pick November with the period picker.
	step("pick November", chromedp.SetValue(chromedp.CSS("#period"), "2026-11"), chromedp.Submit(chromedp.CSS("#period")))
	waitFor("period=2026-11")
	step("November", chromedp.WaitVisible(chromedp.CSS("#usage")))
	if got := eval(`String(document.querySelectorAll("#usage tbody tr").length)`); got != "6" {
		t.Errorf("November's usage has %s lines, want 6 (cus_0..3, the long one and cus_daily)", got)
	}
	// Late usage is marked beside the total it is part of, linked to the
	// note naming `hookledger usage late`: the long customer's 3 requests
	// arrived after November was closed.
	if got := eval(`Array.from(document.querySelectorAll("#usage tbody tr")).map(r => r.cells[0].textContent + " " + (r.querySelector(".late-mark a[href='#late-note']") || {textContent: "-"}).textContent).join(" | ")`); !strings.Contains(got, longCustomer+" 3 late") {
		t.Errorf("November's late usage is marked %q", got)
	}
	if got := eval(`document.getElementById("late-note").textContent`); !strings.Contains(got, "hookledger usage late") {
		t.Errorf("the late note says %q", got)
	}
	shot("usage")
	href := eval(`document.getElementById("usage-csv").getAttribute("href")`)
	if got, want := clickDownload(t, ctx, dl, "#usage-csv"), fetch(href); len(got) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the usage CSV the browser downloaded (%s):\n%s\nwant\n%s", href, got, want)
	} else if n := bytes.Count(got, []byte("\n")); n != 1+6 {
		t.Errorf("the usage CSV has %d lines, want a header and the page's 6:\n%s", n, got)
	}
	step("usage of one customer", chromedp.Navigate(base+"/ui/usage?from=2026-11&to=2026-12&customer=cus_daily"),
		chromedp.WaitVisible(chromedp.CSS("svg.chart")))
	shot("usage-customer")

	// Follow an invoice line to its trace.
	step("invoice", chromedp.Navigate(base+"/ui/invoices"), chromedp.Click(chromedp.CSS(`#invoices a[href="/ui/invoices/1"]`)),
		chromedp.WaitVisible(chromedp.CSS("#lines")))
	// cus_0's 6 requests: 2 × 1 + 3 × 0.50 + 1 × 0.25 = 3.75, + the 3.00 fee.
	if got := eval(`document.getElementById("total").textContent`); got != "6.75 USD" {
		t.Errorf("the invoice's total is shown as %q, want 6.75 USD", got)
	}
	if got := eval(`document.querySelector("#amounts td.amount").textContent`); got != "3.75 USD" {
		t.Errorf("the line's amount is shown as %q, want 3.75 USD", got)
	}
	shot("invoice")
	step("trace", chromedp.Click(chromedp.CSS("#lines a.trace")), chromedp.WaitVisible(chromedp.CSS("#bundle")))
	if got := at(); got != "/ui/dispute?target=invoice%3A1%2F1" {
		t.Errorf("the line's trace link opened %s", got)
	}
	if got := eval(`document.querySelector("h1").textContent`); got != "Dispute invoice:1/1" {
		t.Errorf("trace heading %q", got)
	}
	shot("trace")

	// Download the bundle and compare it with `dispute export`.
	got := clickDownload(t, ctx, dl, "#bundle")
	// The customers' pages (before the comparison, which runs the CLI on a
	// SQLite data directory and so ends the test on PostgreSQL).
	step("customers", chromedp.Navigate(base+"/ui/customers"), chromedp.WaitVisible(chromedp.CSS("#customers")))
	shot("customers")
	step("customer", chromedp.Navigate(base+"/ui/customer?id=cus_1"), chromedp.WaitVisible(chromedp.CSS("#history")))
	// Its closed invoices add up: 6.75 (November) + 6.25 (December's).
	if got := eval(`document.querySelector("#customer-totals td.total").textContent`); got != "13.00 USD" {
		t.Errorf("cus_1's invoices add up to %q, want 13.00 USD", got)
	}
	shot("customer")
	// The long customer's draft of January bills its late November usage
	// (2 × 1.00 + 1 × 0.50), the 3.00 fee and the 2.00 true-up to January's
	// 5.00 minimum: what invoice preview computes.
	jan, _ := ledger.MonthPeriod("2027-01", time.UTC)
	draft, err := invoice.Preview(context.Background(), e.DB, invoice.CloseRequest{Period: jan, Customer: longCustomer, Meters: e.Console.Meters,
		Now: e.Now, Pricing: e.Pricing})
	if err != nil || len(draft.Invoices) != 1 {
		t.Fatalf("preview: %+v, %v", draft, err)
	}
	step("customer draft", chromedp.Navigate(base+"/ui/customer?"+url.Values{"id": {longCustomer}, "period": {"2027-01"}}.Encode()),
		chromedp.WaitVisible(chromedp.CSS("#draft")))
	previewTotal := draft.Invoices[0].Money.Total + " " + draft.Invoices[0].Money.Currency
	if got := eval(`document.querySelector("#draft td.draft-total").textContent`); got != previewTotal || previewTotal != "7.50 USD" {
		t.Errorf("the draft's total is %q, invoice preview's %q (want 7.50 USD)", got, previewTotal)
	}
	if got := eval(`document.querySelector("#draft tr.late").textContent`); !strings.Contains(got, "late") || !strings.Contains(got, "2026-11") {
		t.Errorf("the draft's late line reads %q", got)
	}
	shot("customer-draft")
	out := filepath.Join(t.TempDir(), "export.zip")
	e.cli(t, "dispute", "export", "invoice:1/1", "--out", out)
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || !bytes.Equal(got, want) {
		t.Errorf("the downloaded bundle (%d bytes) is not the one dispute export writes (%d bytes)", len(got), len(want))
	}

	// Sign out: the pages are closed again.
	step("sign out", chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#token")))
	step("after sign-out", chromedp.Navigate(base+"/ui/events"), chromedp.WaitVisible(chromedp.CSS("#token")))
	if got := at(); !strings.HasPrefix(got, "/ui/signin") {
		t.Errorf("after sign-out the console is at %s", got)
	}
}

func ptr[T any](v T) *T { return &v }

func strconvQuote(s string) string { return strconv.Quote(s) }

// clickDownload clicks the link sel and returns the file the browser
// downloads into dir.
func clickDownload(t *testing.T, ctx context.Context, dir, sel string) []byte {
	t.Helper()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	progress := chromedp.Events(dctx, browser.DownloadProgress)
	err := chromedp.Do(dctx, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: ptr(true)})
		return err
	}), chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("download %s: %v", sel, err)
	}
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download %s: %v", sel, err)
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatalf("the download of %s was cancelled", sel)
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			got, err := os.ReadFile(filepath.Join(dir, ev.GUID))
			if err != nil {
				t.Fatal(err)
			}
			return got
		}
	}
	t.Fatalf("download %s: no completion", sel)
	return nil
}
