package forward_test

// End-to-end tests of forwarding (issue 15) against the built binary: a real
// serve forwarding to a real HTTP application, killed with SIGKILL under
// load; the forward CLI beside a running serve, with its error paths.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
)

func TestForwarding(t *testing.T) {
	bin := testenv.Binary(t)
	testenv.Parallel(t, bin, []testenv.Case{
		{Name: "kill -9 while forwarding under load", Run: testForwardKill9},
		{Name: "forward CLI beside serve", Run: testForwardCLI},
	})
}

// dedupeApp is the application behind hookledger: it verifies every request
// with the Standard Webhooks library and records which event each webhook-id
// carried. fail, when set, makes it answer 500 (after verifying).
type dedupeApp struct {
	srv     *httptest.Server
	mu      sync.Mutex
	byID    map[string]string // webhook-id -> event id
	events  map[string]int    // event id -> requests
	bad     int               // requests that did not verify
	fail    atomic.Bool
	latency time.Duration
}

func newDedupeApp(t *testing.T, secret string) *dedupeApp {
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	a := &dedupeApp{byID: map[string]string{}, events: map[string]int{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		defer a.mu.Unlock()
		if err := wh.Verify(body, r.Header); err != nil {
			a.bad++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		id, ev := r.Header.Get("Webhook-Id"), r.Header.Get(forward.HeaderEventID)
		if prev, ok := a.byID[id]; ok && prev != ev {
			a.bad++ // one webhook-id, two events: the app would drop one
		}
		a.byID[id] = ev
		a.events[ev]++
		if a.latency > 0 {
			time.Sleep(a.latency)
		}
		if a.fail.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// deduped is the set of events the app has, after dropping repeats of a
// webhook-id, and how many requests it took.
func (a *dedupeApp) deduped() (events map[string]bool, requests, bad int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	events = map[string]bool{}
	for _, ev := range a.byID {
		events[ev] = true
	}
	for _, n := range a.events {
		requests += n
	}
	return events, requests, a.bad
}

// forwardConfig writes hookledger.yml: the default provider, an admin
// listener, and one destination.
func forwardConfig(t *testing.T, dir, adminAddr, url, extra string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "hookledger.yml"), fmt.Appendf(nil, `data: ./data
admin:
  listen: %s
  tokens: ["forward-admin-token-0123456789"]
providers:
  - name: default
    scheme: standard
    secrets: [%q]
destinations:
  - name: app
    url: %s
    secrets: [%q]
    timeout: 2s
    backoff: 50ms
    max_backoff: 500ms
%s`+testenv.UsageYAML, adminAddr, e2e.Secret, url, e2e.Secret, extra), 0o600); err != nil {
		t.Fatal(err)
	}
}

// kill -9 of serve while it forwards under load: after a restart every event
// acknowledged to a sender reaches the app at least once, repeats carry the
// same webhook-id, and the app's deduped set is the acknowledged set.
func testForwardKill9(t *testing.T, bin string) {
	dir := t.TempDir()
	a := newDedupeApp(t, e2e.Secret)
	a.latency = time.Millisecond
	forwardConfig(t, dir, testenv.FreeAddr(t), a.srv.URL, "")
	cmd, stderr, url := testenv.StartServe(t, bin, dir, nil)
	var base atomic.Value
	base.Store(url)

	const n = 600
	var acked sync.Map
	var nAcked atomic.Int64
	send := func(i int) {
		id := fmt.Sprintf("evt_%04d", i)
		body := []byte(fmt.Sprintf(`{"type":"usage.recorded","data":{"customer":"cus_%d","meter":"api_requests","quantity":1,"occurred_at":"2026-11-29T10:00:00Z"}}`, i%7))
		for { // as a provider does: retry until acknowledged
			h := http.Header{}
			if err := testenv.SignStandard(h, e2e.Secret, id, "", body, time.Now()); err != nil {
				t.Error(err)
				return
			}
			req, _ := http.NewRequest(http.MethodPost, base.Load().(string)+"/webhooks/default", strings.NewReader(string(body)))
			req.Header = h
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					acked.Store(id, true)
					nAcked.Add(1)
					return
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				send(i)
			}
		}()
	}
	// Kill mid-stream, while the relay has messages in flight.
	await.Eventually(t, 45*time.Second, "a third acknowledged and some forwarded", func() bool {
		_, reqs, _ := a.deduped()
		return nAcked.Load() >= n/3 && reqs > 0
	})
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no shutdown at all
		t.Fatal(err)
	}
	cmd.Wait()
	ackedAtKill := nAcked.Load()
	_, reqsAtKill, _ := a.deduped()
	t.Logf("killed with %d acknowledged, %d requests at the app", ackedAtKill, reqsAtKill)

	cmd2, stderr2, url2 := testenv.StartServe(t, bin, dir, nil)
	base.Store(url2)
	wg.Wait()
	if nAcked.Load() != n {
		t.Fatalf("%d acknowledged, want %d", nAcked.Load(), n)
	}
	await.Eventually(t, 45*time.Second, "every acknowledged event at the app", func() bool {
		got, _, _ := a.deduped()
		return len(got) >= n
	})
	got, reqs, bad := a.deduped()
	if bad != 0 {
		t.Errorf("%d requests did not verify or reused a webhook-id for another event", bad)
	}
	ackedSet := map[string]bool{}
	acked.Range(func(k, _ any) bool { ackedSet[k.(string)] = true; return true })
	if len(got) != len(ackedSet) {
		t.Errorf("the app has %d distinct events, %d were acknowledged", len(got), len(ackedSet))
	}
	for ev := range ackedSet {
		if !got[ev] {
			t.Errorf("acknowledged %s never reached the app", ev)
		}
	}
	t.Logf("%d events, %d requests (%d repeats, same webhook-id)", len(got), reqs, reqs-len(got))
	// The outbox agrees: every message delivered, none pending or dead.
	await.Eventually(t, 45*time.Second, "every message marked delivered", func() bool {
		out, err := testenv.Run(bin, dir, nil, "forward", "status", "--format", "json")
		if err != nil {
			return false
		}
		var st []forward.DestinationStatus
		return json.Unmarshal([]byte(out), &st) == nil && len(st) == 1 && st[0].Delivered == n && st[0].Pending == 0 && st[0].Dead == 0
	})
	_ = stderr
	cmd2.Process.Signal(os.Interrupt)
	cmd2.Wait()
	if strings.Contains(stderr2.String(), "panic") {
		t.Errorf("serve log:\n%s", stderr2)
	}
}

