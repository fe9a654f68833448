package forward_test

// End-to-end tests of the billing sync to Stripe (issue 27) against the built
// binary: serve pushing to a fake Stripe that fails a third of its calls,
// killed with SIGKILL under load; customers link, stripe status and stripe
// retry beside it.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/stripe"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

const e2eStripeKey = "sk_test_51E2eKeyThatNoLogOrOutputMayShow"

func TestStripeSync(t *testing.T) {
	bin := testenv.Binary(t)
	testenv.Parallel(t, bin, []testenv.Case{
		{Name: "kill -9 while pushing under load", Run: testStripeKill9},
		{Name: "kill -9 while a sum is in flight", Run: testStripeKillInFlight},
		{Name: "link, status and retry beside serve", Run: testStripeLinkRetry},
	})
}

// stripeConfig writes hookledger.yml: the default provider and meter
// api_requests pushed to base in stream mode, its customers mapped as said.
func stripeE2EConfig(t *testing.T, dir, base, customers string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "hookledger.yml"), fmt.Appendf(nil, `data: ./data
providers:
  - name: default
    scheme: standard
    secrets: [%q]
stripe:
  api_key: ${STRIPE_API_KEY}
  api_base: %s
  customers: %s
  timeout: 2s
  backoff: 50ms
  max_backoff: 500ms
meters:
  - name: api_requests
    stripe: {event_name: api_requests, mode: stream, multiplier: 1}
`+testenv.UsageYAML, e2e.Secret, base, customers), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sendUsage posts one usage event to serve at base until it is
// acknowledged, as a provider retries.
func sendUsage(t *testing.T, base func() string, id, customer, quantity string, at time.Time) {
	body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":%q,"meter":"api_requests","quantity":%s,"occurred_at":%q}}`,
		customer, quantity, at.UTC().Format(time.RFC3339))
	for {
		h := http.Header{}
		if err := testenv.SignStandard(h, e2e.Secret, id, "", body, time.Now()); err != nil {
			t.Error(err)
			return
		}
		req, _ := http.NewRequest(http.MethodPost, base()+"/webhooks/default", strings.NewReader(string(body)))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stripeStatus(t *testing.T, bin, dir string, env []string, args ...string) ([]stripe.StatusLine, string, error) {
	out, err := testenv.Run(bin, dir, env, append([]string{"stripe", "status", "--format", "json"}, args...)...)
	var lines []stripe.StatusLine
	if jerr := json.Unmarshal([]byte(out[:strings.LastIndex(out, "]")+1]), &lines); jerr != nil && strings.Contains(out, "[") {
		t.Fatalf("stripe status: %v\n%s", jerr, out)
	}
	return lines, out, err
}

// kill -9 of serve while it pushes under load, Stripe failing a third of
// the calls (a lost reply, 503, 429 in turn): after a restart every usage
// row reaches Stripe under one identifier, and Stripe's totals per customer
// are the ledger's, to the unit.
func testStripeKill9(t *testing.T, bin string) {
	dir := t.TempDir()
	fake := fakestripe.Serve(t, e2eStripeKey)
	fake.Fail = func(n int) fakestripe.Failure {
		return [...]fakestripe.Failure{fakestripe.None, fakestripe.None, fakestripe.LostReply, fakestripe.None, fakestripe.None,
			fakestripe.Down, fakestripe.None, fakestripe.None, fakestripe.Throttle}[n%9]
	}
	fake.Latency = 100 * time.Millisecond // calls in flight when serve is killed
	stripeE2EConfig(t, dir, fake.URL, "identity")
	env := []string{"STRIPE_API_KEY=" + e2eStripeKey}
	cmd, stderr, url := testenv.StartServe(t, bin, dir, env)
	var base atomic.Value
	base.Store(url)

	const n = 300
	now := time.Now()
	var wg sync.WaitGroup
	next, acked := atomic.Int64{}, atomic.Int64{}
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				sendUsage(t, func() string { return base.Load().(string) }, fmt.Sprintf("evt_%04d", i), fmt.Sprintf("cus_%d", i%5), "0.5", now)
				acked.Add(1)
			}
		}()
	}
	await.Eventually(t, 45*time.Second, "a third acknowledged and some pushed", func() bool { return acked.Load() >= n/3 && len(fake.Snapshot()) > 0 })
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no shutdown at all
		t.Fatal(err)
	}
	cmd.Wait()
	t.Logf("killed with %d acknowledged, %d events at Stripe", acked.Load(), len(fake.Snapshot()))
	cmd2, stderr2, url2 := testenv.StartServe(t, bin, dir, env)
	base.Store(url2)
	wg.Wait()

	var lines []stripe.StatusLine
	await.Eventually(t, 45*time.Second, "stripe status agrees", func() bool {
		var err error
		lines, _, err = stripeStatus(t, bin, dir, env, "--period", now.UTC().Format("2006-01"))
		return err == nil
	})
	// Pushes pending together went as one meter event: every event Stripe
	// holds is a send stored before its request, each once.
	events := fake.Snapshot()
	db := e2e.OpenRO(t, filepath.Join(dir, "data", "hookledger.db"))
	var sends []string
	rows, err := db.Query(`SELECT DISTINCT identifier FROM stripe_sends`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		rows.Scan(&id)
		sends = append(sends, id)
	}
	if err := rows.Close(); err != nil {
		t.Fatal(err)
	}
	if len(events) != len(sends) || len(events) == 0 || len(events) > n {
		t.Errorf("Stripe holds %d events for %d sends of %d usage rows", len(events), len(sends), n)
	}
	for _, id := range sends {
		if _, ok := events[id]; !ok {
			t.Errorf("send %s is not at Stripe", id)
		}
	}
	totals := fake.Totals()
	if len(lines) != 5 {
		t.Fatalf("stripe status has %d lines, want 5 customers", len(lines))
	}
	for _, l := range lines {
		got := totals[[2]string{l.Customer, "api_requests"}]
		// 60 events of 0.5 each: the ledger holds 30.
		if got == nil || got.Cmp(big.NewInt(30)) != 0 || l.Ledger != "30" || l.Acknowledged != "30" {
			t.Errorf("%s: Stripe holds %v, status says ledger %s acknowledged %s; want 30 each", l.Customer, got, l.Ledger, l.Acknowledged)
		}
	}
	fake.Mu.Lock()
	t.Logf("%d calls, %d duplicate answers, refused %v", fake.Calls, fake.Duplicates, fake.Refused)
	fake.Mu.Unlock()
	cmd2.Process.Signal(os.Interrupt)
	cmd2.Wait()
	for _, log := range []string{stderr.String(), stderr2.String()} {
		if strings.Contains(log, "panic") || strings.Contains(log, e2eStripeKey) {
			t.Errorf("serve log shows a panic or the API key:\n%s", log)
		}
	}
}

