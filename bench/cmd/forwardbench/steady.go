package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
)

// The steady benchmark (BENCHMARKS.md, "Forwarding keeps up"): serve with one
// destination, with default settings, an application that answers every
// request after appLatency, and webhooks sent at a steady rate. Every
// sampleEvery it reads the destination's backlog and the age of its oldest
// pending message from the admin API (what `forward status` shows), and it
// reports their worst and median, the relay's delivery rate while the load
// ran, and how long after the load's end the last message arrived.

const (
	sampleEvery = 250 * time.Millisecond
	drainWait   = 30 * time.Second
	adminToken  = "forwardbench-admin-token-0123456789"
)

type steadyResult struct {
	backlogMax      int64
	oldestP50       float64 // seconds, over the samples taken while the load ran
	oldestP99       float64
	oldestMax       float64
	deliveredPerSec float64       // distinct messages the app got while the load ran, per second
	sentPerSec      float64       // webhooks acknowledged per second
	tail            time.Duration // from the load's end to the last delivery
	left            int           // messages not delivered drainWait after the load (tail is then unknown)
	samples         int
	limit           string // hookledger_forward_concurrency_limit after the load ("": not exported)
}

func (r steadyResult) String() string {
	tail := fmt.Sprintf("last delivery %5.2f s after the load", r.tail.Seconds())
	if r.left > 0 {
		tail = fmt.Sprintf("%d not delivered %s after the load", r.left, drainWait)
	}
	if r.limit != "" {
		tail += ", concurrency limit " + r.limit
	}
	return fmt.Sprintf("sent %5.0f/s  delivered %5.0f/s  backlog max %6d  oldest pending p50 %5.2f s  p99 %5.2f s  max %5.2f s  (%d samples)  %s",
		r.sentPerSec, r.deliveredPerSec, r.backlogMax, r.oldestP50, r.oldestP99, r.oldestMax, r.samples, tail)
}

// slowApp answers 204 after latency and counts distinct webhook-ids.
type slowApp struct {
	*app
}

