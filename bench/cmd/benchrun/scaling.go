package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
	"github.com/hookledger/hookledger/schema"
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
// every run at that size to start from a fresh copy of. With -prefilled the
// database is made in that directory, or taken from it if an earlier run
// made it there (its time is then 0). With -postgres it is a database
// (pgPrefill), and the string returned its name.
func (h *runner) prefill(ctx context.Context, ids bench.IDs, n int) (string, time.Duration, error) {
	if h.o.postgres != "" {
		return h.pgPrefill(ctx, ids, n)
	}
	name := fmt.Sprintf("prefilled-%s-%d", ids, n)
	dir := h.dir(name)
	if h.o.prefilled != "" {
		dir = filepath.Join(h.o.prefilled, name)
		if _, err := os.Stat(filepath.Join(dir, "done")); err == nil {
			fmt.Fprintf(os.Stderr, "using the pre-filled %s\n", dir)
			return dir, 0, nil
		}
		os.RemoveAll(dir) // an interrupted pre-fill
	}
	fmt.Fprintf(os.Stderr, "pre-filling %d events (%s ids) into %s\n", n, ids, dir)
	cmd := exec.CommandContext(ctx, h.Bin, "bench", "prefill", "--data", dir, "--receipts", strconv.Itoa(n), "--ids", ids.String())
	cmd.Env = h.Env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("prefill: %w", err)
	}
	if h.o.prefilled != "" {
		if err := os.WriteFile(filepath.Join(dir, "done"), nil, 0o600); err != nil {
			return "", 0, err
		}
	}
	return dir, time.Since(start), nil
}

