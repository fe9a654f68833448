package admin

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
)

const testToken = "0123456789abcdef0123"

// forwardAPI serves the forwarding endpoints of e behind the bearer token.
func forwardAPI(t *testing.T, e *testenv.Env) *httptest.Server {
	s, err := New("127.0.0.1:0", []string{testToken})
	if err != nil {
		t.Fatal(err)
	}
	(&Forward{DB: e.DB, Writer: e.Writer, Destinations: []string{"app"}, Now: time.Now}).Routes(s.Mux)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes()
}

// The pull feed returns every receipt exactly once across pages while new
// events keep arriving, in commit order, with the raw body.
func TestEventFeedExactlyOnceWhileWriting(t *testing.T) {
	e := testenv.New(t, testenv.Options{RealTime: true})
	api := forwardAPI(t, e)
	const n = 300
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var inner sync.WaitGroup
		for w := range 4 { // concurrent senders: batches of several receipts commit together
			inner.Add(1)
			go func() {
				defer inner.Done()
				for i := w; i < n; i += 4 {
					body := testenv.UsageBody(fmt.Sprintf("cus_%d", i), "api_requests", "1")
					if code, _ := e.Post("default", e.SignDefault(fmt.Sprintf("evt_%03d", i), body), body); code != 200 {
						t.Errorf("send %d: %d", i, code)
					}
				}
			}()
		}
		inner.Wait()
	}()
	seen := map[string]int{}
	cursor, last := "", int64(0)
	page := func() int {
		code, raw := call(t, "GET", api.URL+"/v1/events?limit=7&after="+cursor, testToken, "")
		if code != 200 {
			t.Fatalf("feed: %d %s", code, raw)
		}
		var p FeedPage
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		for _, ev := range p.Events {
			seen[ev.EventID]++
			var id int64
			fmt.Sscan(ev.Cursor, &id)
			if id <= last {
				t.Fatalf("cursor %d after %d: not in commit order", id, last)
			}
			last = id
			body, err := base64.StdEncoding.DecodeString(ev.Body)
			if err != nil || !bytes.Contains(body, []byte(`"usage.recorded"`)) || ev.Provider != "default" || ev.Status != "applied" {
				t.Errorf("event %+v: body %q %v", ev, body, err)
			}
		}
		cursor = p.Next
		return len(p.Events)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			page()
		}
	}
	for page() > 0 {
	}
	if len(seen) != n {
		t.Errorf("feed returned %d distinct events, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s returned %d times, want once", id, c)
		}
	}
	if got := e.Count("receipts"); got != n {
		t.Errorf("%d receipts, want %d", got, n)
	}
	// Resuming from the last cursor returns nothing new, and keeps the cursor.
	code, raw := call(t, "GET", api.URL+"/v1/events?after="+cursor, testToken, "")
	if code != 200 || !strings.Contains(string(raw), `"next_cursor": "`+cursor+`"`) || !strings.Contains(string(raw), `"events": []`) {
		t.Errorf("feed at the end: %d %s", code, raw)
	}
}

// The forwarding endpoints refuse bad input with a clear 4xx.
func TestForwardAPIErrors(t *testing.T) {
	e := testenv.New(t, testenv.Options{RealTime: true, Edits: []func(*config.Config){func(c *config.Config) {
		c.Destinations = []config.Destination{{Name: "app", URL: "http://127.0.0.1:1/"}}
	}}})
	api := forwardAPI(t, e)
	for _, c := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"GET", "/v1/events?after=abc", "", 400, "bad_cursor"},
		{"GET", "/v1/events?after=-4", "", 400, "bad_cursor"},
		{"GET", "/v1/events?limit=0", "", 400, "bad_limit"},
		{"GET", "/v1/events?limit=5000", "", 400, "bad_limit"},
		{"GET", "/v1/forward/messages?destination=nope", "", 404, "unknown_destination"},
		{"GET", "/v1/forward/messages?status=lost", "", 400, "bad_status"},
		{"POST", "/v1/forward/retry", `{"message_id":"msg_nope"}`, 404, "unknown_message"},
		{"GET", "/v1/forward/messages/msg_nope/attempts", "", 404, "unknown_message"},
		{"POST", "/v1/forward/retry", `{"destination":"nope"}`, 404, "unknown_destination"},
		{"POST", "/v1/forward/retry", `{}`, 400, "bad_request"},
		{"POST", "/v1/forward/retry", `not json`, 400, "bad_request"},
		{"POST", "/v1/forward/destinations/nope/pause", "", 404, "unknown_destination"},
		{"POST", "/v1/forward/destinations/app/pause", "", 200, `"paused": true`},
		{"GET", "/v1/forward/status", "", 200, `"paused": true`},
		{"POST", "/v1/forward/destinations/app/resume", "", 200, `"paused": false`},
		{"POST", "/v1/forward/retry", `{"destination":"app"}`, 200, `"retried": 0`},
		{"GET", "/v1/forward/messages?destination=app&status=dead", "", 200, `"messages": []`},
	} {
		code, raw := call(t, c.method, api.URL+c.path, testToken, c.body)
		if code != c.code || !strings.Contains(string(raw), c.want) {
			t.Errorf("%s %s: %d %s, want %d with %s", c.method, c.path, code, raw, c.code, c.want)
		}
	}
	if code, _ := call(t, "GET", api.URL+"/v1/events", "", ""); code != 401 {
		t.Errorf("feed without a token: %d, want 401", code)
	}
	if code, _ := call(t, "GET", api.URL+"/v1/events", "wrong-token-wrong-token", ""); code != 401 {
		t.Errorf("feed with a wrong token: %d, want 401", code)
	}
}
