package testenv

import (
	"context"
	"crypto/tls"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/scheme"
)

// Command is bin with args, to run in dir with Environ() plus env.
func Command(bin, dir string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, append(Environ(), env...)
	return cmd
}

// Run runs bin in dir with Environ() plus env and returns its combined output.
func Run(bin, dir string, env []string, args ...string) (string, error) {
	out, err := Command(bin, dir, env, args...).CombinedOutput()
	return string(out), err
}

// RunFor is Run that fails the test if bin does not exit within a generous
// bound (a serve that should refuse but starts instead).
func RunFor(t testing.TB, bin, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = dir, append(Environ(), env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("hookledger %s did not exit (it should have refused):\n%s", strings.Join(args, " "), out)
	}
	return string(out), err
}

// StartServe runs `bin serve --listen ADDR args...` in dir on a free loopback
// address and waits until /healthz answers, over HTTPS when args carry
// --tls-cert. It returns the process, its stderr and the listener's URL;
// t.Cleanup kills the process.
func StartServe(t testing.TB, bin, dir string, env []string, args ...string) (*exec.Cmd, *Buffer, string) {
	t.Helper()
	addr := FreeAddr(t)
	stderr := &Buffer{}
	cmd := Command(bin, dir, env, append([]string{"serve", "--listen", addr}, args...)...)
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	url, client := "http://"+addr, http.DefaultClient
	if slices.Contains(args, "--tls-cert") {
		// The tests' certificates are their own; what they check is the peer's.
		url, client = "https://"+addr, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if resp, err := client.Get(url + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return cmd, stderr, url
			}
		}
	}
	t.Fatalf("serve did not become healthy at %s:\n%s", url, stderr)
	return nil, nil, ""
}

// Case is one scenario of a table-driven binary test.
type Case struct {
	Name string
	Run  func(t *testing.T, bin string)
}

// Parallel runs every case as a parallel subtest against bin: each has its
// own directory, ports and processes.
func Parallel(t *testing.T, bin string, cases []Case) {
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			c.Run(t, bin)
		})
	}
}

// SignStandard adds to h the headers a Standard Webhooks sender with secret
// sends with body, signed at at.
func SignStandard(h http.Header, secret, id, typ string, body []byte, at time.Time) error {
	s, err := scheme.New("standard", scheme.HMACOptions{})
	if err != nil {
		return err
	}
	key, err := s.Key(secret)
	if err != nil {
		return err
	}
	s.Sign(h, body, key, id, typ, at)
	return nil
}
