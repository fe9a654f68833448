package main

import (
	"context"
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

// parseSizes reads -prefill: comma-separated receipt counts, returned
// ascending and without 0 (the empty database is always measured).
func parseSizes(s string) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("-prefill: %q is not a number of receipts", f)
		}
		if n > 0 {
			sizes = append(sizes, n)
		}
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

// prefill makes a database of n receipts with ids of kind ids, once, for
// every run at that size to start from a fresh copy of.
func (h *runner) prefill(ctx context.Context, ids bench.IDs, n int) (string, time.Duration, error) {
	dir := h.dir(fmt.Sprintf("prefilled-%s-%d", ids, n))
	fmt.Fprintf(os.Stderr, "pre-filling %d events (%s ids) into %s\n", n, ids, dir)
	cmd := exec.CommandContext(ctx, h.Bin, "bench", "prefill", "--data", dir, "--receipts", strconv.Itoa(n), "--ids", ids.String())
	cmd.Env = h.Env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("prefill: %w", err)
	}
	return dir, time.Since(start), nil
}

// once starts a server (serve, or the no-storage reference) on a fresh data
// directory, a copy of template's database when template is set, sends it
// the load at conns connections with ids, verifies serve's ledger, and
// stops it.
func (h *runner) once(ctx context.Context, reference bool, template string, conns int, ids bench.IDs) (bench.Result, error) {
	name, args := "serve", []string{"serve"}
	if reference {
		name, args = "reference", []string{"bench", "reference-server"}
	}
	data := h.dir(name)
	if template != "" {
		if err := copyDB(template, data); err != nil {
			return bench.Result{}, err
		}
	}
	srv, err := h.launch(ctx, name, data, args...)
	if err != nil {
		return bench.Result{}, err
	}
	verifyData := data
	if reference {
		verifyData = ""
	}
	res, err := h.load(ctx, srv.URL, conns, h.o.events, verifyData, "--ids", ids.String())
	srv.Stop()
	if !h.o.keep {
		os.RemoveAll(data)
	}
	return res, err
}

// series is one cell's figures over the rounds.
type series struct{ rps, p99 []float64 }

func (s *series) add(r bench.Result) {
	s.rps, s.p99 = append(s.rps, r.RPS), append(s.p99, r.Latency.P99)
}

func (s series) String() string {
	return fmt.Sprintf("%.0f (%.1f)", harness.Median(s.rps), harness.Median(s.p99))
}

// scalingTable measures reference, serve on an empty database and serve on
// each pre-filled one at each connection count, with sequential ids.
func (h *runner) scalingTable(ctx context.Context) error {
	var conns []int
	for f := range strings.SplitSeq(h.o.scaling, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-scaling: %q is not a connection count", f)
		}
		conns = append(conns, n)
	}
	templates := make([]string, len(h.sizes))
	for k, n := range h.sizes {
		dir, _, err := h.prefill(ctx, bench.Sequential, n)
		if err != nil {
			return err
		}
		templates[k] = dir
	}
	measure := func(reference bool, template string, c int) (series, error) {
		var s series
		for range h.o.runs {
			res, err := h.once(ctx, reference, template, c, bench.Sequential)
			if err != nil {
				return s, err
			}
			s.add(res)
		}
		return s, nil
	}
	w := os.Stdout
	fmt.Fprintf(w, "load: -n %d --dup %g; %d runs per cell, medians; req/s (p99 ms)\n\n", h.o.events, h.o.dup, h.o.runs)
	header := "| connections | reference | serve, empty database | ratio |"
	sep := "|---|---|---|---|"
	for _, n := range h.sizes {
		header += fmt.Sprintf(" serve, %d receipts | ratio |", n)
		sep += "---|---|"
	}
	var lines []string
	for _, c := range conns {
		ref, err := measure(true, "", c)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("| %d | %s |", c, ref)
		for _, template := range append([]string{""}, templates...) {
			s, err := measure(false, template, c)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %s | %.2f |", s, harness.Median(s.rps)/harness.Median(ref.rps))
		}
		lines = append(lines, line)
		fmt.Fprintln(os.Stderr, line)
	}
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, sep)
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	return nil
}

// idsTable measures serve at -c connections with sequential and with random
// (Stripe-like) event ids, against an empty database and one pre-filled
// with each -prefill size: the pre-filled database holds ids of the same
// kind as the load's, so random ones land among them. Each size's two
// databases are made once and copied fresh for every run; within a round
// the two kinds run back to back, in alternating order, so their ratio
// compares runs moments apart. A size's databases are removed (unless
// -keep) before the next size is made, so the disk holds at most two.
func (h *runner) idsTable(ctx context.Context) error {
	kinds := []bench.IDs{bench.Sequential, bench.Random}
	type row struct {
		n       int
		cells   [2]series
		ratio   []float64 // random/sequential, per round
		prefill [2]time.Duration
	}
	var rows []row
	for _, n := range append([]int{0}, h.sizes...) {
		r := row{n: n}
		var templates [2]string
		for k, ids := range kinds {
			if n == 0 {
				continue
			}
			var err error
			if templates[k], r.prefill[k], err = h.prefill(ctx, ids, n); err != nil {
				return err
			}
		}
		for round := range h.o.runs {
			var rps [2]float64
			for j := range kinds {
				k := (j + round) % 2
				res, err := h.once(ctx, false, templates[k], h.o.conns, kinds[k])
				if err != nil {
					return err
				}
				r.cells[k].add(res)
				rps[k] = res.RPS
			}
			r.ratio = append(r.ratio, rps[1]/rps[0])
		}
		if !h.o.keep {
			for _, t := range templates {
				if t != "" {
					os.RemoveAll(t)
				}
			}
		}
		rows = append(rows, r)
	}

	w := os.Stdout
	fmt.Fprintf(w, "command: go run ./bench/cmd/benchrun %s\n", strings.Join(os.Args[1:], " "))
	fmt.Fprintf(w, "commit: %s\n", commit(ctx))
	fmt.Fprintf(w, "load: serve, -n %d --dup %g -k %d, verified; %d rounds per cell, medians; req/s (p99 ms)\n\n",
		h.o.events, h.o.dup, h.o.conns, h.o.runs)
	fmt.Fprintln(w, "| stored receipts | sequential ids | vs empty | random ids | vs empty | random/sequential | prefill s, sequential / random |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|")
	for _, r := range rows {
		vs := func(k int) float64 { return harness.Median(r.cells[k].rps) / harness.Median(rows[0].cells[k].rps) }
		took := "—"
		if r.n > 0 {
			took = fmt.Sprintf("%.0f / %.0f", r.prefill[0].Seconds(), r.prefill[1].Seconds())
		}
		fmt.Fprintf(w, "| %d | %s | %.2f | %s | %.2f | %.2f | %s |\n",
			r.n, r.cells[0], vs(0), r.cells[1], vs(1), harness.Median(r.ratio), took)
	}
	return nil
}

// commit names the checked-out commit, and says when the tree differs from it.
func commit(ctx context.Context) string {
	out, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown (not a git checkout)"
	}
	c := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		c += " with uncommitted changes"
	}
	return c
}

// copyDB copies the pre-filled database (checkpointed, so the main file is
// all of it) into a fresh data directory, and syncs the copy: at 10,000,000
// receipts it is 9 GB of dirty pages that the kernel would otherwise write
// back during the load, queueing serve's every fsync behind them.
func copyDB(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	src, err := os.Open(filepath.Join(from, "hookledger.db"))
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(filepath.Join(to, "hookledger.db"))
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	if err := dst.Sync(); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
