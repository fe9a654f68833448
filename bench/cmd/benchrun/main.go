// Command benchrun measures hookledger against two reference receivers on
// this machine, in one run: the no-storage reference (serve's handler,
// storing nothing) and the durable reference (the same handler appending raw
// bodies to a group-fsynced log, `bench reference-server --durable`). It
// builds the binary, starts each server on a free port with a fresh data
// directory, sends each the same load with `hookledger bench` in interleaved
// rounds, verifies serve's ledger, and prints the results, both ratios, CPU
// per request, serve's peak RSS and single-connection latency. `task bench`
// runs it.
//
// With -scaling it instead measures throughput and p99 at several connection
// counts, against an empty database and ones pre-filled with -prefill events;
// with -ids-scaling, serve at -c with sequential and with random (Stripe-like)
// event ids, against an empty database and each -prefill size (scaling.go).
// With -entitlements, entitlement checks at a fixed rate alone and beside
// webhook load (entitlements.go). -postgres runs serve of these tables on
// PostgreSQL, a fresh database per run (postgres.go).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
	"github.com/hookledger/hookledger/schema"
)

// Targets from the throughput issue: serve against the durable reference.
const (
	targetRatio     = 0.65
	targetP99       = 25.0  // ms, serve at -c
	targetRSS       = 150.0 // MB, serve peak
	targetSingleP50 = 2.0   // ms, serve at one connection
)

type options struct {
	runs       int
	events     int
	dup        float64
	conns      int
	single     int
	scaling    string
	idsScaling bool
	kinds      string
	prefilled  string
	prefill    string
	keep       bool
	jsonOut    string
	binary     string
	postgres   string
	// -entitlements
	entitlements bool
	rate         float64
	webhookRate  float64
	duration     time.Duration
	customers    int
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 3, "rounds; figures are medians over them")
	flag.IntVar(&o.events, "n", 20000, "unique events per load")
	flag.Float64Var(&o.dup, "dup", 0.1, "extra duplicate deliveries as a fraction of -n")
	flag.IntVar(&o.conns, "c", 32, "connections for the main comparison")
	flag.IntVar(&o.single, "single", 2000, "unique events for the single-connection latency run")
	flag.StringVar(&o.scaling, "scaling", "", "comma-separated connection counts (e.g. 1,8,32,128): print the scaling table instead")
	flag.BoolVar(&o.idsScaling, "ids-scaling", false, "print the table of serve at -c with sequential and random event ids, by stored receipts, instead")
	flag.StringVar(&o.kinds, "kinds", "sequential,random", "with -ids-scaling: the kinds of event ids to measure, comma-separated")
	flag.StringVar(&o.prefilled, "prefilled", "", "with -ids-scaling or -entitlements: make the pre-filled databases in this directory and keep them, or use the ones an earlier run made there "+
		"(with -postgres the databases are on the server, named hookledger_bench_KIND_SIZE, and any value keeps and reuses them)")
	flag.StringVar(&o.prefill, "prefill", "1000000", "with -scaling, -ids-scaling or -entitlements: comma-separated sizes of pre-filled databases, measured besides the empty one (0: none)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (logs, databases)")
	flag.StringVar(&o.jsonOut, "json", "", "also write every raw result to this JSON file")
	flag.StringVar(&o.binary, "binary", "", "use this hookledger binary instead of building one")
	flag.BoolVar(&o.entitlements, "entitlements", false, "print the table of entitlement checks (open loop at -rate) alone and beside webhook load "+
		"(-n events at -c connections over -customers customers) instead, on a database pre-filled with the largest -prefill size")
	flag.Float64Var(&o.rate, "rate", 2000, "with -entitlements: checks scheduled per second")
	flag.Float64Var(&o.webhookRate, "webhook-rate", 1000, "with -entitlements: the steady webhook load of the fourth phase, requests per second (0: no such phase)")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "with -entitlements: how long the checks run alone")
	flag.IntVar(&o.customers, "customers", 1000, "with -entitlements: customers checked and sent events for (cus_0 …)")
	flag.StringVar(&o.postgres, "postgres", "", "with -scaling, -ids-scaling or -entitlements: run serve on PostgreSQL, a fresh database per run on this server "+
		"(a postgres:// URL whose role may create databases; pre-filled databases are copied with CREATE DATABASE … TEMPLATE)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		os.Exit(1)
	}
}

