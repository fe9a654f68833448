// Command pgbenchrun measures hookledger on PostgreSQL against hookledger on
// SQLite and against the seed articles' reference design (Node.js + Express
// + pg, bench/node-reference), on this machine and one PostgreSQL server, in
// interleaved rounds: one receiver, three receivers sharing one database
// (three loads at once, one per receiver), SQLite, and the reference. Every
// hookledger load is verified (each event exactly once). `task
// bench:postgres` runs it; it needs node and npm for the reference, and
// -postgres (default $HOOKLEDGER_TEST_POSTGRES) naming a server where it may
// create and drop databases.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
	"github.com/hookledger/hookledger/schema"
)

type options struct {
	runs     int
	events   int
	dup      float64
	conns    int
	postgres string
	keep     bool
}

// A design's figures in one round.
type figures struct{ rps, p99 float64 }

func main() {
	var o options
	flag.IntVar(&o.runs, "runs", 3, "rounds; figures are medians over them")
	flag.IntVar(&o.events, "n", 10000, "unique events per load (split over the receivers with three)")
	flag.Float64Var(&o.dup, "dup", 0.1, "extra duplicate deliveries as a fraction of -n")
	flag.IntVar(&o.conns, "c", 32, "connections in all")
	flag.StringVar(&o.postgres, "postgres", os.Getenv("HOOKLEDGER_TEST_POSTGRES"), "PostgreSQL server URL whose user may create databases")
	flag.BoolVar(&o.keep, "keep", false, "keep the temporary directory and the databases")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "pgbenchrun:", err)
		os.Exit(1)
	}
}

var designs = []string{"postgres, 1 receiver", "postgres, 3 receivers", "sqlite", "node + express + pg"}

func run(ctx context.Context, o options) error {
	if o.postgres == "" {
		return errors.New("-postgres (or HOOKLEDGER_TEST_POSTGRES) is required")
	}
	h, err := harness.New(ctx, "", "hookledger-pgbench-", "", o.keep)
	if err != nil {
		return err
	}
	defer h.Close()
	npm := exec.CommandContext(ctx, "npm", "ci", "--silent", "--no-audit", "--no-fund")
	npm.Dir, npm.Stdout, npm.Stderr = "bench/node-reference", os.Stderr, os.Stderr
	if err := npm.Run(); err != nil {
		return fmt.Errorf("npm ci in bench/node-reference: %w", err)
	}
	r := &runner{h: h, o: o}
	defer r.dropDatabases()
	harness.PrintMachine(os.Stdout)
	results := map[string][]figures{}
	for round := range o.runs {
		fmt.Fprintf(os.Stderr, "round %d/%d\n", round+1, o.runs)
		for _, d := range designs {
			f, err := r.measure(ctx, d)
			if err != nil {
				return fmt.Errorf("%s: %w", d, err)
			}
			fmt.Fprintf(os.Stderr, "  %-24s %6.0f req/s  p99 %7.2f ms\n", d, f.rps, f.p99)
			results[d] = append(results[d], f)
		}
	}
	report(os.Stdout, o, results)
	return nil
}

type runner struct {
	h   *harness.Harness
	o   options
	seq int
	dbs []string
}

func (r *runner) dir(name string) (string, error) {
	r.seq++
	d := filepath.Join(r.h.Dir, fmt.Sprintf("%02d-%s", r.seq, name))
	return d, os.MkdirAll(d, 0o700)
}

func (r *runner) database(ctx context.Context) (string, error) {
	var b [4]byte
	rand.Read(b[:])
	name := "hookledger_bench_" + hex.EncodeToString(b[:])
	dsn, err := schema.CreatePostgresDatabase(ctx, r.o.postgres, name)
	if err == nil {
		r.dbs = append(r.dbs, name)
	}
	return dsn, err
}

func (r *runner) dropDatabases() {
	if r.o.keep {
		return
	}
	for _, name := range r.dbs {
		schema.DropPostgresDatabase(context.Background(), r.o.postgres, name)
	}
}

