// Package testenv is what hookledger's tests share, so that each thing is
// built in one place:
//
//   - env.go: Env, the write path on a real SQLite file (database, running
//     custody writer, configuration, the real webhook handler behind a real
//     listener) on a controllable Clock, with Sign/Post/Deliver and the row
//     counts tests assert on. Package tests wrap it in their env_test.go;
//     because testenv imports schema, custody, ledger, receiver and config,
//     the tests of those packages that use it are external (package x_test).
//   - testenv.go and serve.go: the end-to-end side. The hookledger binary,
//     built once per test process (plain and with the release ldflags), a free
//     port, a clean environment, exit codes, a log buffer safe to read while a
//     process writes it, `serve` started and waited for, Standard Webhooks
//     signing. An in-process S3 is in subpackage fakes3.
//
// A test package that uses Binary or ReleaseBinary calls Main from its
// TestMain, which removes the built binaries when the tests end:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ReleaseVersion and ReleaseCommit are what ReleaseBinary is built with, as the
// Taskfile's -ldflags "-X main.version=... -X main.commit=..." would.
const (
	ReleaseVersion = "v9.9.9-ops"
	ReleaseCommit  = "opscommit"
)

var (
	dirOnce sync.Once
	dir     string
	dirErr  error

	plain, release build
)

// build is one binary, built at most once.
type build struct {
	once sync.Once
	path string
	err  error
}

// Main runs the tests and then removes the binaries they built.
func Main(m *testing.M) {
	code := m.Run()
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Binary is hookledger as `CGO_ENABLED=0 go build .` makes it (version dev,
// commit unknown), built on first use and shared by every test of the process.
func Binary(t testing.TB) string {
	t.Helper()
	return plain.get(t, "hookledger")
}

// ReleaseBinary is hookledger built with the release ldflags (ReleaseVersion,
// ReleaseCommit), on first use; for tests of what a release build reports.
func ReleaseBinary(t testing.TB) string {
	t.Helper()
	return release.get(t, "hookledger-release", "-ldflags", "-X main.version="+ReleaseVersion+" -X main.commit="+ReleaseCommit)
}

func (b *build) get(t testing.TB, name string, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		dirOnce.Do(func() { dir, dirErr = os.MkdirTemp("", "hookledger-testenv-") })
		if dirErr != nil {
			b.err = dirErr
			return
		}
		root, err := ModuleRoot()
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", b.path, ".")...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// ModuleRoot is the directory holding hookledger's go.mod, found upwards
// from the working directory (a test runs in its package's directory).
func ModuleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && bytes.Contains(b, []byte("module github.com/hookledger/hookledger\n")) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("testenv: no hookledger go.mod above the working directory")
		}
		d = parent
	}
}

// FreeAddr returns a loopback address that was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Environ is the process environment without HOOKLEDGER_*, so a developer's
// shell cannot change a test.
func Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HOOKLEDGER_") {
			env = append(env, kv)
		}
	}
	return env
}

// ExitCode is a finished command's exit status: 0 for a nil error, -1 when
// the command did not run.
func ExitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// Buffer collects a subprocess's output while a test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