// round is one side-by-side measurement.
type round struct {
	Ref, Durable, Serve    bench.Result
	RefSingle, ServeSingle bench.Result
	PeakRSSMB              float64
	// The server process's CPU time (user and system) per request during
	// the main load, in microseconds.
	RefCPU, DurableCPU, ServeCPU float64
}

func run(ctx context.Context, o options) error {
	if o.runs < 1 {
		return errors.New("-runs must be at least 1")
	}
	tables := 0
	for _, set := range []bool{o.scaling != "", o.idsScaling, o.entitlements} {
		if set {
			tables++
		}
	}
	if tables > 1 {
		return errors.New("-scaling, -ids-scaling and -entitlements are three tables: choose one")
	}
	if o.postgres != "" && tables == 0 {
		return errors.New("-postgres is for -scaling, -ids-scaling and -entitlements")
	}
	if o.entitlements && (o.rate <= 0 || o.customers < 1 || o.duration <= 0) {
		return errors.New("-entitlements needs a positive -rate, -customers and -duration")
	}
	if o.postgres != "" && !schema.IsPostgres(o.postgres) {
		return errors.New("-postgres must be a postgres:// or postgresql:// URL")
	}
	sizes, err := parseSizes(o.prefill)
	if err != nil {
		return err
	}
	hn, err := harness.New(ctx, "", "hookledger-bench-", o.binary, o.keep)
	if err != nil {
		return err
	}
	defer hn.Close()
	h := &runner{Harness: hn, o: o, sizes: sizes}
	defer h.dropAll()

	harness.PrintMachine(os.Stdout)
	switch {
	case o.scaling != "":
		return h.scalingTable(ctx)
	case o.idsScaling:
		return h.idsTable(ctx)
	case o.entitlements:
		return h.entitlementsTable(ctx)
	}
	var rounds []round
	for r := range o.runs {
		fmt.Fprintf(os.Stderr, "round %d/%d\n", r+1, o.runs)
		rd, err := h.round(ctx, r)
		if err != nil {
			return err
		}
		rounds = append(rounds, rd)
	}
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(rounds, "", "  ")
		if err := os.WriteFile(o.jsonOut, b, 0o644); err != nil {
			return err
		}
	}
	return report(os.Stdout, o, rounds)
}

// runner runs the rounds and the scaling table in one harness.
type runner struct {
	*harness.Harness
	o     options
	sizes []int // -prefill: the pre-filled databases' sizes, ascending, without 0
	seq   int
	dbs   []string // -postgres: the pre-filled databases to drop at the end
}

func (h *runner) dir(name string) string {
	h.seq++
	return filepath.Join(h.Dir, fmt.Sprintf("%02d-%s", h.seq, name))
}

func (h *runner) round(ctx context.Context, r int) (round, error) {
	var rd round
	ref, err := h.launch(ctx, "reference", h.dir("reference"), "bench", "reference-server")
	if err != nil {
		return rd, err
	}
	rd.Ref, rd.RefCPU, err = h.measured(ctx, ref, "")
	if err == nil {
		rd.RefSingle, err = h.load(ctx, ref.URL, 1, h.o.single, "")
	}
	ref.Stop()
	if err != nil {
		return rd, fmt.Errorf("reference: %w", err)
	}

	durable, err := h.launch(ctx, "durable", h.dir("durable"), "bench", "reference-server", "--durable")
	if err != nil {
		return rd, err
	}
	rd.Durable, rd.DurableCPU, err = h.measured(ctx, durable, "")
	durable.Stop()
	if err != nil {
		return rd, fmt.Errorf("durable reference: %w", err)
	}

	data := h.dir("serve")
	srv, err := h.launch(ctx, "serve", data, "serve")
	if err != nil {
		return rd, err
	}
	defer srv.Stop()
	if rd.Serve, rd.ServeCPU, err = h.measured(ctx, srv, data); err != nil {
		return rd, fmt.Errorf("serve: %w", err)
	}
	if rd.ServeSingle, err = h.load(ctx, srv.URL, 1, h.o.single, data); err != nil {
		return rd, fmt.Errorf("serve: %w", err)
	}
	rd.PeakRSSMB, err = srv.PeakRSS()
	return rd, err
}

