package walkthrough_test

// The walkthrough runner: every ```console block in README.md and docs/*.md
// is run against the built binary and its output compared with the docs, so
// the docs and the behaviour cannot drift apart. docs/architecture.md
// ("Docs that run") states the convention for writers; in short:
//
//   - A line starting with "$ " is a command, run by bash; a line ending in
//     " \" continues it. The lines up to the next "$ " are its expected
//     output (stdout and stderr together, as a terminal shows them).
//   - "…" inside a line stands for any text within that line (times,
//     secrets, ids, digests that change from run to run). A line that is
//     only "…", or "…" followed by a parenthesised note, stands for any
//     number of lines: that output was trimmed.
//   - A command that exits non-zero must show "(exit N)" as its last output
//     line; any other non-zero exit fails the walkthrough.
//   - A command ending in " &" runs in the background as job %1, %2, … The
//     lines shown under it are waited for (they must be the start of its
//     output, "…" allowed); what it prints later is not shown. Litestream's
//     own lines (system=litestream) come from its goroutines whenever they
//     come, so unless the docs show one they are left out before comparing
//     a job's output. `kill %N` and
//     `kill -SIG %N` signal the job; for INT, TERM and KILL the runner waits
//     for it to exit and the lines shown are everything it printed after the
//     signal (plus "(exit N)" if it failed); for other signals (HUP) they are
//     waited for like a start. `wait %N` waits for the job to exit on its
//     own and shows what it printed meanwhile, as for TERM.
//   - `go run . ` at the start of a command runs the built binary, which is
//     on PATH as `hookledger`; `go run ./examples/PKG` runs that example
//     program (an application the docs talk to), built once from the
//     repository.
//
// Why this design:
//   - One fresh t.TempDir per file, holding a copy of examples/ and
//     litestream.yml as a checkout does; the working directory and exported
//     variables carry from one command to the next (a state file bash
//     writes after each command), so a reader typing the commands into one
//     terminal does exactly what the test does. Shell variables carry over
//     too when their names are lowercase (bash's own are uppercase).
//   - Nothing is timing-based: a background job is waited for by its output,
//     never by sleeping, and every wait has a generous deadline, so a slow
//     CI machine makes the test slower, not flaky.
//   - The only things the runner changes are the ones that must differ on a
//     shared machine, and it says so here: ports 8080–8099 and 9090–9099
//     written in commands and in the copied examples are replaced by free
//     ports (and mapped back in the output before comparing); serve's
//     default listen address and send's default URL point at 8080's
//     replacement (HOOKLEDGER_LISTEN, HOOKLEDGER_URL); HOOKLEDGER_LOG_FORMAT
//     is text, as on the reader's terminal; the developer's other
//     HOOKLEDGER_* variables are removed.
//   - The PostgreSQL database the docs name, postgres://hookledger:…@
//     127.0.0.1:5432/hookledger (walkPostgres), is replaced by a fresh
//     database on the test server (testenv.PostgresDatabase: without one
//     the file fails in CI and is skipped elsewhere), and its name mapped
//     back in the output.
//   - HOOKLEDGER_WALK_SHOW=1 go test -run TestWalkthroughs ./e2e/walkthrough/
//     reports every difference instead of stopping at the first: the way
//     to write one.
//   - Comparison is line by line after trimming trailing spaces, with runs of
//     spaces compared as one (table columns that hold "…" stay aligned),
//     strict apart from that and "…": a changed word, a missing line or an
//     extra line fails
//     with the command, the expected and the actual output side by side.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
)

const walkEllipsis = "…"

// walkCommandTimeout bounds one foreground command; walkWaitTimeout bounds
// waiting for a background job's output or exit.
const (
	walkCommandTimeout = 3 * time.Minute
	walkWaitTimeout    = 2 * time.Minute
)

func TestWalkthroughs(t *testing.T) {
	files := walkthroughFiles(t)
	if len(files) == 0 {
		t.Fatal("no walkthroughs found")
	}
	bin := testenv.Binary(t)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			blocks, err := parseWalkthrough(f)
			if err != nil {
				t.Fatal(err)
			}
			needTools(t, blocks)
			runWalkthrough(t, bin, blocks)
		})
	}
}

// needTools checks the services a page starts (docs/stripe.md starts
// stripe-mock): missing, the page fails in CI and is skipped elsewhere, as
// testenv.NeedService does for the tests.
func needTools(t *testing.T, steps []walkStep) {
	for _, s := range steps {
		if strings.HasPrefix(s.cmd, "stripe-mock ") {
			if _, err := exec.LookPath("stripe-mock"); err != nil {
				testenv.NeedService(t, "stripe-mock (go install github.com/stripe/stripe-mock@"+testenv.StripeMockVersion+")", err)
			}
			return
		}
	}
}

