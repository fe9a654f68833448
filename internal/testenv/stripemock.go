package testenv

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// StripeMockVersion is the stripe-mock .ci/run installs
// (go install github.com/stripe/stripe-mock@…): the newest that answers
// /v1/billing/meter_events, /v1/billing/meters and their event summaries.
const StripeMockVersion = "v0.203.0"

// StripeMock starts stripe-mock (Stripe's OpenAPI-driven mock: it checks
// each request's shape and authentication and answers with fixtures, keeps
// no state) on free loopback ports and returns its base URL. Without it on
// PATH the test fails in CI (HOOKLEDGER_CI) and is skipped elsewhere.
func StripeMock(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("stripe-mock")
	if err != nil {
		NeedService(t, "stripe-mock (go install github.com/stripe/stripe-mock@"+StripeMockVersion+")", err)
	}
	// Empty ports: the system chooses, and stripe-mock says which.
	cmd := exec.Command(bin, "-http-addr", "127.0.0.1:", "-https-addr", "127.0.0.1:")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "Listening for HTTP at address: "); ok {
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		return "http://" + a
	case <-time.After(time.Minute):
		t.Fatal(errors.New("stripe-mock did not say where it listens within a minute"))
		return ""
	}
}
