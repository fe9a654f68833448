package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
)

// Entitlement checks beside webhook load (docs/entitlements.md; the target:
// p99 ≤ 2 ms at 2,000 checks/s alongside webhook load). Every round starts
// serve on a fresh copy of one pre-filled database (-prefill, its largest
// size: events over customers cus_0 … cus_999 on meter "prefill", so the
// usage state has a row per customer) with a config that limits that meter
// and the webhook loads' meters, and an API key, then runs four phases:
//
//   - checks alone: GET /v1/entitlements/cus_I/prefill at -rate per second,
//     open loop (bench.Checks: latency from each check's scheduled time),
//     for -duration;
//   - webhooks alone: `hookledger bench` at -c connections, -n events over
//     -customers customers, verified;
//   - both at once: the same webhook load (new events, on a meter of its
//     own), and the checks scheduled at -rate for as long as it runs;
//   - checks beside a steady webhook load: the same again, the webhooks
//     sent at -webhook-rate per second (`hookledger bench --rate`) instead
//     of as fast as -c connections go (skipped with -webhook-rate 0).
//
// The checks read the state rows of the customers the webhooks write, and
// the writer updates the state in every batch's transaction.

// Meters of the two webhook loads: bench.Meter of their run ids.
const (
	entRunAlone  = "ent_alone"
	entRunBoth   = "ent_both"
	entRunSteady = "ent_steady"
)

// entitlementsConfig is serve's configuration for the rounds: the default
// provider and mapping, and a plan limiting the checked meter and the
// webhook loads' (hard limits far above any run's usage, so every check is
// allowed and the writer keeps each meter's state).
const entitlementsConfig = `providers:
  - name: default
    scheme: standard
    secrets: ["${HOOKLEDGER_SECRET}"]
usage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
meters:
  - name: prefill
  - name: bench_` + entRunAlone + `
  - name: bench_` + entRunBoth + `
  - name: bench_` + entRunSteady + `
plans:
  - name: bench
    currency: USD
    effective_from: 2020-01-01
    limits:
      - {meter: prefill, limit: 1000000000000, period: month, kind: hard}
      - {meter: bench_` + entRunAlone + `, limit: 1000000000000, period: month, kind: hard}
      - {meter: bench_` + entRunBoth + `, limit: 1000000000000, period: month, kind: hard}
      - {meter: bench_` + entRunSteady + `, limit: 1000000000000, period: month, kind: hard}
customers:
  default_plan: bench
`

// entRound is one round's figures.
type entRound struct {
	Alone, Both    bench.CheckResult
	Webhooks, With bench.Result // webhooks alone, and beside the checks
	// The fourth phase: checks beside webhooks at -webhook-rate.
	BesideSteady bench.CheckResult
	Steady       bench.Result
}

func (h *runner) entitlementsTable(ctx context.Context) error {
	n := 0
	if len(h.sizes) > 0 {
		n = h.sizes[len(h.sizes)-1]
	}
	template := ""
	if n > 0 {
		var err error
		if template, _, err = h.prefill(ctx, bench.Sequential, n); err != nil {
			return err
		}
		if h.o.postgres == "" && !h.o.keep && h.o.prefilled == "" {
			defer os.RemoveAll(template)
		}
	}
	var rounds []entRound
	for r := range h.o.runs {
		fmt.Fprintf(os.Stderr, "round %d/%d\n", r+1, h.o.runs)
		rd, err := h.entRound(ctx, template)
		if err != nil {
			return err
		}
		rounds = append(rounds, rd)
	}
	return h.entReport(os.Stdout, n, rounds)
}