// kill -9 of serve while a sum of pushes is in flight to Stripe: the sum
// was stored before its request, so serve restarted sends the same meter
// event under the same identifier, Stripe answers that it has it, and
// holds it once.
func testStripeKillInFlight(t *testing.T, bin string) {
	dir := t.TempDir()
	fake := fakestripe.Serve(t, e2eStripeKey)
	stripeE2EConfig(t, dir, fake.URL, "identity")
	env := []string{"STRIPE_API_KEY=" + e2eStripeKey}
	cmd, _, url := testenv.StartServe(t, bin, dir, env)
	if out, err := testenv.Run(bin, dir, env, "forward", "pause", "stripe"); err != nil {
		t.Fatalf("forward pause: %v\n%s", err, out)
	}
	now := time.Now()
	for i := range 5 {
		sendUsage(t, func() string { return url }, fmt.Sprintf("evt_%d", i), "cus_1", "2", now)
	}
	fake.Mu.Lock()
	fake.Gate = make(chan struct{})
	fake.Mu.Unlock()
	open := sync.OnceFunc(func() { close(fake.Gate) })
	t.Cleanup(open) // before the fake's Close, which waits for the held call
	if out, err := testenv.Run(bin, dir, env, "forward", "resume", "stripe"); err != nil {
		t.Fatalf("forward resume: %v\n%s", err, out)
	}
	var first string
	await.Eventually(t, 45*time.Second, "the sum in flight", func() bool {
		fake.Mu.Lock()
		defer fake.Mu.Unlock()
		if len(fake.Seen) > 0 {
			first = fake.Seen[0]
		}
		return first != ""
	})
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	db := e2e.OpenRO(t, filepath.Join(dir, "data", "hookledger.db"))
	var rows int
	if err := db.QueryRow(`SELECT SUM(p.row_count) FROM stripe_sends s JOIN stripe_pushes p ON p.id = s.push_id
		WHERE s.identifier = ?`, first).Scan(&rows); err != nil || rows != 5 {
		t.Fatalf("the call in flight sent %s, stored for pushes of %d rows (%v), want all 5", first, rows, err)
	}
	open() // Stripe takes the event; serve, killed, never hears
	cmd2, _, _ := testenv.StartServe(t, bin, dir, env)
	await.Eventually(t, 45*time.Second, "stripe status agrees", func() bool {
		_, _, err := stripeStatus(t, bin, dir, env, "--period", now.UTC().Format("2006-01"))
		return err == nil
	})
	fake.Mu.Lock()
	seen := slices.Clone(fake.Seen)
	fake.Mu.Unlock()
	if n := strings.Count(strings.Join(seen, " "), first); n != 2 || len(fake.Snapshot()) != 1 {
		t.Errorf("calls %v, Stripe holds %d events: want %s sent twice, held once", seen, len(fake.Snapshot()), first)
	}
	if got := fake.Totals()[[2]string{"cus_1", "api_requests"}]; got == nil || got.Int64() != 10 {
		t.Errorf("Stripe holds %v for cus_1, want 10", got)
	}
	cmd2.Process.Signal(os.Interrupt)
	cmd2.Wait()
}

