package cli_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/cli"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/scheme"
)

// Issue 13: commands that change or report state are honest. Every case runs
// the built binary in its own directory and checks the exit code, stderr and
// the files left behind.
func TestCLIHonesty(t *testing.T) {
	bin := testenv.Binary(t)
	testenv.Parallel(t, bin, []testenv.Case{
		{Name: "missing database", Run: cliMissingDatabase},
		{Name: "read-only data directory", Run: cliReadOnlyDataDir},
		{Name: "stray arguments and usage errors", Run: cliUsageErrors},
		{Name: "flags after arguments", Run: cliFlagsAfterArguments},
		{Name: "replica status", Run: cliReplicaStatus},
		{Name: "problems found exit 3", Run: cliProblemsExit3},
		{Name: "interrupted", Run: cliInterrupted},
		{Name: "send", Run: cliSend},
	})
}

// tree lists every file and directory under dir, with its size and mode.
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, _ := d.Info()
		rel, _ := filepath.Rel(dir, p)
		files = append(files, fmt.Sprintf("%s %d %v", rel, fi.Size(), fi.Mode()))
		return nil
	})
	return files
}

// A usage config whose stripe secret lives in a variable nobody sets.
const honestYML = `data: ./data
providers:
  - name: default
    scheme: standard
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
  - name: stripe
    scheme: stripe
    secrets: ["${STRIPE_WEBHOOK_SECRET}"]
` + testenv.UsageYAML

func cliMissingDatabase(t *testing.T, bin string) {
	noDB := "hookledger: no database at data/hookledger.db: run `hookledger serve` or `hookledger migrate` to create it, " +
		"or point --data (or --config) at the data directory\n"
	for _, args := range [][]string{
		{"invoice", "close", "--period", "2026-10", "--all"},
		{"adjust", "--customer", "cus_1", "--meter", "api", "--quantity", "1", "--reason", "r"},
		{"replay", "--provider", "default", "--status", "failed"},
		{"reconcile", "--provider", "default", "--file", "events.jsonl"},
		{"dev", "seed", "--rows", "10"},
		{"usage"}, {"usage", "late"}, {"invoice", "list"}, {"invoice", "show", "1"}, {"verify"}, {"audit", "mismatches"},
		{"dispute", "invoice:1"}, {"dispute", "customer", "cus_1", "--period", "2026-10"},
	} {
		dir := t.TempDir()
		r := e2e.Run(t, bin, dir, args...)
		if r.Code != 1 || r.Stderr != noDB || r.Stdout != "" {
			t.Errorf("%v in an empty directory: exit %d, stderr %q, stdout %q; want exit 1 and %q", args, r.Code, r.Stderr, r.Stdout, noDB)
		}
		if files := tree(t, dir); len(files) != 0 {
			t.Errorf("%v created %v (no database, no default.secret, no directory)", args, files)
		}
	}
	// With a config file the message names the path it looked at, and the
	// unset STRIPE_WEBHOOK_SECRET is not what fails.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(strings.Replace(honestYML, "./data", "./ledger", 1)), 0o600)
	r := e2e.Run(t, bin, dir, "usage")
	if r.Code != 1 || !strings.HasPrefix(r.Stderr, "hookledger: no database at ledger/hookledger.db: run `hookledger serve` or `hookledger migrate`") {
		t.Errorf("usage with a config: exit %d %q", r.Code, r.Stderr)
	}
	// migrate creates it; then the billing commands run.
	e2e.MustRun(t, bin, dir, "migrate")
	e2e.MustRun(t, bin, dir, "invoice", "close", "--period", "2026-10", "--all")
}

// asReader runs the binary as a user who cannot write dir: nobody when the
// tests run as root (root writes anywhere), else the test's own user.
func asReader(t *testing.T, cmd *exec.Cmd) {
	if os.Getuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
}

// openToOthers makes path and its parents up to the temp root traversable, so
// that nobody can reach a test's files.
func openToOthers(t *testing.T, path string) {
	for p := path; p != os.TempDir() && p != "/" && p != "."; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, fi.Mode().Perm()|0o055)
	}
}