// launch runs `hookledger ARGS --listen 127.0.0.1:0 --data DATA` in DATA,
// logging to DATA.log.
func (h *runner) launch(ctx context.Context, name, data string, args ...string) (*harness.Server, error) {
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	args = append(args, "--listen", "127.0.0.1:0", "--data", data)
	return h.Start(ctx, name, data, data+".log", args...)
}

// measured runs the main load (-c connections) against srv and also returns
// the server's CPU time per request during it, in microseconds.
func (h *runner) measured(ctx context.Context, srv *harness.Server, data string) (bench.Result, float64, error) {
	cpu0, err := srv.CPU()
	if err != nil {
		return bench.Result{}, 0, err
	}
	res, err := h.load(ctx, srv.URL, h.o.conns, h.o.events, data)
	if err != nil {
		return res, 0, err
	}
	cpu1, err := srv.CPU()
	if err != nil {
		return res, 0, err
	}
	return res, float64(cpu1-cpu0) / float64(time.Microsecond) / float64(res.Requests), nil
}

// load runs `hookledger bench EXTRA...` against url; with data set it also verifies.
func (h *runner) load(ctx context.Context, url string, conns, events int, data string, extra ...string) (bench.Result, error) {
	if data != "" {
		extra = append(extra, "--verify", "--data", data)
	}
	res, err := h.Load(ctx, url, conns, events, h.o.dup, extra...)
	if res == nil {
		return bench.Result{}, err
	}
	fmt.Fprintf(os.Stderr, "  %-40s c=%-3d %6.0f req/s  p50 %6.2f ms  p99 %7.2f ms%s\n",
		url, conns, res.RPS, res.Latency.P50, res.Latency.P99, verdict(res))
	return *res, err
}

func verdict(r *bench.Result) string {
	if r.Verify == nil {
		return ""
	}
	if r.Verify.OK() {
		return fmt.Sprintf("  verify OK (%d/%d exactly once)", r.Verify.ExactlyOnce, r.Verify.Events)
	}
	return "  verify FAILED: " + strings.Join(r.Verify.Problems, "; ")
}

func collect(rounds []round, f func(round) float64) []float64 {
	out := make([]float64, len(rounds))
	for i, r := range rounds {
		out[i] = f(r)
	}
	return out
}

