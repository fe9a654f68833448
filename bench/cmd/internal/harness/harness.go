// Package harness is what the benchmark runners under bench/cmd share: a
// temporary directory with a hookledger binary, a fresh signing secret,
// hookledger processes started on free ports, `hookledger bench` loads, and
// the machine line and medians they print.
package harness

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hookledger/hookledger/bench"
)

// Harness is one benchmark run's temporary directory, binary and secret.
type Harness struct {
	Bin  string   // the hookledger binary
	Dir  string   // the temporary directory; Close removes it unless kept
	Env  []string // the environment without HOOKLEDGER_*, plus a fresh HOOKLEDGER_SECRET
	keep bool
}

// listenWait is how long a server may take to listen: serve on a copy of a
// pre-filled database made by an older release migrates it and builds the
// usage state from the ledger first, tens of seconds at 10,000,000 rows.
const listenWait = 5 * time.Minute

// New makes a temporary directory named prefix* under parent (the system
// temp dir when empty), builds hookledger into it unless binary names one,
// and makes a fresh whsec_ secret for the processes it runs.
func New(ctx context.Context, parent, prefix, binary string, keep bool) (*Harness, error) {
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return nil, err
	}
	h := &Harness{Bin: binary, Dir: dir, keep: keep}
	if keep {
		fmt.Fprintln(os.Stderr, "keeping", dir)
	}
	if h.Bin == "" {
		h.Bin = filepath.Join(dir, "hookledger")
		fmt.Fprintln(os.Stderr, "building", h.Bin)
		build := exec.CommandContext(ctx, "go", "build", "-o", h.Bin, ".")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			h.Close()
			return nil, fmt.Errorf("go build (run from the repository root): %w", err)
		}
	}
	raw := make([]byte, 24)
	rand.Read(raw)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKLEDGER_") {
			h.Env = append(h.Env, kv)
		}
	}
	h.Env = append(h.Env, "HOOKLEDGER_SECRET=whsec_"+base64.StdEncoding.EncodeToString(raw))
	return h, nil
}

// Close removes the temporary directory unless it is kept.
func (h *Harness) Close() {
	if !h.keep {
		os.RemoveAll(h.Dir)
	}
}

// Server is a running hookledger process.
type Server struct {
	URL      string
	cmd      *exec.Cmd
	done     chan error
	stopOnce sync.Once
}

// Start runs `hookledger ARGS` in dir (so no hookledger.yml is picked up:
// default config), copies its stderr to logPath and waits for the listen
// address it logs. ARGS should listen on 127.0.0.1:0.
func (h *Harness) Start(ctx context.Context, name, dir, logPath string, args ...string) (*Server, error) {
	return h.StartProgram(ctx, name, dir, logPath, h.Bin, args...)
}

// StartProgram is Start for another program that logs its listen address
// the same way (the Node.js reference, bench/node-reference).
func (h *Harness) StartProgram(ctx context.Context, name, dir, logPath, program string, args ...string) (*Server, error) {
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Dir, cmd.Env = dir, h.Env
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &Server{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		// The server logs JSON lines; the first with an addr is its listener.
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
		s.URL = "http://" + a
		return s, nil
	case err := <-s.done:
		return nil, fmt.Errorf("%s exited before listening (%v); see %s", name, err, logPath)
	case <-time.After(listenWait):
		s.Stop()
		return nil, fmt.Errorf("%s did not log a listen address within %v; see %s", name, listenWait, logPath)
	}
}

// Stop asks the server to shut down gracefully and waits for it to exit.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill()
			<-s.done
		}
	})
}

// CPU reads the CPU time (user and system, all threads) the server has used so
// far from /proc/PID/stat, whose clock ticks are USER_HZ = 100 on Linux.
func (s *Server) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time: %w", err)
	}
	// The command name is in parentheses and may hold spaces: count fields
	// after its closing parenthesis, where field 3 (state) comes first.
	_, rest, ok := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) < 13 {
		return 0, fmt.Errorf("parse /proc/%d/stat: too few fields", s.cmd.Process.Pid)
	}
	var ticks int64
	for _, v := range f[11:13] { // utime (14) and stime (15)
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse /proc/%d/stat: %w", s.cmd.Process.Pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// PeakRSS reads the kernel's high-water mark of the process's resident set, in MB.
func (s *Server) PeakRSS() (float64, error) {
	_, hwm, err := s.Memory()
	return hwm, err
}

// Memory reads the process's resident set now (VmRSS) and its high-water
// mark (VmHWM) from /proc/PID/status, in MB.
func (s *Server) Memory() (rss, hwm float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read RSS: %w", err)
	}
	found := 0
	for line := range strings.Lines(string(b)) {
		for key, dst := range map[string]*float64{"VmRSS:": &rss, "VmHWM:": &hwm} {
			if v, ok := strings.CutPrefix(line, key); ok {
				kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				if err != nil {
					return 0, 0, fmt.Errorf("parse %s %q: %w", key, v, err)
				}
				*dst = float64(kb) / 1024
				found++
			}
		}
	}
	if found != 2 {
		return 0, 0, errors.New("no VmRSS/VmHWM in /proc/PID/status")
	}
	return rss, hwm, nil
}

// Secret is the whsec_ secret the processes sign and verify with.
func (h *Harness) Secret() string {
	for _, kv := range h.Env {
		if v, ok := strings.CutPrefix(kv, "HOOKLEDGER_SECRET="); ok {
			return v
		}
	}
	return ""
}

// Load runs `hookledger bench --url URL -n EVENTS --connections CONNS --dup DUP
// --format json EXTRA...` and returns the result it printed. The result is
// nil when bench printed none; when bench printed one but exited non-zero
// (a failed verify, say), both the result and an error come back.
func (h *Harness) Load(ctx context.Context, url string, conns, events int, dup float64, extra ...string) (*bench.Result, error) {
	args := append([]string{"bench", "--url", url, "-n", strconv.Itoa(events), "--connections", strconv.Itoa(conns),
		"--dup", strconv.FormatFloat(dup, 'f', -1, 64), "--format", "json"}, extra...)
	cmd := exec.CommandContext(ctx, h.Bin, args...)
	cmd.Env = h.Env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("hookledger %s: %v: %s", strings.Join(args, " "), runErr, stderr.String())
	}
	if runErr != nil {
		return &res, fmt.Errorf("load against %s failed (%v): %s", url, runErr, strings.TrimSpace(stderr.String()))
	}
	return &res, nil
}

// Median is the middle of xs (the mean of the two middle ones for an even count).
func Median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// PrintMachine writes the machine line: CPU model, cores, kernel, Go version, date.
func PrintMachine(w io.Writer) {
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