func cliReadOnlyDataDir(t *testing.T, bin string) {
	dir := t.TempDir()
	binDir := t.TempDir() // a copy of the binary nobody may run
	b, _ := os.ReadFile(bin)
	os.WriteFile(filepath.Join(binDir, "hookledger"), b, 0o755)
	ro := filepath.Join(binDir, "hookledger")
	openToOthers(t, binDir)
	openToOthers(t, dir)
	os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(honestYML), 0o644)
	e2e.MustRun(t, bin, dir, "migrate")
	e2e.MustRun(t, bin, dir, "dev", "seed", "--rows", "40", "--customers", "2", "--months", "1")
	data := filepath.Join(dir, "data")
	readOnly := func() {
		os.Chmod(data, 0o555)
		for _, f := range []string{"hookledger.db", "hookledger.db-wal", "hookledger.db-shm"} {
			os.Chmod(filepath.Join(data, f), 0o444)
		}
	}
	t.Cleanup(func() { os.Chmod(data, 0o755) })
	reads := [][]string{
		{"usage", "--format", "json"}, {"usage", "late"}, {"invoice", "list"}, {"verify"}, {"audit", "mismatches"}, {"dispute", "row:1"},
	}
	check := func(state string) map[string]string {
		outs := map[string]string{}
		before := tree(t, dir)
		for _, args := range reads {
			cmd := testenv.Command(ro, dir, nil, args...)
			asReader(t, cmd)
			r := e2e.Exec(t, cmd)
			if r.Code != 0 {
				t.Errorf("%s: %v as a reader: exit %d\n%s%s", state, args, r.Code, r.Stdout, r.Stderr)
			}
			outs[strings.Join(args, " ")] = r.Stdout
		}
		if after := tree(t, dir); !slices.Equal(before, after) {
			t.Errorf("%s: read-only commands changed the directory:\nbefore %v\nafter  %v", state, before, after)
		}
		return outs
	}

	// Closed cleanly: no -wal, no -shm, and none can be created.
	readOnly()
	if _, err := os.Stat(filepath.Join(data, "hookledger.db-wal")); !os.IsNotExist(err) {
		t.Fatalf("want a cleanly closed database without -wal: %v", err)
	}
	outs := check("clean database")
	if !strings.Contains(outs["usage --format json"], `"events": `) {
		t.Errorf("usage on the clean read-only database:\n%s", outs["usage --format json"])
	}

	// Live WAL: a writer holds the database open and has committed into the
	// -wal; the reader sees that commit through the existing -shm.
	os.Chmod(data, 0o755)
	os.Chmod(filepath.Join(data, "hookledger.db"), 0o644)
	held, err := schema.Open(context.Background(), filepath.Join(data, "hookledger.db"), schema.Options{NoAutoCheckpoint: true})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	e2e.MustRun(t, bin, dir, "adjust", "--customer", "cus_wal", "--meter", "api_requests", "--quantity", "7", "--reason", "in the WAL")
	if fi, err := os.Stat(filepath.Join(data, "hookledger.db-wal")); err != nil || fi.Size() == 0 {
		t.Fatalf("want a live -wal: %v", err)
	}
	readOnly()
	outs = check("live WAL")
	if !strings.Contains(outs["usage --format json"], `"customer": "cus_wal"`) {
		t.Errorf("usage beside a live WAL does not see the commit in it:\n%s", outs["usage --format json"])
	}
}

