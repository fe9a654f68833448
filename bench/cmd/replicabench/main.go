// Command replicabench measures what ACK-after-replica mode costs: in one run
// it builds hookledger and, round after round, sends the same signed load
// (`hookledger bench`, verified against the ledger) to serve in three modes,
// each with a fresh data directory:
//
//   - local:   no litestream.yml (no replication), the reference
//   - default: replicating to a file replica on local disk, 2xx after the local commit
//   - replica: the same, with --ack-after-replica (2xx once the replica holds the commit)
//
// and prints throughput and p99 per round, their medians, and the
// replica/default throughput ratio against the 0.5 target.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
)

const targetRatio = 0.5 // ACK-after-replica throughput vs default mode

var modes = []string{"local", "default", "replica"}

type options struct {
	runs, events, conns int
	dup                 float64
	binary, tmp         string
	keep                bool
}

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 3, "rounds; figures are medians over them")
	flag.IntVar(&o.events, "n", 10000, "unique events per load")
	flag.IntVar(&o.conns, "c", 32, "concurrent connections")
	flag.Float64Var(&o.dup, "dup", 0.1, "extra duplicate deliveries as a fraction of -n")
	flag.StringVar(&o.binary, "binary", "", "use this hookledger binary instead of building one")
	flag.StringVar(&o.tmp, "dir", "", "parent directory for data and replicas (default: the system temp dir; put it on the disk you want to measure)")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory (logs, databases, replicas)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "replicabench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	if o.runs < 1 {
		return errors.New("-runs must be at least 1")
	}
	h, err := harness.New(ctx, o.tmp, "hookledger-replicabench-", o.binary, o.keep)
	if err != nil {
		return err
	}
	defer h.Close()

	harness.PrintMachine(os.Stdout)
	results := map[string][]bench.Result{}
	for r := range o.runs {
		for _, mode := range modes {
			res, err := measure(ctx, o, h, filepath.Join(h.Dir, fmt.Sprintf("%02d-%s", r+1, mode)), mode)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, mode, err)
			}
			fmt.Fprintf(os.Stderr, "round %d  %-8s %7.0f req/s  p50 %6.2f ms  p99 %7.2f ms  verify OK (%d/%d exactly once)\n",
				r+1, mode, res.RPS, res.Latency.P50, res.Latency.P99, res.Verify.ExactlyOnce, res.Verify.Events)
			results[mode] = append(results[mode], res)
		}
	}
	return report(os.Stdout, o, results)
}

// measure starts serve in mode with a fresh data directory, loads it and
// verifies the ledger, and stops it.
func measure(ctx context.Context, o options, h *harness.Harness, dir, mode string) (bench.Result, error) {
	var res bench.Result
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return res, err
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--data", data}
	if mode != "local" {
		yml := fmt.Sprintf("dbs:\n  - path: %s\n    replica:\n      type: file\n      path: %s\n",
			filepath.Join(data, "hookledger.db"), filepath.Join(dir, "replica"))
		cfg := filepath.Join(dir, "litestream.yml")
		if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
			return res, err
		}
		args = append(args, "--litestream-config", cfg)
	}
	if mode == "replica" {
		args = append(args, "--ack-after-replica")
	}
	srv, err := h.Start(ctx, "serve", dir, filepath.Join(dir, "serve.log"), args...)
	if err != nil {
		return res, err
	}
	defer srv.Stop()

	r, err := h.Load(ctx, srv.URL, o.conns, o.events, o.dup, "--verify", "--data", data, "--run-id", mode)
	if err != nil {
		return res, err
	}
	if r.Verify == nil || !r.Verify.OK() {
		return *r, fmt.Errorf("verify failed: %+v", r.Verify)
	}
	return *r, nil
}

func report(w io.Writer, o options, results map[string][]bench.Result) error {
	fmt.Fprintf(w, "load: hookledger bench -n %d --dup %g -c %d --verify (%d requests); %d rounds, modes interleaved; medians\n\n",
		o.events, o.dup, o.conns, results["local"][0].Requests, o.runs)
	fmt.Fprintln(w, "| round | local req/s | default req/s | ACK-after-replica req/s | replica/default | local p99 ms | default p99 ms | ACK-after-replica p99 ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for i := range o.runs {
		l, d, r := results["local"][i], results["default"][i], results["replica"][i]
		fmt.Fprintf(w, "| %d | %.0f | %.0f | %.0f | %.2f | %.2f | %.2f | %.2f |\n", i+1,
			l.RPS, d.RPS, r.RPS, r.RPS/d.RPS, l.Latency.P99, d.Latency.P99, r.Latency.P99)
	}
	med := func(mode string, f func(bench.Result) float64) float64 {
		var xs []float64
		for _, r := range results[mode] {
			xs = append(xs, f(r))
		}
		return harness.Median(xs)
	}
	rps := func(r bench.Result) float64 { return r.RPS }
	p50 := func(r bench.Result) float64 { return r.Latency.P50 }
	p99 := func(r bench.Result) float64 { return r.Latency.P99 }
	fmt.Fprintf(w, "\nmedians            local     default   ACK-after-replica\n")
	fmt.Fprintf(w, "throughput     %7.0f/s  %7.0f/s  %7.0f/s\n", med("local", rps), med("default", rps), med("replica", rps))
	fmt.Fprintf(w, "p50            %6.2f ms  %6.2f ms  %6.2f ms\n", med("local", p50), med("default", p50), med("replica", p50))
	fmt.Fprintf(w, "p99            %6.2f ms  %6.2f ms  %6.2f ms\n\n", med("local", p99), med("default", p99), med("replica", p99))
	ratio := med("replica", rps) / med("default", rps)
	verdict := "met"
	if ratio < targetRatio {
		verdict = "NOT MET"
	}
	fmt.Fprintf(w, "target ACK-after-replica >= %.1fx default throughput: %s (%.2f)\n", targetRatio, verdict, ratio)
	return nil
}