func report(w io.Writer, o options, rounds []round) error {
	fmt.Fprintf(w, "load: -n %d --dup %g -k %d (%d requests); single connection: -n %d -k 1; %d rounds, medians\n\n",
		o.events, o.dup, o.conns, rounds[0].Serve.Requests, o.single, len(rounds))
	fmt.Fprintln(w, "| round | no-storage req/s | durable req/s | serve req/s | serve/durable | serve/no-storage | durable p99 ms | serve p99 ms | serve p50 c=1 ms | serve peak RSS MB | verify |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for i, r := range rounds {
		v := "—"
		if r.Serve.Verify != nil {
			v = "OK"
			if !r.Serve.Verify.OK() {
				v = "FAILED"
			}
		}
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.1f | %s |\n", i+1,
			r.Ref.RPS, r.Durable.RPS, r.Serve.RPS, r.Serve.RPS/r.Durable.RPS, r.Serve.RPS/r.Ref.RPS,
			r.Durable.Latency.P99, r.Serve.Latency.P99, r.ServeSingle.Latency.P50, r.PeakRSSMB, v)
	}
	med := func(f func(round) float64) float64 { return harness.Median(collect(rounds, f)) }
	refRPS, durRPS, srvRPS := med(func(r round) float64 { return r.Ref.RPS }),
		med(func(r round) float64 { return r.Durable.RPS }), med(func(r round) float64 { return r.Serve.RPS })
	refP99, durP99, srvP99 := med(func(r round) float64 { return r.Ref.Latency.P99 }),
		med(func(r round) float64 { return r.Durable.Latency.P99 }), med(func(r round) float64 { return r.Serve.Latency.P99 })
	refP50 := med(func(r round) float64 { return r.RefSingle.Latency.P50 })
	srvP50 := med(func(r round) float64 { return r.ServeSingle.Latency.P50 })
	rss := med(func(r round) float64 { return r.PeakRSSMB })
	// Ratios are medians of each round's own ratio: the rounds interleave the
	// servers, so a round's ratio compares figures measured moments apart.
	durRatio := med(func(r round) float64 { return r.Serve.RPS / r.Durable.RPS })
	refRatio := med(func(r round) float64 { return r.Serve.RPS / r.Ref.RPS })

	fmt.Fprintf(w, "\nmedians              no-storage    durable      serve   serve/durable  serve/no-storage\n")
	fmt.Fprintf(w, "throughput c=%-3d   %7.0f/s  %7.0f/s  %7.0f/s   %.2f           %.2f\n", o.conns, refRPS, durRPS, srvRPS, durRatio, refRatio)
	fmt.Fprintf(w, "p99 c=%-3d          %7.2f ms %7.2f ms %7.2f ms\n", o.conns, refP99, durP99, srvP99)
	fmt.Fprintf(w, "p50 c=1            %7.2f ms            %7.2f ms\n", refP50, srvP50)
	fmt.Fprintf(w, "serve peak RSS     %.1f MB (VmHWM)\n\n", rss)
	writeCPU(w, o, rounds, durRPS)

	ok := true
	check := func(name string, met bool, got string) {
		mark := "met"
		if !met {
			mark, ok = "NOT MET", false
		}
		fmt.Fprintf(w, "target %-32s %-8s (%s)\n", name, mark, got)
	}
	check(fmt.Sprintf("serve/durable >= %.2f", targetRatio), durRatio >= targetRatio, fmt.Sprintf("%.2f", durRatio))
	check(fmt.Sprintf("serve p99 <= %.0f ms", targetP99), srvP99 <= targetP99, fmt.Sprintf("%.2f ms", srvP99))
	check(fmt.Sprintf("serve peak RSS <= %.0f MB", targetRSS), rss <= targetRSS, fmt.Sprintf("%.1f MB", rss))
	check(fmt.Sprintf("serve p50 at c=1 <= %.0f ms", targetSingleP50), srvP50 <= targetSingleP50, fmt.Sprintf("%.2f ms", srvP50))
	verified := true
	for _, r := range rounds {
		for _, res := range []bench.Result{r.Serve, r.ServeSingle} {
			if res.Verify == nil || !res.Verify.OK() {
				verified = false
			}
		}
	}
	check("verify: every event exactly once", verified, fmt.Sprintf("%d loads", 2*len(rounds)))
	if !verified {
		return errors.New("verify failed")
	}
	if !ok {
		fmt.Fprintln(w, "\nsome targets are not met")
	}
	return nil
}

// writeCPU prints where the machine's CPU went at -c connections: each
// server's and the load generator's CPU time per request, and the throughput
// serve could reach if every core were busy at that cost per request.
func writeCPU(w io.Writer, o options, rounds []round, durRPS float64) {
	med := func(f func(round) float64) float64 { return harness.Median(collect(rounds, f)) }
	rows := []struct {
		name        string
		server, gen float64
	}{
		{"no-storage", med(func(r round) float64 { return r.RefCPU }), med(func(r round) float64 { return r.Ref.LoadCPUPerRequest })},
		{"durable", med(func(r round) float64 { return r.DurableCPU }), med(func(r round) float64 { return r.Durable.LoadCPUPerRequest })},
		{"serve", med(func(r round) float64 { return r.ServeCPU }), med(func(r round) float64 { return r.Serve.LoadCPUPerRequest })},
	}
	for _, r := range rows {
		if r.gen == 0 {
			return // the load generator could not measure its CPU here
		}
	}
	fmt.Fprintf(w, "CPU per request, c=%d   server   load generator   total (µs, user+system)\n", o.conns)
	for _, r := range rows {
		fmt.Fprintf(w, "%-20s  %7.0f   %7.0f          %7.0f\n", r.name, r.server, r.gen, r.server+r.gen)
	}
	srv := rows[2]
	cores := runtime.NumCPU()
	ceiling := float64(cores) * 1e6 / (srv.server + srv.gen)
	fmt.Fprintf(w, "serve with all %d cores busy at that cost: at most %.0f req/s, %.2f of the durable reference\n\n",
		cores, ceiling, ceiling/durRPS)
}