func cliUsageErrors(t *testing.T, bin string) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string // the first line of stderr
	}{
		{[]string{"usage", "2026-09"}, `hookledger: unexpected argument "2026-09"`},
		{[]string{"usage", "lat"}, `hookledger: unexpected argument "lat": did you mean "late"?`},
		{[]string{"verify", "foo"}, `hookledger: unexpected argument "foo"`},
		{[]string{"serve", "extra"}, `hookledger: unexpected argument "extra"`},
		{[]string{"replica", "status", "now"}, `hookledger: unexpected argument "now"`},
		{[]string{"usge"}, `hookledger: unknown command "usge": did you mean "usage"?`},
		{[]string{"nonsense"}, `hookledger: unknown command "nonsense"`},
		{[]string{"invoice", "shw", "4"}, `hookledger: unknown command "shw": did you mean "show"?`},
		{[]string{"usage", "--fromm", "2026-09"}, `hookledger: flag provided but not defined: -fromm: did you mean --from?`},
		{[]string{"invoice", "show", "4", "--formt", "json"}, `hookledger: flag provided but not defined: --formt: did you mean --format?`},
		{[]string{"invoice", "show", "4", "--format", "xml"}, `hookledger: --format: "xml" is not one of table, json, csv`},
		{[]string{"invoice", "show"}, "hookledger: give one invoice ID (see `hookledger invoice list`)"},
		{[]string{"invoice", "close", "--all"}, `hookledger: --period is required`},
		{[]string{"replay", "--status", "failed"}, `hookledger: --provider is required`},
		{[]string{"dispute"}, `hookledger: give one TARGET: `},
	} {
		r := e2e.Run(t, bin, dir, c.args...)
		lines := strings.Split(strings.TrimSuffix(r.Stderr, "\n"), "\n")
		usage := "usage: hookledger "
		if r.Code != 2 || len(lines) != 2 || !strings.HasPrefix(lines[0], c.want) || !strings.HasPrefix(lines[1], usage) ||
			!strings.HasSuffix(lines[1], " (see --help)") || r.Stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s\nwant exit 2, nothing on stdout, and two lines: %q… and %q…",
				c.args, r.Code, r.Stdout, r.Stderr, c.want, usage)
		}
	}
	if files := tree(t, dir); len(files) != 0 {
		t.Errorf("usage errors created %v", files)
	}
	r := e2e.Run(t, bin, dir, "invoice", "show", "--help")
	if r.Code != 0 || !strings.Contains(r.Stdout, "hookledger invoice show [command options] ID") {
		t.Errorf("--help: exit %d\n%s", r.Code, r.Stdout)
	}
	for _, v := range [][]string{{"--version"}, {"version"}} {
		if r := e2e.Run(t, bin, dir, v...); r.Code != 0 || !strings.HasPrefix(r.Stdout, "hookledger dev (commit unknown, go") {
			t.Errorf("%v: exit %d %q %q", v, r.Code, r.Stdout, r.Stderr)
		}
	}
	// -c is --config everywhere, bench included (its connections are -k).
	for _, args := range [][]string{{"usage", "-c", "nope.yml"}, {"bench", "-c", "nope.yml"}, {"send", "-c", "nope.yml"}} {
		if r := e2e.Run(t, bin, dir, args...); r.Code != 1 || !strings.Contains(r.Stderr, "read config: open nope.yml") {
			t.Errorf("%v: exit %d %q, want the config file refused", args, r.Code, r.Stderr)
		}
	}
}

func cliFlagsAfterArguments(t *testing.T, bin string) {
	dir := t.TempDir()
	e2e.MustRun(t, bin, dir, "migrate")
	e2e.MustRun(t, bin, dir, "dev", "seed", "--rows", "30", "--customers", "2", "--months", "1", "--from", "2026-01")
	e2e.MustRun(t, bin, dir, "invoice", "close", "--period", "2026-01", "--all")
	before := e2e.MustRun(t, bin, dir, "invoice", "show", "--format", "json", "1")
	after := e2e.MustRun(t, bin, dir, "invoice", "show", "1", "--format", "json")
	var inv struct {
		ID    int64 `json:"id"`
		Lines []any `json:"lines"`
	}
	if err := json.Unmarshal([]byte(after), &inv); err != nil || inv.ID != 1 || len(inv.Lines) == 0 || after != before {
		t.Errorf("invoice show 1 --format json: %v %+v\n%s", err, inv, after)
	}
	if r := e2e.Run(t, bin, dir, "invoice", "show", "1", "2"); r.Code != 2 {
		t.Errorf("two invoice ids: exit %d %q", r.Code, r.Stderr)
	}
}