// The forward CLI beside a running serve: status, list, a dead message
// retried and delivered once, pause and resume, and every error path.
func testForwardCLI(t *testing.T, bin string) {
	dir := t.TempDir()
	a := newDedupeApp(t, e2e.Secret)
	a.fail.Store(true)
	adminAddr := testenv.FreeAddr(t)
	forwardConfig(t, dir, adminAddr, a.srv.URL, "    max_attempts: 2\n")
	_, stderr, url := testenv.StartServe(t, bin, dir, nil)
	post := func(id string) {
		body := testenv.UsageBody("cus_1", "api_requests", "2")
		h := http.Header{}
		testenv.SignStandard(h, e2e.Secret, id, "", body, time.Now())
		req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/default", strings.NewReader(string(body)))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("post %s: %v %v", id, resp, err)
		}
		resp.Body.Close()
	}
	post("evt_dead")
	status := func() forward.DestinationStatus {
		var st []forward.DestinationStatus
		if err := json.Unmarshal([]byte(e2e.MustRun(t, bin, dir, "forward", "status", "--format", "json")), &st); err != nil || len(st) != 1 {
			t.Fatalf("status: %v %+v", err, st)
		}
		return st[0]
	}
	await.Eventually(t, 45*time.Second, "the message dead after max_attempts", func() bool { return status().Dead == 1 })
	if st := status(); st.LastError != "HTTP 500" || st.Pending != 0 {
		t.Errorf("status %+v, want the last error HTTP 500 and nothing pending", st)
	}
	table := e2e.MustRun(t, bin, dir, "forward", "status")
	if !strings.Contains(table, "DESTINATION") || !strings.Contains(table, "HTTP 500") {
		t.Errorf("status table:\n%s", table)
	}
	csv := e2e.MustRun(t, bin, dir, "forward", "list", "--destination", "app", "--status", "dead", "--format", "csv")
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "message_id,destination,status") || !strings.Contains(lines[1], ",evt_dead,") {
		t.Fatalf("list csv:\n%s", csv)
	}
	msgID := strings.Split(lines[1], ",")[0]
	var attempts []forward.AttemptView
	if err := json.Unmarshal([]byte(e2e.MustRun(t, bin, dir, "forward", "attempts", msgID, "--format", "json")), &attempts); err != nil ||
		len(attempts) != 2 || attempts[0].StatusCode != 500 || attempts[1].Error != "HTTP 500" {
		t.Errorf("attempts of the dead message: %+v %v, want its 2 failed attempts", attempts, err)
	}

	// Error paths: each names what is wrong and exits 1 (failed) or 2 (usage).
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"forward", "retry"}, 2, "give MESSAGE_ID or --destination"},
		{[]string{"forward", "retry", msgID, "--destination", "app"}, 2, "not both"},
		{[]string{"forward", "retry", "--destination", "app", "--since", "soon"}, 2, "--since"},
		{[]string{"forward", "retry", "--destination", "nope"}, 1, `unknown destination "nope" (known: app)`},
		{[]string{"forward", "retry", "msg_nope"}, 1, `unknown message "msg_nope"`},
		{[]string{"forward", "list", "--status", "lost"}, 2, "--status"},
		{[]string{"forward", "list", "--destination", "nope"}, 1, "unknown destination"},
		{[]string{"forward", "pause"}, 2, "DESTINATION"},
		{[]string{"forward", "pause", "nope"}, 1, "unknown destination"},
		{[]string{"forward", "resume", "app", "extra"}, 2, "unexpected argument"},
		{[]string{"forward", "stauts"}, 2, `did you mean "status"`},
		{[]string{"forward", "attempts"}, 2, "MESSAGE_ID"},
		{[]string{"forward", "attempts", "msg_nope"}, 1, `unknown message "msg_nope"`},
	} {
		r := e2e.Run(t, bin, dir, c.args...)
		if r.Code != c.code || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, r.Code, r.Stderr, c.code, c.want)
		}
	}

	// Fixed, the app gets the dead message once when it is retried.
	a.fail.Store(false)
	_, before, _ := a.deduped()
	if out := e2e.MustRun(t, bin, dir, "forward", "retry", msgID); !strings.Contains(out, "1") {
		t.Errorf("retry printed %q", out)
	}
	await.Eventually(t, 45*time.Second, "the retried message delivered", func() bool { return status().Delivered == 1 })
	time.Sleep(300 * time.Millisecond)
	if _, after, _ := a.deduped(); after != before+1 {
		t.Errorf("%d requests for the retried message, want 1", after-before)
	}
	if r := e2e.Run(t, bin, dir, "forward", "retry", msgID); r.Code != 1 || !strings.Contains(r.Stderr, "delivered") {
		t.Errorf("retry of a delivered message: exit %d %q", r.Code, r.Stderr)
	}

	// Paused, new events wait in the outbox; resumed, they are delivered.
	e2e.MustRun(t, bin, dir, "forward", "pause", "app")
	post("evt_paused")
	time.Sleep(1500 * time.Millisecond)
	if st := status(); !st.Paused || st.Pending != 1 || st.Delivered != 1 {
		t.Errorf("paused: %+v, want paused with one pending", st)
	}
	e2e.MustRun(t, bin, dir, "forward", "resume", "app")
	await.Eventually(t, 45*time.Second, "delivered after resume", func() bool { return status().Delivered == 2 })

	// The same views on the admin API, and the pull feed.
	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+adminAddr+path, nil)
		req.Header.Set("Authorization", "Bearer forward-admin-token-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/v1/forward/status"); code != 200 || !strings.Contains(body, `"delivered": 2`) {
		t.Errorf("admin status: %d %s", code, body)
	}
	code, body := get("/v1/events?limit=1")
	var page struct {
		Events []struct {
			EventID string `json:"event_id"`
		} `json:"events"`
		Next string `json:"next_cursor"`
	}
	if json.Unmarshal([]byte(body), &page); code != 200 || len(page.Events) != 1 || page.Events[0].EventID != "evt_dead" {
		t.Errorf("feed page 1: %d %s", code, body)
	}
	code, body = get("/v1/events?after=" + page.Next)
	if json.Unmarshal([]byte(body), &page); code != 200 || len(page.Events) != 1 || page.Events[0].EventID != "evt_paused" {
		t.Errorf("feed page 2: %d %s", code, body)
	}
	if code, _ := get("/v1/events?after=x"); code != 400 {
		t.Errorf("bad cursor: %d, want 400", code)
	}

	// A dead message given up for good: purge deletes it, and only it.
	a.fail.Store(true)
	post("evt_given_up")
	await.Eventually(t, 45*time.Second, "the third message dead", func() bool { return status().Dead == 1 })
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"forward", "purge"}, 2, "--destination is required"},
		{[]string{"forward", "purge", "--destination", "nope"}, 1, "unknown destination"},
		{[]string{"forward", "purge", "--destination", "app", "--before", "later"}, 2, "--before"},
	} {
		if r := e2e.Run(t, bin, dir, c.args...); r.Code != c.code || !strings.Contains(r.Stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", c.args, r.Code, r.Stderr, c.code, c.want)
		}
	}
	if out := e2e.MustRun(t, bin, dir, "forward", "purge", "--destination", "app", "--format", "json"); !strings.Contains(out, `"purged": 1`) {
		t.Errorf("purge printed %q", out)
	}
	if st := status(); st.Dead != 0 || st.Delivered != 2 {
		t.Errorf("after purge: %+v, want no dead and the 2 delivered kept", st)
	}
	_ = stderr
}