func (h *runner) entRound(ctx context.Context, template string) (entRound, error) {
	var rd entRound
	data := h.dir("serve")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return rd, err
	}
	if !h.o.keep {
		defer os.RemoveAll(data)
	}
	cfg := filepath.Join(data, "hookledger.yml")
	if err := os.WriteFile(cfg, []byte(entitlementsConfig), 0o600); err != nil {
		return rd, err
	}
	db := []string{"--config", cfg}
	switch {
	case h.o.postgres != "":
		dsn, name, err := h.pgDatabase(ctx, template)
		if err != nil {
			return rd, err
		}
		if !h.o.keep {
			defer dropDatabase(h.o.postgres, name)
		}
		db = append(db, "--database", dsn)
	case template != "":
		if err := copyDB(template, data); err != nil {
			return rd, err
		}
	}
	// The key is made before serve starts: on SQLite serve holds the
	// database's write lock while it runs.
	keys := exec.CommandContext(ctx, h.Bin, append(append([]string{"keys", "create", "--quiet", "--data", data}, db...), "bench")...)
	keys.Env = h.Env
	out, err := keys.Output()
	if err != nil {
		return rd, fmt.Errorf("keys create: %w", err)
	}
	key := strings.TrimSpace(string(out))
	srv, err := h.launch(ctx, "serve", data, append([]string{"serve"}, db...)...)
	if err != nil {
		return rd, err
	}
	defer srv.Stop()
	// A second of checks before the measured ones, in each phase: the
	// generator's connections open then (bench.Checks.Warmup).
	checks := bench.Checks{BaseURL: srv.URL, Key: key, Meter: "prefill", Customers: h.o.customers, Rate: h.o.rate, Warmup: time.Second}
	// serve answers checks 503 until it has built the usage state from the
	// pre-filled ledger (docs/entitlements.md): wait for that first.
	if err := checks.Ready(ctx, time.Minute); err != nil {
		return rd, err
	}
	verify := append([]string{"--customers", strconv.Itoa(h.o.customers)}, db[2:]...)

	alone, cancel := context.WithTimeout(ctx, checks.Warmup+h.o.duration)
	rd.Alone, err = checks.Run(alone)
	cancel()
	if err != nil {
		return rd, fmt.Errorf("checks: %w", err)
	}
	logChecks("checks alone", rd.Alone)

	if rd.Webhooks, err = h.load(ctx, srv.URL, h.o.conns, h.o.events, data, slices.Concat(verify, []string{"--run-id", entRunAlone})...); err != nil {
		return rd, fmt.Errorf("webhooks alone: %w", err)
	}

	if rd.Both, rd.With, err = h.checksBeside(ctx, checks, srv.URL, data, slices.Concat(verify, []string{"--run-id", entRunBoth})); err != nil {
		return rd, err
	}
	logChecks("checks beside webhooks", rd.Both)
	if h.o.webhookRate > 0 {
		steady := slices.Concat(verify, []string{"--run-id", entRunSteady, "--rate", strconv.FormatFloat(h.o.webhookRate, 'g', -1, 64)})
		if rd.BesideSteady, rd.Steady, err = h.checksBeside(ctx, checks, srv.URL, data, steady); err != nil {
			return rd, err
		}
		logChecks(fmt.Sprintf("checks beside %g webhooks/s", h.o.webhookRate), rd.BesideSteady)
	}
	return rd, nil
}

// checksBeside runs the checks for as long as a webhook load (-n events at
// -c connections, with load's extra arguments) runs.
func (h *runner) checksBeside(ctx context.Context, checks bench.Checks, url, data string, load []string) (bench.CheckResult, bench.Result, error) {
	both, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	var cr bench.CheckResult
	go func() {
		var err error
		cr, err = checks.Run(both)
		done <- err
	}()
	wr, err := h.load(ctx, url, h.o.conns, h.o.events, data, load...)
	stop()
	if cerr := <-done; cerr != nil {
		err = errors.Join(err, fmt.Errorf("checks: %w", cerr))
	}
	if err != nil {
		return cr, wr, fmt.Errorf("webhooks and checks: %w", err)
	}
	return cr, wr, nil
}

func logChecks(what string, r bench.CheckResult) {
	fmt.Fprintf(os.Stderr, "  %-24s %6.0f/s over %.1fs  p50 %6.2f ms  p99 %7.2f ms  max %7.2f ms  (from send: p50 %6.2f ms  p99 %7.2f ms)  %v\n",
		what, r.Rate, r.Seconds, r.Latency.P50, r.Latency.P99, r.Latency.Max, r.Service.P50, r.Service.P99, r.Status)
}