func newSlowApp(latency time.Duration) *slowApp {
	a := &app{ids: map[string]bool{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency) // the application's own work
		id := r.Header.Get("Webhook-Id")
		a.mu.Lock()
		if !a.ids[id] {
			a.ids[id] = true
			now := time.Now()
			if a.first.IsZero() {
				a.first = now
			}
			a.last = now
		}
		a.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	return &slowApp{a}
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// steady runs one round of the steady benchmark with h's binary.
func steady(ctx context.Context, h *harness.Harness, name string, rate float64, seconds int, latency time.Duration, k int, destExtra string) (steadyResult, error) {
	var res steadyResult
	dir := filepath.Join(h.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	a := newSlowApp(latency)
	defer a.srv.Close()
	adminAddr, err := freeAddr()
	if err != nil {
		return res, err
	}
	cfg := filepath.Join(dir, "hookledger.yml")
	// Default settings unless destExtra says otherwise: only what the
	// destination needs.
	dest := fmt.Sprintf("admin:\n  listen: %s\n  tokens: [%q]\ndestinations:\n  - name: app\n    url: %s\n    secrets: [%q]\n%s",
		adminAddr, adminToken, a.srv.URL, h.Secret(), destExtra)
	if err := writeConfig(h, cfg, filepath.Join(dir, "data"), dest); err != nil {
		return res, err
	}
	// The harness takes the first address serve logs, which may be the
	// admin listener's: the webhooks' is chosen here.
	listen, err := freeAddr()
	if err != nil {
		return res, err
	}
	srv, err := h.Start(ctx, "serve", dir, filepath.Join(dir, "serve.log"), "serve", "--config", cfg, "--listen", listen)
	if err != nil {
		return res, err
	}
	defer srv.Stop()

	n := int(rate) * seconds
	var mu sync.Mutex
	var ages []float64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(sampleEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			st, err := destinationStatus(adminAddr)
			if err != nil {
				continue // serve is busy: a missing sample, not a failed run
			}
			mu.Lock()
			ages = append(ages, st.OldestPendingAge)
			res.backlogMax = max(res.backlogMax, st.Pending)
			mu.Unlock()
		}
	})
	begin := time.Now()
	load, err := h.Load(ctx, "http://"+listen, k, n, 0, "--rate", fmt.Sprint(rate))
	close(stop)
	wg.Wait()
	if err != nil {
		return res, err
	}
	end := time.Now()
	delivered, _, _ := a.count()
	res.limit = concurrencyLimit(adminAddr)
	res.sentPerSec = load.RPS
	res.deliveredPerSec = float64(delivered) / end.Sub(begin).Seconds()
	// A relay that fell behind is not waited for long: what is left after
	// drainWait is reported instead of the tail.
	if a.waitFor(n, drainWait) == nil {
		_, _, last := a.count()
		res.tail = max(0, last.Sub(end))
	} else {
		got, _, _ := a.count()
		res.left = n - got
	}
	slices.Sort(ages)
	res.samples = len(ages)
	if len(ages) > 0 {
		res.oldestP50 = ages[len(ages)/2]
		res.oldestP99 = ages[min(len(ages)-1, len(ages)*99/100)]
		res.oldestMax = ages[len(ages)-1]
	}
	return res, nil
}

var limitSeries = regexp.MustCompile(`(?m)^hookledger_forward_concurrency_limit\{destination="app"\} (\S+)$`)

// concurrencyLimit reads the app destination's concurrency limit from the
// metrics; "" when serve does not export it (a build before it).
func concurrencyLimit(addr string) string {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := limitSeries.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// destinationStatus reads the app destination's line of `forward status`
// from the admin API.
func destinationStatus(addr string) (status struct {
	Pending          int64   `json:"pending"`
	OldestPendingAge float64 `json:"oldest_pending_age_seconds"`
}, err error) {
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/forward/status", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return status, err
	}
	defer resp.Body.Close()
	var body struct {
		Destinations []json.RawMessage `json:"destinations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return status, err
	}
	if len(body.Destinations) != 1 {
		return status, fmt.Errorf("%d destinations in the status", len(body.Destinations))
	}
	err = json.Unmarshal(body.Destinations[0], &status)
	return status, err
}

// runSteady runs the steady rounds, with the base binary too when given
// (this one first in odd rounds, the base first in even ones), and prints
// each round and the medians.
func runSteady(ctx context.Context, h *harness.Harness, base string, keep bool, rounds int, rate float64, seconds int, latency time.Duration, k int, destExtra string) {
	settings := "default destination settings"
	if destExtra != "" {
		settings = "the destination's " + strings.ReplaceAll(strings.TrimSpace(destExtra), "\n", ",")
	}
	fmt.Printf("steady: %.0f webhooks/s for %d s, an application answering in %s, %s\n", rate, seconds, latency, settings)
	type side struct {
		name    string
		h       *harness.Harness
		results []steadyResult
	}
	sides := []*side{{name: "this", h: h}}
	if base != "" {
		hb, err := harness.New(ctx, "", "hookledger-forwardbench-base-", base, keep)
		if err != nil {
			fail(err)
		}
		defer hb.Close()
		sides = append(sides, &side{name: "base", h: hb})
	}
	for r := 1; r <= rounds; r++ {
		order := slices.Clone(sides)
		if r%2 == 0 {
			slices.Reverse(order)
		}
		for _, s := range order {
			res, err := steady(ctx, s.h, fmt.Sprintf("steady-%s-%d", s.name, r), rate, seconds, latency, k, destExtra)
			if err != nil {
				fail(fmt.Errorf("%s round %d: %w", s.name, r, err))
			}
			s.results = append(s.results, res)
			fmt.Printf("round %d  %-4s  %s\n", r, s.name, res)
		}
	}
	for _, s := range sides {
		med := func(f func(steadyResult) float64) float64 {
			var xs []float64
			for _, r := range s.results {
				xs = append(xs, f(r))
			}
			return harness.Median(xs)
		}
		tail := fmt.Sprintf("last delivery %5.2f s after the load", med(func(r steadyResult) float64 { return r.tail.Seconds() }))
		if left := med(func(r steadyResult) float64 { return float64(r.left) }); left > 0 {
			tail = fmt.Sprintf("%.0f not delivered %s after the load", left, drainWait)
		}
		fmt.Printf("medians  %-4s  sent %5.0f/s  delivered %5.0f/s  backlog max %6.0f  oldest pending p50 %5.2f s  p99 %5.2f s  max %5.2f s  %s\n",
			s.name, med(func(r steadyResult) float64 { return r.sentPerSec }), med(func(r steadyResult) float64 { return r.deliveredPerSec }),
			med(func(r steadyResult) float64 { return float64(r.backlogMax) }), med(func(r steadyResult) float64 { return r.oldestP50 }),
			med(func(r steadyResult) float64 { return r.oldestP99 }), med(func(r steadyResult) float64 { return r.oldestMax }), tail)
	}
}