func (r *runner) measure(ctx context.Context, design string) (figures, error) {
	switch design {
	case "sqlite":
		dir, err := r.dir("sqlite")
		if err != nil {
			return figures{}, err
		}
		srv, err := r.h.Start(ctx, design, dir, dir+".log", "serve", "--no-replication", "--listen", "127.0.0.1:0", "--data", dir)
		if err != nil {
			return figures{}, err
		}
		defer srv.Stop()
		return r.loads(ctx, []string{srv.URL}, "--verify", "--data", dir)
	case "node + express + pg":
		dsn, err := r.database(ctx)
		if err != nil {
			return figures{}, err
		}
		dir, err := r.dir("node")
		if err != nil {
			return figures{}, err
		}
		port, err := freePort()
		if err != nil {
			return figures{}, err
		}
		nh := *r.h
		nh.Env = append(append([]string(nil), r.h.Env...), "DATABASE_URL="+dsn, "PORT="+port)
		abs, _ := filepath.Abs("bench/node-reference/server.js")
		srv, err := nh.StartProgram(ctx, design, dir, dir+".log", "node", abs)
		if err != nil {
			return figures{}, err
		}
		defer srv.Stop()
		return r.loads(ctx, []string{srv.URL})
	default: // hookledger on PostgreSQL
		n := 1
		if design == "postgres, 3 receivers" {
			n = 3
		}
		dsn, err := r.database(ctx)
		if err != nil {
			return figures{}, err
		}
		ph := *r.h
		ph.Env = append(append([]string(nil), r.h.Env...), "HOOKLEDGER_DATABASE="+dsn)
		var urls []string
		for range n {
			dir, err := r.dir("postgres")
			if err != nil {
				return figures{}, err
			}
			srv, err := ph.Start(ctx, design, dir, dir+".log", "serve", "--listen", "127.0.0.1:0", "--data", dir)
			if err != nil {
				return figures{}, err
			}
			defer srv.Stop()
			urls = append(urls, srv.URL)
		}
		return r.loads(ctx, urls, "--verify", "--database", dsn)
	}
}

// loads runs one load per URL at once, splitting events and connections;
// throughput is all requests over the longest load's time.
func (r *runner) loads(ctx context.Context, urls []string, extra ...string) (figures, error) {
	n := len(urls)
	results := make([]*bench.Result, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = r.h.Load(ctx, u, r.o.conns/n, r.o.events/n, r.o.dup, extra...)
		}()
	}
	wg.Wait()
	var f figures
	var requests int
	var longest float64
	for i, res := range results {
		if errs[i] != nil {
			return f, errs[i]
		}
		if !res.OK() {
			return f, fmt.Errorf("not every request answered 2xx: %v (%s)", res.Status, res.FirstError)
		}
		if res.Verify != nil && !res.Verify.OK() {
			return f, fmt.Errorf("verify: %v", res.Verify.Problems)
		}
		requests += res.Requests
		longest = max(longest, res.Seconds)
		f.p99 = max(f.p99, res.Latency.P99)
	}
	f.rps = float64(requests) / longest
	return f, nil
}

func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), nil
}

func report(w io.Writer, o options, results map[string][]figures) {
	fmt.Fprintf(w, "load: -n %d --dup %g, %d connections in all (split over the receivers), %d interleaved rounds, medians\n\n",
		o.events, o.dup, o.conns, o.runs)
	fmt.Fprintln(w, "| design | req/s | p99 ms | × node + express + pg |")
	fmt.Fprintln(w, "|---|---|---|---|")
	med := func(d string, f func(figures) float64) float64 {
		var xs []float64
		for _, x := range results[d] {
			xs = append(xs, f(x))
		}
		return harness.Median(xs)
	}
	// Ratios are medians of each round's own ratio (measured moments apart).
	ratio := func(d string) float64 {
		var xs []float64
		for i, x := range results[d] {
			xs = append(xs, x.rps/results["node + express + pg"][i].rps)
		}
		return harness.Median(xs)
	}
	for _, d := range designs {
		fmt.Fprintf(w, "| %s | %.0f | %.1f | %.2f |\n", d, med(d, func(f figures) float64 { return f.rps }),
			med(d, func(f figures) float64 { return f.p99 }), ratio(d))
	}
	fmt.Fprintf(w, "\ntarget: postgres ≥ 3× node + express + pg: 1 receiver %.2f×, 3 receivers %.2f×\n",
		ratio(designs[0]), ratio(designs[1]))
}
