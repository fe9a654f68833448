// Command forwardbench measures forwarding (BENCHMARKS.md, "Forwarding"):
// ingest throughput of serve with one destination (a local no-op
// application) against serve with none, in interleaved rounds; the relay's
// sustained delivery rate; and the time a paused destination's backlog takes
// to drain once resumed.
//
//	go run ./bench/cmd/forwardbench -rounds 3 -n 20000 -backlog 100000
//
// With -steady N it runs N rounds of the steady benchmark instead (steady.go:
// an application answering in -app-latency, webhooks at -rate for -seconds,
// default settings), and with -base BINARY each round runs BINARY too, in
// alternating order, for a before/after comparison:
//
//	go run ./bench/cmd/forwardbench -steady 3 -rate 1000 -seconds 20 -app-latency 65ms -base /tmp/hookledger-base
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
)

func main() {
	binary := flag.String("binary", "", "hookledger binary (default: build one)")
	rounds := flag.Int("rounds", 3, "interleaved rounds of none/one destination")
	events := flag.Int("n", 20000, "events per ingest load")
	conns := flag.Int("k", 32, "connections")
	backlog := flag.Int("backlog", 100000, "messages in the drain test (0: skip)")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	steadyRounds := flag.Int("steady", 0, "rounds of the steady benchmark (instead of the others)")
	rate := flag.Float64("rate", 1000, "steady: webhooks per second")
	seconds := flag.Int("seconds", 20, "steady: how long the load runs")
	latency := flag.Duration("app-latency", 65*time.Millisecond, "steady: how long the application takes to answer")
	base := flag.String("base", "", "steady: another hookledger binary to run in every round too (before/after)")
	destExtra := flag.String("destination", "", "steady: more keys of the destination, YAML lines (e.g. \"    max_concurrency: 64\\n\"); default none")
	flag.Parse()
	ctx := context.Background()
	h, err := harness.New(ctx, "", "hookledger-forwardbench-", *binary, *keep)
	if err != nil {
		fail(err)
	}
	defer h.Close()
	harness.PrintMachine(os.Stdout)
	if *steadyRounds > 0 {
		runSteady(ctx, h, *base, *keep, *steadyRounds, *rate, *seconds, *latency, *conns, strings.ReplaceAll(*destExtra, `\n`, "\n"))
		return
	}
	var none, one, rates, lags []float64
	for r := 1; r <= *rounds; r++ {
		order := []bool{false, true}
		if r%2 == 0 {
			order = []bool{true, false}
		}
		for _, dest := range order {
			res, err := ingest(ctx, h, fmt.Sprintf("r%d-%v", r, dest), dest, *events, *conns)
			if err != nil {
				fail(err)
			}
			if dest {
				one = append(one, res.rps)
				rates, lags = append(rates, res.rate), append(lags, res.lag.Seconds())
				fmt.Printf("round %d  one destination  %7.0f req/s  relay %6.0f msg/s  all delivered %5.2f s after the load\n",
					r, res.rps, res.rate, res.lag.Seconds())
			} else {
				none = append(none, res.rps)
				fmt.Printf("round %d  no destination   %7.0f req/s\n", r, res.rps)
			}
		}
	}
	fmt.Printf("medians: none %.0f req/s, one destination %.0f req/s, ratio %.2f; relay %.0f msg/s during ingest; lag %.2f s\n",
		harness.Median(none), harness.Median(one), harness.Median(one)/harness.Median(none), harness.Median(rates), harness.Median(lags))
	if *backlog > 0 {
		d, rate, err := drain(ctx, h, *backlog, *conns)
		if err != nil {
			fail(err)
		}
		fmt.Printf("backlog of %d messages drained in %.1f s (%.0f msg/s)\n", *backlog, d.Seconds(), rate)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "forwardbench:", err)
	os.Exit(1)
}

// app is the no-op destination: it counts distinct webhook-ids and answers 204.
type app struct {
	srv         *httptest.Server
	mu          sync.Mutex
	ids         map[string]bool
	first, last time.Time
}