func cliReplicaStatus(t *testing.T, bin string) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "litestream.yml"), []byte("dbs:\n  - path: ./data/hookledger.db\n    replica:\n      type: file\n      path: ./replica\n"), 0o600)
	r := e2e.Run(t, bin, dir, "replica", "status")
	if r.Code != 1 || !strings.HasPrefix(r.Stderr, "hookledger: no database at "+filepath.Join(dir, "data", "hookledger.db")) || r.Stdout != "" {
		t.Errorf("no database: exit %d %q %q", r.Code, r.Stdout, r.Stderr)
	}
	e2e.MustRun(t, bin, dir, "migrate")
	r = e2e.Run(t, bin, dir, "replica", "status")
	if r.Code != 3 || !strings.Contains(r.Stdout, "in sync") || !strings.Contains(r.Stderr, "the replica directory "+filepath.Join(dir, "replica")+" does not exist") {
		t.Errorf("no replica directory: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "replica")); !os.IsNotExist(err) {
		t.Errorf("replica status created the replica directory")
	}
	os.Mkdir(filepath.Join(dir, "replica"), 0o700)
	r = e2e.Run(t, bin, dir, "replica", "status", "--format", "csv")
	recs, err := csv.NewReader(strings.NewReader(r.Stdout)).ReadAll()
	if r.Code != 3 || err != nil || len(recs) != 2 || !strings.Contains(r.Stderr, "the replica holds no backup yet") {
		t.Fatalf("empty replica: exit %d %v\n%s%s", r.Code, err, r.Stdout, r.Stderr)
	}
	field := map[string]string{}
	for i, h := range recs[0] {
		field[h] = recs[1][i]
	}
	if _, err := strconv.ParseInt(field["lag_bytes"], 10, 64); err != nil {
		t.Errorf("csv lag_bytes %q is not a number", field["lag_bytes"])
	}
	for _, f := range []string{"lag_seconds", "max_lag_seconds"} {
		if _, err := strconv.ParseFloat(field[f], 64); err != nil {
			t.Errorf("csv %s %q is not a number", f, field[f])
		}
	}
	if field["in_sync"] != "true" || field["problem"] != "the replica holds no backup yet" {
		t.Errorf("csv: %v", field)
	}

	// Replicating: healthy, exit 0.
	os.RemoveAll(filepath.Join(dir, "replica"))
	secret := []string{"HOOKLEDGER_SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
	cmd, stderr, url := testenv.StartServe(t, bin, dir, secret)
	if r := e2e.Exec(t, testenv.Command(bin, dir, secret, "send", "--url", url, "--id", "evt_r1")); r.Code != 0 {
		t.Fatalf("send: %d %s", r.Code, r.Stderr)
	}
	healthy := false
	t.Cleanup(func() {
		if !healthy {
			t.Logf("last replica status: exit %d\n%s%s\nserve:\n%s", r.Code, r.Stdout, r.Stderr, stderr)
		}
	})
	await.Eventually(t, 45*time.Second, "replica status healthy while serving", func() bool {
		r = e2e.Run(t, bin, dir, "replica", "status", "--format", "json")
		healthy = r.Code == 0
		return healthy
	})
	var st cli.ReplicaStatusJSON
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || st.Problem != "" || st.ReplicaTXID == "0000000000000000" {
		t.Errorf("healthy: %v %+v", err, st)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()

	// A commit made while serve is stopped is in no replica: its WAL is
	// pending, or unknown once SQLite has checkpointed it away. Beyond
	// --max-lag 0s that is a problem (exit 3); within 1h it is not, but the
	// replica is still not in sync.
	e2e.MustRun(t, bin, dir, "adjust", "--customer", "cus_1", "--meter", "api_requests", "--quantity", "1", "--reason", "while serve is stopped")
	for _, c := range []struct {
		maxLag string
		code   int
	}{{"0s", 3}, {"1h", 0}} {
		r = e2e.Run(t, bin, dir, "replica", "status", "--max-lag", c.maxLag, "--format", "json")
		st = cli.ReplicaStatusJSON{}
		if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil || r.Code != c.code || st.InSync ||
			(st.WALState != "pending" && st.WALState != "unknown") {
			t.Errorf("commit while stopped, --max-lag %s: exit %d (want %d) %v %+v\n%s", c.maxLag, r.Code, c.code, err, st, r.Stderr)
		}
		if c.code == 3 && !strings.Contains(st.Problem, "behind") && !strings.Contains(st.Problem, "cannot tell") {
			t.Errorf("commit while stopped: problem %q", st.Problem)
		}
	}
}

func cliProblemsExit3(t *testing.T, bin string) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(honestYML), 0o600)
	_, _, url := testenv.StartServe(t, bin, dir, []string{"STRIPE_WEBHOOK_SECRET=whsec_stripe5a1f0c2e9b7d4e1f"})
	for _, id := range []string{"evt_1", "evt_2"} {
		e2e.MustRun(t, bin, dir, "send", "--url", url, "--id", id, "--quantity", "2")
	}
	if r := e2e.Run(t, bin, dir, "dispute", "default:evt_1"); r.Code != 0 {
		t.Fatalf("intact event: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	db, err := schema.Open(context.Background(), filepath.Join(dir, "data", "hookledger.db"), schema.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Write.MustExec(`UPDATE receipts SET body = CAST('{"tampered":true}' AS BLOB) WHERE event_id = 'evt_1'`)
	db.Close()
	for _, args := range [][]string{{"dispute", "default:evt_1"}, {"dispute", "--format", "json", "default:evt_1"},
		{"dispute", "export", "default:evt_1", "--out", "x.zip"}} {
		r := e2e.Run(t, bin, dir, args...)
		if r.Code != 3 || !strings.Contains(r.Stderr, "hookledger: dispute: 1 problem(s) found; the first: event default:evt_1:") {
			t.Errorf("%v on a tampered body: exit %d, stderr %q; want 3 naming the problem", args, r.Code, r.Stderr)
		}
	}
	if r := e2e.Run(t, bin, dir, "dispute", "default:evt_2"); r.Code != 0 {
		t.Errorf("the other event: exit %d %s", r.Code, r.Stderr)
	}
	// audit, like replay and reconcile, refuses a provider that is not configured.
	r := e2e.Run(t, bin, dir, "audit", "mismatches", "--provider", "nosuch")
	if r.Code != 1 || !strings.Contains(r.Stderr, `--provider: no provider named "nosuch" (configured: default, stripe)`) {
		t.Errorf("audit --provider nosuch: exit %d %q", r.Code, r.Stderr)
	}
}

var interruptedAdded = regexp.MustCompile(`hookledger: interrupted: added (\d+) of 5000000 usage rows`)

func cliInterrupted(t *testing.T, bin string) {
	dir := t.TempDir()
	e2e.MustRun(t, bin, dir, "migrate")
	// Interrupted once a first chunk is in the ledger: seed is then past
	// installing its signal handler.
	ledger := e2e.OpenRO(t, filepath.Join(dir, "data", "hookledger.db"))
	cmd := testenv.Command(bin, dir, nil, "dev", "seed", "--rows", "5000000")
	r := e2e.Interrupt(t, cmd, "a first chunk seeded", func() bool {
		var n int
		return ledger.QueryRow(`SELECT COUNT(*) FROM metered_usage`).Scan(&n) == nil && n > 0
	})
	m := interruptedAdded.FindStringSubmatch(r.Stderr)
	if r.Code != 130 || m == nil {
		t.Fatalf("dev seed interrupted: exit %d\n%s", r.Code, r.Stderr)
	}
	db, err := schema.Open(context.Background(), filepath.Join(dir, "data", "hookledger.db"), schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var rows string
	db.Read.Get(&rows, `SELECT COUNT(*) FROM metered_usage`)
	db.Close()
	if rows != m[1] {
		t.Errorf("the ledger holds %s rows; the message says %s were added", rows, m[1])
	}

	// bench installs its handler before its first request, so the first
	// request the slow server sees says it may be interrupted.
	var requests atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		time.Sleep(100 * time.Millisecond)
		io.WriteString(w, `{"accepted":true}`)
	}))
	defer slow.Close()
	cmd = testenv.Command(bin, dir, nil, "bench", "--url", slow.URL, "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "-n", "1000", "-k", "1")
	r = e2e.Interrupt(t, cmd, "a first request at the server", func() bool { return requests.Load() > 0 })
	if r.Code != 130 || !regexp.MustCompile(`hookledger: interrupted: \d+ of 1100 requests sent`).MatchString(r.Stderr) {
		t.Errorf("bench interrupted: exit %d\n%s", r.Code, r.Stderr)
	}
}

// sendYML has one provider per scheme, each with a mapping of its own body shape.
const sendYML = `data: ./data
providers:
  - name: default
    scheme: github
    secrets: ["gh-s3cret"]
  - {name: stripe, scheme: stripe, secrets: ["whsec_stripe5a1f0c2e9b7d4e1f"]}
  - {name: standard, scheme: standard, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
  - {name: shopify, scheme: shopify, secrets: ["shpss_s3cret"]}
  - {name: slack, scheme: slack, secrets: ["slack-s3cret"]}
usage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
  - provider: stripe
    type: billing.meter_event
    customer: data.object.customer
    meter: data.object.event_name
    quantity: data.object.payload.value
`

func cliSend(t *testing.T, bin string) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(sendYML), 0o600)

	// send reads ./hookledger.yml without --config: provider default is github here.
	var got *http.Request
	var gotBody []byte
	capture := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotBody = r, must(io.ReadAll(r.Body))
		io.WriteString(w, `{"accepted":true}`)
	}))
	defer capture.Close()
	e2e.MustRun(t, bin, dir, "send", "--url", capture.URL, "--id", "evt_x", "--quantity", "3")
	gh, _ := scheme.New("github", scheme.HMACOptions{})
	if _, _, err := gh.Verify(got.Header, gotBody, [][]byte{[]byte("gh-s3cret")}, time.Now(), time.Minute); err != nil {
		t.Errorf("send did not sign with the github secret in ./hookledger.yml: %v %v", err, got.Header)
	}
	// The exact body the README shows.
	if want := `{"id":"evt_x","type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":3}}`; string(gotBody) != want {
		t.Errorf("body %s, want %s", gotBody, want)
	}
	// A HOOKLEDGER_SECRET left in the environment does not silently win.
	r := e2e.Exec(t, testenv.Command(bin, dir, []string{"HOOKLEDGER_SECRET=whsec_stale"}, "send", "--url", capture.URL))
	if r.Code != 1 || !strings.Contains(r.Stderr, `HOOKLEDGER_SECRET is set, and provider "default" in hookledger.yml has a different secret`) {
		t.Errorf("stale HOOKLEDGER_SECRET: exit %d %q", r.Code, r.Stderr)
	}

	// A provider-shaped body from a file, for every scheme, against serve; a
	// body the mapping cannot use is kept, and the reply and the log say why.
	_, logs, url := testenv.StartServe(t, bin, dir, nil)
	bodies := map[string]string{
		"stripe":   `{"id":"evt_s1","object":"event","type":"billing.meter_event","data":{"object":{"customer":"cus_9","event_name":"api_requests","payload":{"value":"4"}}}}`,
		"standard": `{"id":"msg_1","type":"usage.recorded","data":{"customer":"cus_9","meter":"api_requests","quantity":1}}`,
		"default":  `{"id":"d-1","type":"usage.recorded","data":{"customer":"cus_9","meter":"api_requests","quantity":1}}`,
		"shopify":  `{"id":"sh-1","type":"usage.recorded","data":{"customer":"cus_9","meter":"api_requests","quantity":1}}`,
		"slack":    `{"event_id":"Ev1","type":"usage.recorded","data":{"customer":"cus_9","meter":"api_requests","quantity":1}}`,
	}
	for provider, body := range bodies {
		f := filepath.Join(dir, provider+".json")
		os.WriteFile(f, []byte(body), 0o600)
		out := e2e.MustRun(t, bin, dir, "send", "--url", url, "--provider", provider, "--body", f)
		var rep struct {
			Accepted bool   `json:"accepted"`
			Status   string `json:"status"`
			EventID  string `json:"event_id"`
		}
		json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &rep)
		if !rep.Accepted || rep.Status != "applied" || rep.EventID != bodyID([]byte(body)) {
			t.Errorf("send --body for %s: %+v\n%s", provider, rep, out)
		}
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"id":"evt_bad","type":"billing.meter_event","data":{"object":{"event_name":"api_requests","payload":{"value":"1"}}}}`), 0o600)
	out := e2e.MustRun(t, bin, dir, "send", "--url", url, "--provider", "stripe", "--body", bad)
	if !strings.Contains(out, `"status":"failed"`) || !strings.Contains(out, `"error":"customer: data.object.customer is missing"`) {
		t.Errorf("failed mapping reply:\n%s", out)
	}
	await.Eventually(t, 10*time.Second, "the delivery log line carrying the mapping error", func() bool {
		return strings.Contains(logs.String(), "data.object.customer is missing")
	})
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// bodyID is the event id send reads from a --body file: "id", else "event_id".
func bodyID(body []byte) string {
	var ids struct {
		ID      string `json:"id"`
		EventID string `json:"event_id"`
	}
	json.Unmarshal(body, &ids)
	if ids.ID != "" {
		return ids.ID
	}
	return ids.EventID
}