// once starts a server (serve, or the no-storage reference) on a fresh data
// directory, a copy of template's database when template is set, sends it
// the load at conns connections with ids, verifies serve's ledger, and
// stops it. With -postgres serve's database is a fresh PostgreSQL database
// (a copy of the database template names), dropped afterwards.
func (h *runner) once(ctx context.Context, reference bool, template string, conns int, ids bench.IDs) (bench.Result, error) {
	name, args := "serve", []string{"serve"}
	if reference {
		name, args = "reference", []string{"bench", "reference-server"}
	}
	data := h.dir(name)
	extra := []string{"--ids", ids.String()}
	switch {
	case h.o.postgres != "" && !reference:
		dsn, db, err := h.pgDatabase(ctx, template)
		if err != nil {
			return bench.Result{}, err
		}
		if !h.o.keep {
			defer dropDatabase(h.o.postgres, db)
		}
		args = append(args, "--database", dsn)
		extra = append(extra, "--database", dsn)
	case template != "":
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
	res, err := h.load(ctx, srv.URL, conns, h.o.events, verifyData, extra...)
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
	fmt.Fprintf(w, "load: serve on %s, -n %d --dup %g; %d runs per cell, medians; req/s (p99 ms)\n\n", h.backend(), h.o.events, h.o.dup, h.o.runs)
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
// (Stripe-like) event ids (-kinds), against an empty database and one
// pre-filled with each -prefill size: the pre-filled database holds ids of
// the same kind as the load's, so random ones land among them. Each
// database is made once and copied fresh for every run. Every round runs
// every cell once, the sizes in turn and within a size the kinds in
// alternating order, so a cell's ratio to the empty database (and random's
// to sequential) compares runs minutes apart on a machine whose load
// drifts: the ratios are the medians of the per-round ratios. The disk holds
// every size's databases at once (unless -prefilled keeps them, they are
// removed at the end).
func (h *runner) idsTable(ctx context.Context) error {
	var kinds []bench.IDs
	for f := range strings.SplitSeq(h.o.kinds, ",") {
		k, err := bench.ParseIDs(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("-kinds: %w", err)
		}
		kinds = append(kinds, k)
	}
	type row struct {
		n         int
		templates []string
		cells     []series
		vsEmpty   [][]float64 // per kind, per round
		ratio     []float64   // last kind over the first, per round
		prefill   []time.Duration
	}
	var rows []row
	for _, n := range append([]int{0}, h.sizes...) {
		r := row{n: n, templates: make([]string, len(kinds)), cells: make([]series, len(kinds)),
			vsEmpty: make([][]float64, len(kinds)), prefill: make([]time.Duration, len(kinds))}
		for k, ids := range kinds {
			if n == 0 {
				continue
			}
			var err error
			if r.templates[k], r.prefill[k], err = h.prefill(ctx, ids, n); err != nil {
				return err
			}
		}
		rows = append(rows, r)
	}
	if !h.o.keep && h.o.prefilled == "" && h.o.postgres == "" { // -postgres: dropAll
		defer func() {
			for _, r := range rows {
				for _, t := range r.templates {
					if t != "" {
						os.RemoveAll(t)
					}
				}
			}
		}()
	}
	for round := range h.o.runs {
		rps := make([][]float64, len(rows))
		for i := range rows {
			r := &rows[i]
			rps[i] = make([]float64, len(kinds))
			for j := range kinds {
				k := (j + round) % len(kinds)
				res, err := h.once(ctx, false, r.templates[k], h.o.conns, kinds[k])
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "round %d, %d receipts, %s ids: %.0f req/s, p99 %.1f ms\n", round+1, r.n, kinds[k], res.RPS, res.Latency.P99)
				r.cells[k].add(res)
				rps[i][k] = res.RPS
			}
			r.ratio = append(r.ratio, rps[i][len(kinds)-1]/rps[i][0])
			for k := range kinds {
				r.vsEmpty[k] = append(r.vsEmpty[k], rps[i][k]/rps[0][k])
			}
		}
	}

	w := os.Stdout
	fmt.Fprintf(w, "command: go run ./bench/cmd/benchrun %s\n", strings.Join(shownArgs(os.Args[1:]), " "))
	fmt.Fprintf(w, "commit: %s\n", commit(ctx))
	fmt.Fprintf(w, "load: serve on %s, -n %d --dup %g -k %d, verified; %d rounds, each running every cell once; req/s (p99 ms) are medians, "+
		"ratios medians of the per-round ratios\n\n", h.backend(), h.o.events, h.o.dup, h.o.conns, h.o.runs)
	header, sep := "| stored receipts |", "|---|"
	for _, k := range kinds {
		header += fmt.Sprintf(" %s ids | vs empty |", k)
		sep += "---|---|"
	}
	if len(kinds) > 1 {
		header += fmt.Sprintf(" %s/%s |", kinds[len(kinds)-1], kinds[0])
		sep += "---|"
	}
	header += " prefill s |"
	sep += "---|"
	fmt.Fprintln(w, header)
	fmt.Fprintln(w, sep)
	for _, r := range rows {
		line := fmt.Sprintf("| %d |", r.n)
		for k := range kinds {
			line += fmt.Sprintf(" %s | %.2f |", r.cells[k], harness.Median(r.vsEmpty[k]))
		}
		if len(kinds) > 1 {
			line += fmt.Sprintf(" %.2f |", harness.Median(r.ratio))
		}
		took := "—"
		if r.n > 0 {
			var ts []string
			for _, d := range r.prefill {
				if d == 0 {
					ts = append(ts, "reused")
				} else {
					ts = append(ts, fmt.Sprintf("%.0f", d.Seconds()))
				}
			}
			took = strings.Join(ts, " / ")
		}
		fmt.Fprintln(w, line+" "+took+" |")
	}
	return nil
}

// backend names the database serve runs on.
func (h *runner) backend() string {
	if h.o.postgres != "" {
		return "PostgreSQL"
	}
	return "SQLite"
}

// shownArgs is args with the password of a -postgres URL replaced by xxx.
func shownArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if u, err := url.Parse(a); err == nil && schema.IsPostgres(a) && u.User != nil {
			if _, ok := u.User.Password(); ok {
				u.User = url.UserPassword(u.User.Username(), "xxx")
				out[i] = u.String()
			}
		}
	}
	return out
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