func newApp() *app {
	a := &app{ids: map[string]bool{}}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	return a
}

func (a *app) count() (int, time.Time, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids), a.first, a.last
}

// waitFor waits until the app has n distinct messages.
func (a *app) waitFor(n int, limit time.Duration) error {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, _, _ := a.count(); got >= n {
			return nil
		}
	}
	got, _, _ := a.count()
	return fmt.Errorf("the app has %d of %d messages after %s", got, n, limit)
}

// config writes a serve config: the default provider with the harness's
// secret, the generic usage mapping, and a destination when url is set.
func config(h *harness.Harness, path, data, url string) error {
	var dest string
	if url != "" {
		dest = fmt.Sprintf("destinations:\n  - name: app\n    url: %s\n    secrets: [%q]\n    concurrency: 16\n", url, h.Secret())
	}
	return writeConfig(h, path, data, dest)
}

// writeConfig writes a serve config with extra (YAML: destinations, admin)
// after the provider.
func writeConfig(h *harness.Harness, path, data, extra string) error {
	return os.WriteFile(path, fmt.Appendf(nil, `data: %s
providers:
  - name: default
    scheme: standard
    secrets: [%q]
%susage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
`, data, h.Secret(), extra), 0o600)
}

type ingestResult struct {
	rps  float64
	rate float64       // messages per second from the first delivery to the last
	lag  time.Duration // from the load's end to the last delivery
}

func ingest(ctx context.Context, h *harness.Harness, name string, withDest bool, n, k int) (ingestResult, error) {
	var res ingestResult
	dir := filepath.Join(h.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	var a *app
	url := ""
	if withDest {
		a = newApp()
		defer a.srv.Close()
		url = a.srv.URL
	}
	cfg := filepath.Join(dir, "hookledger.yml")
	if err := config(h, cfg, filepath.Join(dir, "data"), url); err != nil {
		return res, err
	}
	srv, err := h.Start(ctx, "serve", dir, filepath.Join(dir, "serve.log"), "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	defer srv.Stop()
	load, err := h.Load(ctx, srv.URL, k, n, 0)
	if err != nil {
		return res, err
	}
	end := time.Now()
	res.rps = load.RPS
	if a != nil {
		if err := a.waitFor(n, 5*time.Minute); err != nil {
			return res, err
		}
		_, first, last := a.count()
		res.rate = float64(n) / last.Sub(first).Seconds()
		res.lag = max(0, last.Sub(end))
	}
	return res, nil
}

// drain fills a paused destination's outbox with n messages, resumes it and
// times the delivery of all of them.
func drain(ctx context.Context, h *harness.Harness, n, k int) (time.Duration, float64, error) {
	dir := filepath.Join(h.Dir, "drain")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, 0, err
	}
	a := newApp()
	defer a.srv.Close()
	cfg := filepath.Join(dir, "hookledger.yml")
	if err := config(h, cfg, filepath.Join(dir, "data"), a.srv.URL); err != nil {
		return 0, 0, err
	}
	srv, err := h.Start(ctx, "serve", dir, filepath.Join(dir, "serve.log"), "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	if err != nil {
		return 0, 0, err
	}
	defer srv.Stop()
	forward := func(args ...string) error {
		cmd := exec.CommandContext(ctx, h.Bin, append([]string{"forward"}, append(args, "--config", cfg)...)...)
		cmd.Env = h.Env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("forward %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := forward("pause", "app"); err != nil {
		return 0, 0, err
	}
	if _, err := h.Load(ctx, srv.URL, k, n, 0); err != nil {
		return 0, 0, err
	}
	if got, _, _ := a.count(); got != 0 {
		return 0, 0, fmt.Errorf("%d messages delivered while paused", got)
	}
	if err := forward("resume", "app"); err != nil {
		return 0, 0, err
	}
	if err := a.waitFor(n, 30*time.Minute); err != nil {
		return 0, 0, err
	}
	_, first, last := a.count()
	d := last.Sub(first)
	return d, float64(n) / d.Seconds(), nil
}
