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
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	"github.com/hookledger/hookledger/internal/testenv"
)

// ScreenshotsEnv names the directory the browser test saves its screenshots
// in (default a temporary one). docs/console.md's pictures are made with
// HOOKLEDGER_CONSOLE_SCREENSHOTS=docs/console (from the repository root:
// ../docs/console from this package's directory).
const ScreenshotsEnv = "HOOKLEDGER_CONSOLE_SCREENSHOTS"

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

const xssPayload = `<script>window.__xss=1</script>"><img src=x onerror="window.__xss=2">`

// The browser test signs in, opens an event, reads a priced invoice's total,
// follows an invoice line to its trace, downloads the evidence bundle and
// compares it with `dispute export`, checks that an event full of markup
// runs no script, and saves a screenshot of each page.
func TestBrowser(t *testing.T) {
	ctx := newBrowser(t)
	e := newEnv(t, false)
	// Plan starter prices the invoices: 2 requests at 1.00, 3 more at 0.50,
	// then 0.25; a 3.00 fee and a 5.00 minimum.
	e.Pricing = planPricing(t, "starter", "3.00", "5.00", [2]string{"2", "1"}, [2]string{"5", "0.50"}, [2]string{"", "0.25"})
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

	shots := os.Getenv(ScreenshotsEnv)
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
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
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	at := func() string {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimPrefix(loc, base)
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

	step("overview", chromedp.Navigate(base+"/ui/?hours=3"), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
	if got := eval(`document.getElementById("total-rejected").textContent`); got != "6" {
		t.Errorf("rejected in the browser: %q", got)
	}
	shot("overview")

	// Open an event from the list.
	step("events", chromedp.Navigate(base+"/ui/events"), chromedp.WaitVisible(chromedp.CSS("#receipts")))
	shot("events")
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

	step("usage", chromedp.Navigate(base+"/ui/usage?from=2026-11&to=2026-12"), chromedp.WaitVisible(chromedp.CSS("#usage")))
	shot("usage")
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
	dl := t.TempDir()
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	progress := chromedp.Events(dctx, browser.DownloadProgress)
	step("download the bundle", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
			Behavior: browser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dl, EventsEnabled: ptr(true)})
		return err
	}), chromedp.Click(chromedp.CSS("#bundle")))
	var got []byte
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download: %v", err)
		}
		if ev.State == browser.DownloadProgressStateCanceled {
			t.Fatal("the download was cancelled")
		}
		if ev.State == browser.DownloadProgressStateCompleted {
			if got, err = os.ReadFile(filepath.Join(dl, ev.GUID)); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
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
	t.Logf("screenshots in %s", shots)
}

func ptr[T any](v T) *T { return &v }