// A customer without a Stripe customer: its push is dead with what to do,
// stripe status differs (exit 3) and says why; customers link, then stripe
// retry, and status agrees.
func testStripeLinkRetry(t *testing.T, bin string) {
	dir := t.TempDir()
	fake := fakestripe.Serve(t, e2eStripeKey)
	stripeE2EConfig(t, dir, fake.URL, "link")
	env := []string{"STRIPE_API_KEY=" + e2eStripeKey}
	cmd, stderr, url := testenv.StartServe(t, bin, dir, env)
	now := time.Now()
	sendUsage(t, func() string { return url }, "evt_1", "acme", "3", now)
	period := now.UTC().Format("2006-01")
	await.Eventually(t, 45*time.Second, "the push dead", func() bool {
		lines, _, err := stripeStatus(t, bin, dir, env, "--period", period)
		return err != nil && len(lines) == 1 && lines[0].Dead == 1
	})
	lines, out, err := stripeStatus(t, bin, dir, env, "--period", period)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("stripe status with a dead push: %v, want exit 3\n%s", err, out)
	}
	if !strings.Contains(lines[0].LastError, "customers link acme --stripe") {
		t.Errorf("dead with %q, want what to do", lines[0].LastError)
	}
	if out, err := testenv.Run(bin, dir, env, "customers", "link", "acme", "--stripe", "cus_Acme1"); err != nil || !strings.Contains(out, "linked") {
		t.Fatalf("customers link: %v\n%s", err, out)
	}
	if out, err := testenv.Run(bin, dir, env, "stripe", "retry", "--format", "csv"); err != nil || !strings.Contains(out, "retried\n1") {
		t.Fatalf("stripe retry: %v\n%s", err, out)
	}
	await.Eventually(t, 45*time.Second, "status agrees after the retry", func() bool {
		_, _, err := stripeStatus(t, bin, dir, env, "--period", period)
		return err == nil
	})
	if got := fake.Totals()[[2]string{"cus_Acme1", "api_requests"}]; got == nil || got.Int64() != 3 {
		t.Errorf("Stripe holds %v for cus_Acme1, want 3", got)
	}
	if out, err := testenv.Run(bin, dir, env, "customers", "show", "acme"); err != nil || !strings.Contains(out, "cus_Acme1") {
		t.Errorf("customers show: %v\n%s", err, out)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if strings.Contains(stderr.String(), e2eStripeKey) {
		t.Errorf("serve log shows the API key:\n%s", stderr)
	}
}
