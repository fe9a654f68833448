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
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hookledger/hookledger/bench"
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
	tmp, err := os.MkdirTemp(o.tmp, "hookledger-replicabench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(os.Stderr, "keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	bin := o.binary
	if bin == "" {
		bin = filepath.Join(tmp, "hookledger")
		fmt.Fprintln(os.Stderr, "building", bin)
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("go build (run from the repository root): %w", err)
		}
	}
	raw := make([]byte, 24)
	rand.Read(raw)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(raw)
	env := []string{"HOOKLEDGER_SECRET=" + secret}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKLEDGER_") {
			env = append(env, kv)
		}
	}

	printMachine(os.Stdout)
	results := map[string][]bench.Result{}
	for r := range o.runs {
		for _, mode := range modes {
			res, err := measure(ctx, o, bin, env, filepath.Join(tmp, fmt.Sprintf("%02d-%s", r+1, mode)), mode)
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
func measure(ctx context.Context, o options, bin string, env []string, dir, mode string) (bench.Result, error) {
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
	srv, err := start(ctx, bin, env, dir, args)
	if err != nil {
		return res, err
	}
	defer srv.stop()

	cmd := exec.CommandContext(ctx, bin, "bench", "--url", srv.url, "-n", strconv.Itoa(o.events), "-c", strconv.Itoa(o.conns),
		"--dup", strconv.FormatFloat(o.dup, 'f', -1, 64), "--format", "json", "--verify", "--data", data, "--run-id", mode)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return res, fmt.Errorf("bench: %v: %s", runErr, stderr.String())
	}
	if runErr != nil {
		return res, fmt.Errorf("bench failed (%v): %s", runErr, strings.TrimSpace(stderr.String()))
	}
	if res.Verify == nil || !res.Verify.OK() {
		return res, fmt.Errorf("verify failed: %+v", res.Verify)
	}
	return res, nil
}

type server struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

// start runs serve and waits for the address it logs (JSON lines on a pipe).
func start(ctx context.Context, bin string, env []string, dir string, args []string) (*server, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, env
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			logf.Write(append(sc.Bytes(), '\n'))
			var l struct{ Addr string }
			if !found && json.Unmarshal(sc.Bytes(), &l) == nil && l.Addr != "" {
				found = true
				addr <- l.Addr
			}
		}
		io.Copy(logf, stderr)
		logf.Close()
		s.done <- cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("serve exited before listening (%v); see %s", err, filepath.Join(dir, "serve.log"))
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("serve did not log a listen address within 30s; see %s", filepath.Join(dir, "serve.log"))
	}
}

func (s *server) stop() {
	if s.cmd.ProcessState != nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
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
		return median(xs)
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

func printMachine(w io.Writer) {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	kernel := ""
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = " (Linux " + strings.TrimSpace(string(b)) + ")"
	}
	fmt.Fprintf(w, "machine: %s, %d cores%s; %s; %s\n", model, runtime.NumCPU(), kernel, runtime.Version(),
		time.Now().UTC().Format("2006-01-02 15:04 MST"))
}