// walkthroughFiles lists README.md and docs/*.md that hold a console block.
func walkthroughFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range append([]string{"README.md"}, docs...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("\n```console\n")) {
			files = append(files, f)
		}
	}
	return files
}

// walkStep is one "$ " command and the output the docs show for it.
type walkStep struct {
	file string
	line int // of the "$ " line
	cmd  string
	want []string
}

func (s walkStep) where() string { return fmt.Sprintf("%s:%d", s.file, s.line) }

func parseWalkthrough(file string) ([]walkStep, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var steps []walkStep
	in, cont, haveCmd := false, false, false
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case !in && line == "```console":
			in, haveCmd = true, false
		case !in:
		case line == "```":
			in, cont = false, false
		case cont:
			s := &steps[len(steps)-1]
			s.cmd += "\n" + line
			cont = strings.HasSuffix(line, `\`)
		case strings.HasPrefix(line, "$ "):
			steps = append(steps, walkStep{file: file, line: i + 1, cmd: line[2:]})
			cont, haveCmd = strings.HasSuffix(line, `\`), true
		default:
			if !haveCmd {
				return nil, fmt.Errorf("%s:%d: output before the first command of the block", file, i+1)
			}
			steps[len(steps)-1].want = append(steps[len(steps)-1].want, line)
		}
	}
	if in {
		return nil, fmt.Errorf("%s: unterminated console block", file)
	}
	return steps, nil
}

// walkEnv is one walkthrough's directory, ports, shell state and jobs.
type walkEnv struct {
	t     *testing.T
	dir   string // the walkthrough's root
	state string // bash state file: cwd, exported variables, last status
	env   []string
	ports map[string]string // documented port -> free port
	jobs  []*walkJob        // every job started; a job's number is n, as bash numbers them
	pg    string            // the fresh database standing for walkPostgres, once used
}

// walkPostgres is the PostgreSQL database the docs use.
const walkPostgres = "postgres://hookledger:hookledger@127.0.0.1:5432/hookledger"

var walkPort = regexp.MustCompile(`:(80[89]\d|909\d)\b`)

func runWalkthrough(t *testing.T, bin string, steps []walkStep) {
	root := t.TempDir()
	w := &walkEnv{t: t, dir: filepath.Join(root, "work"), state: filepath.Join(root, "state.sh"), ports: map[string]string{}}
	if err := os.MkdirAll(w.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w.copyTree("examples", filepath.Join(w.dir, "examples"))
	w.copyFile("litestream.yml", filepath.Join(w.dir, "litestream.yml"))
	if err := os.WriteFile(w.state, []byte(fmt.Sprintf("cd %q\n", w.dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = append(testenv.Environ(),
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"HOOKLEDGER_LISTEN=127.0.0.1"+w.mapPorts(":8080"),
		"HOOKLEDGER_URL=http://localhost"+w.mapPorts(":8080"),
		"HOOKLEDGER_LOG_FORMAT=text",
	)
	t.Cleanup(w.killJobs)
	for _, s := range steps {
		w.step(s)
	}
	w.checkLeftovers()
}

// checkLeftovers fails when following the page leaves a file that the
// checkout's .gitignore does not cover: a reader who follows the docs in a
// clone should still see a clean git status.
func (w *walkEnv) checkLeftovers() {
	var created []string
	err := filepath.WalkDir(w.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // a directory the page removed while we walk, or a directory
		}
		rel, _ := filepath.Rel(w.dir, path)
		if _, err := os.Lstat(rel); err == nil {
			return nil // a file of the checkout (the test runs from the module root)
		}
		created = append(created, filepath.ToSlash(rel))
		return nil
	})
	if err != nil || len(created) == 0 {
		return
	}
	cmd := exec.Command("git", "check-ignore", "--no-index", "--stdin")
	cmd.Stdin = strings.NewReader(strings.Join(created, "\n") + "\n")
	out, _ := cmd.Output() // exit 1 when nothing is ignored
	ignored := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		ignored[l] = true
	}
	var left []string
	for _, c := range created {
		if !ignored[c] {
			left = append(left, c)
		}
	}
	if len(left) > 0 {
		w.t.Errorf("following the page leaves files .gitignore does not cover (ignore them or clean up in the docs): %s", strings.Join(left, ", "))
	}
}

// mapPorts replaces every documented port in s by its free port, and the
// documented PostgreSQL database by the test's.
func (w *walkEnv) mapPorts(s string) string {
	if strings.Contains(s, walkPostgres) {
		if w.pg == "" {
			w.pg = testenv.PostgresDatabase(w.t)
		}
		s = strings.ReplaceAll(s, walkPostgres, w.pg)
	}
	return walkPort.ReplaceAllStringFunc(s, func(m string) string {
		p, ok := w.ports[m]
		if !ok {
			p = walkFreePort(w.t)
			w.ports[m] = p
		}
		return p
	})
}

// unmapPorts turns the free ports in output back into the documented ones.
func (w *walkEnv) unmapPorts(s string) string {
	if w.pg != "" {
		if u, err := url.Parse(w.pg); err == nil {
			s = strings.ReplaceAll(s, u.Path, "/hookledger") // the database's name, as hookledger prints it
		}
	}
	for doc, free := range w.ports {
		s = regexp.MustCompile(regexp.QuoteMeta(free)+`\b`).ReplaceAllString(s, doc)
	}
	return s
}

func walkFreePort(t *testing.T) string {
	_, port, _ := net.SplitHostPort(testenv.FreeAddr(t))
	return ":" + port
}

func (w *walkEnv) copyTree(from, to string) {
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			if d.Name() == "data" {
				return filepath.SkipDir // a reader's earlier run of the example
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		w.copyFile(path, filepath.Join(to, rel))
		return nil
	})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *walkEnv) copyFile(from, to string) {
	b, err := os.ReadFile(from)
	if err != nil {
		w.t.Fatal(err)
	}
	fi, _ := os.Stat(from)
	if err := os.WriteFile(to, []byte(w.mapPorts(string(b))), fi.Mode().Perm()); err != nil {
		w.t.Fatal(err)
	}
}

var (
	walkKill = regexp.MustCompile(`^kill(?: -([A-Z]+))? %(\d+)$`)
	walkWait = regexp.MustCompile(`^wait %(\d+)$`)
)

func (w *walkEnv) step(s walkStep) {
	cmd := strings.TrimSpace(s.cmd)
	if rest, ok := strings.CutPrefix(cmd, "go run . "); ok {
		cmd = "hookledger " + rest
	}
	if rest, ok := strings.CutPrefix(cmd, "go run ./examples/"); ok {
		pkg, args, _ := strings.Cut(rest, " ")
		cmd = exampleBinary(w.t, "./examples/"+pkg) + " " + args
	}
	if m := walkKill.FindStringSubmatch(cmd); m != nil {
		w.signal(s, m[1], m[2])
		return
	}
	if m := walkWait.FindStringSubmatch(cmd); m != nil {
		w.signal(s, "WAIT", m[1])
		return
	}
	if bg, ok := strings.CutSuffix(cmd, " &"); ok {
		w.background(s, bg)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), walkCommandTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", w.script(cmd, true))
	c.Dir, c.Env = w.dir, w.env
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Cancel = func() error { return syscall.Kill(-c.Process.Pid, syscall.SIGKILL) }
	out, err := c.CombinedOutput()
	got := w.unmapPorts(string(out))
	if err != nil {
		if ctx.Err() != nil {
			w.t.Fatalf("%s: %s: did not finish within %s\n%s", s.where(), s.cmd, walkCommandTimeout, got)
		}
		got = walkAddExit(got, c.ProcessState.ExitCode())
	}
	w.compare(s, got, false)
}

// script wraps a command so that it starts from the previous command's
// working directory, variables and exit status and, when keep is set,
// leaves its own for the next one.
func (w *walkEnv) script(cmd string, keep bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "source %q\n__walk_rc() { return \"${1:-0}\"; }\n__walk_rc \"$__WALK_RC\"\n", w.state)
	b.WriteString(w.mapPorts(cmd))
	b.WriteString("\n")
	if keep {
		fmt.Fprintf(&b, "__walk_status=$?\n{ printf 'cd %%q\\n' \"$PWD\"; export -p; __walk_vars=$(compgen -v | grep '^[a-z][a-z0-9_]*$'); [ -z \"$__walk_vars\" ] || declare -p $__walk_vars; printf '__WALK_RC=%%d\\n' \"$__walk_status\"; } > %q\nexit $__walk_status\n", w.state)
	}
	return b.String()
}

func walkAddExit(out string, code int) string {
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	return out + fmt.Sprintf("(exit %d)\n", code)
}

// walkJob is a background command and everything it has printed.
type walkJob struct {
	n    int // %n: one more than the highest number of the jobs still running
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (j *walkJob) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.Write(p)
}

func (j *walkJob) output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.String()
}

func (j *walkJob) running() bool {
	select {
	case <-j.done:
		return false
	default:
		return true
	}
}

func (w *walkEnv) background(s walkStep, cmd string) {
	j := &walkJob{done: make(chan struct{})}
	j.cmd = exec.Command("bash", "-c", w.script(cmd, false))
	j.cmd.Dir, j.cmd.Env = w.dir, w.env
	j.cmd.Stdout, j.cmd.Stderr = j, j
	j.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := j.cmd.Start(); err != nil {
		w.t.Fatalf("%s: %v", s.where(), err)
	}
	go func() { j.cmd.Wait(); close(j.done) }()
	for _, o := range w.jobs {
		if o.running() && o.n > j.n-1 {
			j.n = o.n + 1
		}
	}
	if j.n == 0 {
		j.n = 1
	}
	w.jobs = append(w.jobs, j)
	w.await(s, j, 0)
}

// await waits until the job's output from offset on starts with the lines
// the step shows, or the job exits, or the deadline passes.
func (w *walkEnv) await(s walkStep, j *walkJob, offset int) {
	wait := walkWaitTimeout
	if os.Getenv("HOOKLEDGER_WALK_SHOW") != "" {
		wait = 10 * time.Second // writing a walkthrough: show the mismatch sooner
	}
	deadline := time.After(wait)
	for {
		got := w.jobOutput(s, j, offset)
		if walkMatch(s.want, walkLines(got), true) {
			return
		}
		select {
		case <-j.done:
			got = w.jobOutput(s, j, offset)
			w.compare(s, walkAddExit(got, j.cmd.ProcessState.ExitCode()), true)
			return
		case <-deadline:
			w.t.Fatalf("%s: %s: the lines shown did not appear within %s\nwant:\n%s\ngot:\n%s",
				s.where(), s.cmd, wait, strings.Join(s.want, "\n"), got)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// jobOutput is what the job printed from offset on, ports mapped back, and
// without Litestream's lines unless the step shows one.
func (w *walkEnv) jobOutput(s walkStep, j *walkJob, offset int) string {
	got := w.unmapPorts(j.output()[offset:])
	if strings.Contains(strings.Join(s.want, "\n"), walkLitestream) {
		return got
	}
	var kept []string
	for _, line := range strings.SplitAfter(got, "\n") {
		if !strings.Contains(line, walkLitestream) {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "")
}

// walkLitestream marks a line Litestream logged (replication/start.go).
const walkLitestream = " system=litestream"

func (w *walkEnv) signal(s walkStep, name, job string) {
	n, _ := strconv.Atoi(job)
	var j *walkJob
	for _, o := range w.jobs {
		if o.n == n && (o.running() || name == "WAIT") {
			j = o // wait, as in bash, also finds a job that has just finished
		}
	}
	if j == nil {
		w.t.Fatalf("%s: there is no job %%%d running", s.where(), n)
	}
	sig := map[string]syscall.Signal{"": syscall.SIGTERM, "TERM": syscall.SIGTERM, "INT": syscall.SIGINT,
		"KILL": syscall.SIGKILL, "HUP": syscall.SIGHUP, "WAIT": 0}[name]
	if _, ok := map[string]bool{"": true, "TERM": true, "INT": true, "KILL": true, "HUP": true, "WAIT": true}[name]; !ok {
		w.t.Fatalf("%s: the runner does not know signal %s", s.where(), name)
	}
	offset := len(j.output())
	if sig != 0 {
		if err := syscall.Kill(-j.cmd.Process.Pid, sig); err != nil {
			w.t.Fatalf("%s: %s: %v", s.where(), s.cmd, err)
		}
	}
	if sig == syscall.SIGHUP {
		w.await(s, j, offset)
		return
	}
	select {
	case <-j.done:
	case <-time.After(walkWaitTimeout):
		w.t.Fatalf("%s: job %%%d did not exit within %s after %s", s.where(), n, walkWaitTimeout, sig)
	}
	got := w.jobOutput(s, j, offset)
	st := j.cmd.ProcessState
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == sig {
		// bash itself was ended by the signal sent to the job: what the
		// reader's shell would show as "Terminated", not a failure.
	} else if code := st.ExitCode(); code != 0 {
		got = walkAddExit(got, code)
	}
	w.compare(s, got, false)
}

func (w *walkEnv) killJobs() {
	for _, j := range w.jobs {
		select {
		case <-j.done:
		default:
			syscall.Kill(-j.cmd.Process.Pid, syscall.SIGKILL)
			<-j.done
		}
	}
}

func (w *walkEnv) compare(s walkStep, got string, prefix bool) {
	w.t.Helper()
	if !walkMatch(s.want, walkLines(got), prefix) {
		if os.Getenv("HOOKLEDGER_WALK_SHOW") != "" {
			// Writing a walkthrough: show every difference and carry on.
			w.t.Errorf("%s: $ %s\n%s", s.where(), s.cmd, strings.Join(walkLines(got), "\n"))
			return
		}
		w.t.Fatalf("%s: output of\n  $ %s\ndiffers from the docs.\n--- docs:\n%s\n--- got:\n%s", s.where(), s.cmd,
			strings.Join(s.want, "\n"), strings.Join(walkLines(got), "\n"))
	}
}

// walkLines splits output into lines without trailing spaces or trailing
// empty lines.
func walkLines(s string) []string {
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, strings.TrimRight(sc.Text(), " \t\r"))
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// walkMatch reports whether got matches the pattern lines want; with prefix,
// got may go on after the pattern ends.
func walkMatch(want, got []string, prefix bool) bool {
	want = walkLines(strings.Join(want, "\n"))
	if len(want) == 0 {
		return prefix || len(got) == 0
	}
	if walkIsTrim(want[0]) {
		for i := 0; i <= len(got); i++ {
			if walkMatch(want[1:], got[i:], prefix) {
				return true
			}
		}
		return false
	}
	if len(got) == 0 || !walkLineMatch(want[0], got[0]) {
		return false
	}
	return walkMatch(want[1:], got[1:], prefix)
}

// walkIsTrim: "…" alone, or "…" and a parenthesised note, marks trimmed lines.
func walkIsTrim(line string) bool {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), walkEllipsis)
	rest = strings.TrimSpace(rest)
	return ok && (rest == "" || strings.HasPrefix(rest, "(") && strings.HasSuffix(rest, ")"))
}

var walkSpaces = regexp.MustCompile(`[ \t]+`)

// walkLineMatch matches one line; "…" stands for any text within it. Runs of
// spaces compare as one, so a table column holding "…" can stay aligned.
func walkLineMatch(want, got string) bool {
	want, got = walkSpaces.ReplaceAllString(want, " "), walkSpaces.ReplaceAllString(got, " ")
	parts := strings.Split(want, walkEllipsis)
	if len(parts) == 1 {
		return want == got
	}
	if !strings.HasPrefix(got, parts[0]) {
		return false
	}
	got = got[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(got, p)
		if i < 0 {
			return false
		}
		got = got[i+len(p):]
	}
	return strings.HasSuffix(got, parts[len(parts)-1])
}

func TestWalkMatch(t *testing.T) {
	cases := []struct {
		want, got string
		prefix    bool
		ok        bool
	}{
		{"a\nb", "a\nb", false, true},
		{"a\nb", "a\nb\nc", false, false},
		{"a\nb", "a\nb\nc", true, true},
		{"a\n…\nd", "a\nb\nc\nd", false, true},
		{"a\n… (two lines trimmed)\nd", "a\nb\nc\nd", false, true},
		{"a\n…\nd", "a\nd", false, true},
		{"time=… msg=serving addr=…", "time=2026 msg=serving addr=:1", false, true},
		{"x … y", "x y", false, false},
		{"x…y", "xy", false, true},
		{"id …, digest …", "id 4, digest ab", false, true},
		{"a", "b", true, false},
		{"1   …                         inserted", "1   2026-12-01T09:07:12.955Z  inserted", false, true},
		{"a b", "ab", false, false},
		{"", "", false, true},
		{"", "anything", false, false},
	}
	for _, c := range cases {
		if got := walkMatch(strings.Split(c.want, "\n"), walkLines(c.got), c.prefix); got != c.ok {
			t.Errorf("walkMatch(%q, %q, prefix=%v) = %v, want %v", c.want, c.got, c.prefix, got, c.ok)
		}
	}
}

// exampleBuilds are the example programs built for walkthroughs, by package.
var exampleBuilds sync.Map // string -> func() (string, error)

// exampleBinary builds the example program pkg (./examples/…) once per test
// process and returns its path.
func exampleBinary(t *testing.T, pkg string) string {
	t.Helper()
	build, _ := exampleBuilds.LoadOrStore(pkg, sync.OnceValues(func() (string, error) {
		root, err := testenv.ModuleRoot()
		if err != nil {
			return "", err
		}
		// Beside the hookledger binary, which testenv.Main removes.
		out := filepath.Join(filepath.Dir(testenv.Binary(t)), "example-"+strings.ReplaceAll(strings.TrimPrefix(pkg, "./examples/"), "/", "-"))
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("build %s: %v\n%s", pkg, err, b)
		}
		return out, nil
	}))
	path, err := build.(func() (string, error))()
	if err != nil {
		t.Fatal(err)
	}
	return path
}