// entReport prints every round and the medians, and whether the target is
// met: p99 of the checks beside webhook load at most 2 ms, at the rate.
func (h *runner) entReport(w io.Writer, prefilled int, rounds []entRound) error {
	fmt.Fprintf(w, "command: go run ./bench/cmd/benchrun %s\n", strings.Join(shownArgs(os.Args[1:]), " "))
	fmt.Fprintf(w, "commit: %s\n", commit(context.Background()))
	fmt.Fprintf(w, "serve on %s, %d pre-filled events; checks: GET /v1/entitlements/cus_I/prefill over %d customers, open loop at %g/s "+
		"(latency from the scheduled time), alone for %s and beside the webhooks; webhooks: -n %d --dup %g -k %d over the same customers, "+
		"verified; then the checks beside the same webhooks sent steadily at %g/s (0: not run); %d rounds, medians\n\n",
		h.backend(), prefilled, h.o.customers, h.o.rate, h.o.duration, h.o.events, h.o.dup, h.o.conns, h.o.webhookRate, len(rounds))
	fmt.Fprintln(w, "| round | checks alone /s | p50 ms | p99 ms | max ms | p99 from send | webhooks alone req/s | p99 ms | beside checks req/s | p99 ms | checks beside /s | p50 ms | p99 ms | max ms | p99 from send "+
		"| steady webhooks req/s | p99 ms | checks beside steady /s | p50 ms | p99 ms | max ms | p99 from send | checks not 200 |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	ok := true
	for i, r := range rounds {
		bad := 0
		for _, c := range []bench.CheckResult{r.Alone, r.Both, r.BesideSteady} {
			bad += c.Scheduled - c.Status["200"]
		}
		if bad > 0 {
			ok = false
		}
		fmt.Fprintf(w, "| %d | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f | %.0f | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f | %d |\n", i+1,
			r.Alone.Rate, r.Alone.Latency.P50, r.Alone.Latency.P99, r.Alone.Latency.Max, r.Alone.Service.P99,
			r.Webhooks.RPS, r.Webhooks.Latency.P99, r.With.RPS, r.With.Latency.P99,
			r.Both.Rate, r.Both.Latency.P50, r.Both.Latency.P99, r.Both.Latency.Max, r.Both.Service.P99,
			r.Steady.RPS, r.Steady.Latency.P99,
			r.BesideSteady.Rate, r.BesideSteady.Latency.P50, r.BesideSteady.Latency.P99, r.BesideSteady.Latency.Max, r.BesideSteady.Service.P99, bad)
	}
	med := func(f func(entRound) float64) float64 {
		xs := make([]float64, len(rounds))
		for i, r := range rounds {
			xs[i] = f(r)
		}
		return harness.Median(xs)
	}
	p99 := med(func(r entRound) float64 { return r.Both.Latency.P99 })
	fmt.Fprintf(w, "\nmedians: checks alone p50 %.2f ms p99 %.2f ms (from send %.2f ms); beside webhooks p50 %.2f ms p99 %.2f ms (from send %.2f ms) max %.2f ms; "+
		"webhooks %.0f req/s alone, %.0f beside the checks (%.2f)\n",
		med(func(r entRound) float64 { return r.Alone.Latency.P50 }), med(func(r entRound) float64 { return r.Alone.Latency.P99 }),
		med(func(r entRound) float64 { return r.Alone.Service.P99 }),
		med(func(r entRound) float64 { return r.Both.Latency.P50 }), p99, med(func(r entRound) float64 { return r.Both.Service.P99 }),
		med(func(r entRound) float64 { return r.Both.Latency.Max }),
		med(func(r entRound) float64 { return r.Webhooks.RPS }), med(func(r entRound) float64 { return r.With.RPS }),
		med(func(r entRound) float64 { return r.With.RPS / r.Webhooks.RPS }))
	mark := func(p99 float64) string {
		if p99 > 2 {
			return "NOT MET"
		}
		return "met"
	}
	fmt.Fprintf(w, "target checks p99 <= 2 ms at %g/s beside webhook load as fast as -c %d goes: %s (%.2f ms)\n", h.o.rate, h.o.conns, mark(p99), p99)
	if h.o.webhookRate > 0 {
		p99 := med(func(r entRound) float64 { return r.BesideSteady.Latency.P99 })
		fmt.Fprintf(w, "beside steady webhooks: %.0f req/s (p99 %.2f ms); checks p50 %.2f ms p99 %.2f ms (from send %.2f ms) max %.2f ms\n",
			med(func(r entRound) float64 { return r.Steady.RPS }), med(func(r entRound) float64 { return r.Steady.Latency.P99 }),
			med(func(r entRound) float64 { return r.BesideSteady.Latency.P50 }), p99,
			med(func(r entRound) float64 { return r.BesideSteady.Service.P99 }), med(func(r entRound) float64 { return r.BesideSteady.Latency.Max }))
		fmt.Fprintf(w, "target checks p99 <= 2 ms at %g/s beside %g webhooks/s: %s (%.2f ms)\n", h.o.rate, h.o.webhookRate, mark(p99), p99)
	}
	if !ok {
		return errors.New("some checks were not answered 200 (see the table and serve's log)")
	}
	return nil
}
