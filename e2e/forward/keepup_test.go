package forward_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/scheme"
)

// Issue 39: forwarding to an application answering in 65 ms at 1,000
// events/s keeps the backlog bounded (the oldest pending message younger
// than 5 s) with default settings. With the fixed concurrency of 8 the relay
// delivered at most 8 / 65 ms = 123 messages/s, and serve held every
// message 5 s while it took webhooks at this rate; the relay now raises
// the destination's concurrency while the backlog waits (forward/adaptive.go)
// and yields only to a writer near its capacity.
func TestForwardingKeepsUpWith65msApp(t *testing.T) {
	if testing.Short() {
		t.Skip("15 s of load")
	}
	const (
		rate    = 1000
		seconds = 15
		n       = rate * seconds
		latency = 65 * time.Millisecond
	)
	bin := testenv.Binary(t)
	dir := t.TempDir()
	var delivered atomic.Int64
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		time.Sleep(latency) // the application's work
		delivered.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(app.Close)
	adminAddr := testenv.FreeAddr(t)
	const token = "forward-admin-token-0123456789"
	// The destination with default settings: no concurrency, no max_concurrency.
	if err := os.WriteFile(filepath.Join(dir, "hookledger.yml"), fmt.Appendf(nil, `data: ./data
admin:
  listen: %s
  tokens: [%q]
providers:
  - name: default
    scheme: standard
    secrets: [%q]
destinations:
  - name: app
    url: %s
    secrets: [%q]
`+testenv.UsageYAML, adminAddr, token, e2e.Secret, app.URL, e2e.Secret), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, url := testenv.StartServe(t, bin, dir, nil)
	get := func(path string) ([]byte, error) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+adminAddr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %s", path, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	status := func() (forward.DestinationStatus, error) {
		var st struct{ Destinations []forward.DestinationStatus }
		b, err := get("/v1/forward/status")
		if err == nil {
			err = json.Unmarshal(b, &st)
		}
		if err == nil && len(st.Destinations) != 1 {
			err = fmt.Errorf("%d destinations", len(st.Destinations))
		}
		if err != nil {
			return forward.DestinationStatus{}, err
		}
		return st.Destinations[0], nil
	}

	// What forward status says, four times a second while the load runs.
	var mu sync.Mutex
	var oldest float64
	var backlog int64
	samples := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			st, err := status()
			if err != nil {
				t.Errorf("forward status: %v", err)
				return
			}
			mu.Lock()
			oldest, backlog, samples = max(oldest, st.OldestPendingAge), max(backlog, st.Pending), samples+1
			mu.Unlock()
		}
	})
	s, _ := scheme.New("standard", scheme.HMACOptions{})
	key, err := s.Key(e2e.Secret)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := bench.Load{URL: url + "/webhooks/default", Scheme: s, Key: key, Events: n, Connections: 32,
		Customers: 20, Seed: 7, RunID: "keepup", Timeout: 20 * time.Second, Rate: rate}.Plan(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out, err := plan.Run(context.Background(), nil)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if out.Delivered != n {
		t.Fatalf("%d of %d webhooks answered 2xx", out.Delivered, n)
	}
	mu.Lock()
	t.Logf("%.0f webhooks/s for %d s; at most %d pending, the oldest %.2f s old (%d samples); %d delivered by the load's end",
		out.Result.RPS, seconds, backlog, oldest, samples, delivered.Load())
	if oldest >= 5 {
		t.Errorf("the oldest pending message was %.2f s old, want under 5 s", oldest)
	}
	if samples < seconds*2 {
		t.Errorf("forward status answered %d times in %d s", samples, seconds)
	}
	mu.Unlock()
	await.Eventually(t, 30*time.Second, "every message delivered", func() bool {
		st, err := status()
		return err == nil && st.Delivered == n && st.Pending == 0
	})

	// The metrics agree: nothing pending now, and the relay raised the
	// destination's limit above its concurrency (8) to keep up.
	b, err := get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for name, check := range map[string]func(float64) bool{
		"hookledger_forward_oldest_pending_age_seconds": func(v float64) bool { return v == 0 },
		"hookledger_forward_concurrency_limit":          func(v float64) bool { return v > 8 && v <= 128 },
	} {
		m := regexp.MustCompile(`(?m)^` + name + `\{destination="app"\} (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Errorf("no %s for app in the metrics", name)
			continue
		}
		if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || !check(v) {
			t.Errorf("%s = %s", name, m[1])
		}
	}
	if t.Failed() {
		t.Logf("serve log:\n%s", stderr)
	}
}
