// Package e2e is what the end-to-end test packages under e2e/ share beyond
// internal/testenv: signed usage deliveries and load against a running serve,
// a read-only handle on the SQLite file it wrote, and commands run with their
// stdout, stderr and exit code apart. It lives here rather than in testenv
// because it uses bench (whose own tests use testenv); the databases it opens
// come from schema (ReadOnlyPool), the one package that holds a driver.
//
// Every package under e2e/ starts its tests with testenv.Main, which builds
// the binary once per package from the module root:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/scheme"
)

// Secret signs every test delivery; serve gets it as HOOKLEDGER_SECRET, so the
// data directory holds nothing but the database and can be deleted.
const Secret = testenv.Secret

// Load sends n signed usage events (plus 10% duplicates) over c connections
// to url's default provider.
func Load(t testing.TB, url, runID string, n, c int) (*bench.Plan, *bench.Outcome) {
	t.Helper()
	s, _ := scheme.New("standard", scheme.HMACOptions{})
	key, err := s.Key(Secret)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := bench.Load{URL: url + "/webhooks/default", Scheme: s, Key: key, Events: n, Connections: c,
		Dup: 0.1, Customers: 20, Seed: 7, RunID: runID, Timeout: 20 * time.Second}.Plan(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out, err := plan.Run(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return plan, out
}

// Post sends one signed event and returns the status code and body.
func Post(t testing.TB, url, id string) (int, string) {
	t.Helper()
	code, body, err := TryPost(url, id)
	if err != nil {
		t.Fatal(err)
	}
	return code, body
}

// TryPost sends one signed usage event; safe to call from any goroutine.
func TryPost(url, id string) (int, string, error) {
	body := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api","quantity":1,"occurred_at":"2026-11-29T10:00:00Z"}}`)
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/default", bytes.NewReader(body))
	if err := testenv.SignStandard(req.Header, Secret, id, "", body, time.Now()); err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// OpenRO opens the SQLite file at path read-only, lazily (the file may not
// exist yet), closed when the test ends.
func OpenRO(t testing.TB, path string) *schema.FilePool {
	t.Helper()
	db, err := schema.ReadOnlyPool(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Result is a finished command's stdout, stderr and exit code.
type Result struct {
	Stdout, Stderr string
	Code           int
}

// Exec runs cmd and fails the test if it has not exited within a minute.
func Exec(t testing.TB, cmd *exec.Cmd) Result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return Result{out.String(), errOut.String(), testenv.ExitCode(err)}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("%v did not finish", cmd.Args)
	}
	return Result{}
}

// Run runs bin with args in dir (environment: testenv.Environ).
func Run(t testing.TB, bin, dir string, args ...string) Result {
	t.Helper()
	return Exec(t, testenv.Command(bin, dir, nil, args...))
}

// MustRun is Run that fails the test unless the command exits 0; it returns
// the command's stdout.
func MustRun(t testing.TB, bin, dir string, args ...string) string {
	t.Helper()
	r := Run(t, bin, dir, args...)
	if r.Code != 0 {
		t.Fatalf("%v: exit %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// Interrupt starts cmd, sends it SIGINT once ready reports true, and returns
// how it ended. ready must say the command is past installing its signal
// handler (it has written, sent or served something): a SIGINT that comes
// earlier kills the process with the default action (exit -1 here), which a
// fixed delay cannot rule out on a loaded machine.
func Interrupt(t testing.TB, cmd *exec.Cmd, what string, ready func() bool) Result {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() }) // a test that fails waiting leaves no process behind
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	await.Eventually(t, time.Minute, what+" before the interrupt", func() bool {
		select {
		case err := <-done:
			done <- err
			exited = true
			return true
		default:
			return ready()
		}
	})
	if exited {
		err := <-done
		t.Fatalf("%v exited (%v) before it was interrupted:\n%s%s", cmd.Args, err, out.String(), errOut.String())
	}
	cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-done:
		return Result{out.String(), errOut.String(), testenv.ExitCode(err)}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		t.Fatalf("%v did not exit within a minute of SIGINT", cmd.Args)
	}
	return Result{}
}
