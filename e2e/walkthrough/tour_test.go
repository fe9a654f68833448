package walkthrough_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// The README's two-minute tour, step by step, against the real binary.
func TestReadmeTour(t *testing.T) {
	bin := testenv.Binary(t)
	dir := t.TempDir()
	serve, stderr, url := testenv.StartServe(t, bin, dir, nil)

	// The generated secret is printed once and kept with 0600 permissions.
	secretFile := filepath.Join(dir, "data", "default.secret")
	fi, err := os.Stat(secretFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret file: %v %v", fi, err)
	}
	secret, _ := os.ReadFile(secretFile)
	if !strings.Contains(stderr.String(), strings.TrimSpace(string(secret))) {
		t.Errorf("generated secret was not printed at first start")
	}

	send := []string{"send", "--url", url, "--customer", "cus_1", "--meter", "api_requests", "--quantity", "3", "--id", "evt_1"}
	out, err := testenv.Run(bin, dir, nil, send...)
	if err != nil || !strings.Contains(out, "200 OK") || !strings.Contains(out, `"duplicate":false`) {
		t.Fatalf("first send: %v\n%s", err, out)
	}
	out, err = testenv.Run(bin, dir, nil, send...)
	if err != nil || !strings.Contains(out, `"duplicate":true`) {
		t.Fatalf("duplicate send: %v\n%s", err, out)
	}
	out, err = testenv.Run(bin, dir, nil, "send", "--url", url, "--customer", "cus_2", "--meter", "api_requests", "--quantity", "0.25", "--id", "evt_2")
	if err != nil {
		t.Fatalf("third send: %v\n%s", err, out)
	}

	// usageTotals runs `usage --format json`: one "customer meter quantity events" per row.
	usageTotals := func() string {
		t.Helper()
		out, err := testenv.Run(bin, dir, nil, "usage", "--format", "json")
		if err != nil {
			t.Fatalf("usage: %v\n%s", err, out)
		}
		var totals []struct {
			Customer, Meter, Quantity string
			Events                    int
		}
		if err := json.Unmarshal([]byte(out), &totals); err != nil {
			t.Fatalf("usage json: %v\n%s", err, out)
		}
		var got []any
		for _, r := range totals {
			got = append(got, fmt.Sprintf("%s %s %s %d", r.Customer, r.Meter, r.Quantity, r.Events))
		}
		return fmt.Sprint(got)
	}
	want := fmt.Sprint([]any{"cus_1 api_requests 3 1", "cus_2 api_requests 0.25 1"})
	if got := usageTotals(); got != want {
		t.Errorf("usage = %v, want %v", got, want)
	}
	out, err = testenv.Run(bin, dir, nil, "usage")
	if err != nil || !strings.Contains(out, "cus_1") || !strings.Contains(out, "QUANTITY") {
		t.Errorf("usage table: %v\n%s", err, out)
	}

	// Graceful stop, then a restart keeps everything and prints no new secret.
	serve.Process.Signal(syscall.SIGTERM)
	if err := serve.Wait(); err != nil {
		t.Fatalf("serve exited with %v after SIGTERM\n%s", err, stderr.String())
	}
	_, stderr2, url2 := testenv.StartServe(t, bin, dir, nil)
	out, err = testenv.Run(bin, dir, nil, "send", "--url", url2, "--customer", "cus_1", "--meter", "api_requests", "--quantity", "3", "--id", "evt_1")
	if err != nil || !strings.Contains(out, `"duplicate":true`) {
		t.Errorf("after restart evt_1 is not a duplicate: %v\n%s", err, out)
	}
	if got := usageTotals(); got != want {
		t.Errorf("usage after the restart and the repeated send = %v, want %v", got, want)
	}
	if strings.Contains(stderr2.String(), "Generated a signing secret") {
		t.Errorf("second start generated a new secret")
	}
}

func TestCLIErrorsExitNonZero(t *testing.T) {
	bin := testenv.Binary(t)
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"usage", "--from", "yesterday"}, "--from"},
		{[]string{"usage", "--format", "xml"}, "--format"},
		{[]string{"usage", "--from", "2026-12-01", "--to", "2026-11-01"}, "before"},
		{[]string{"usage", "--data", filepath.Join(dir, "nothing-here")}, "no database at " + filepath.Join(dir, "nothing-here", "hookledger.db")},
		{[]string{"serve", "--config", filepath.Join(dir, "missing.yml")}, "missing.yml"},
		{[]string{"send", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "--quantity", "1/3", "--url", "http://127.0.0.1:1"}, "--quantity"},
		{[]string{"send", "--secret", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "--url", "http://127.0.0.1:1"}, "connection refused"},
		{[]string{"send", "--data", dir, "--url", "http://127.0.0.1:1"}, "no secret"},
		{[]string{"nonsense"}, "nonsense"},
	}
	for _, c := range cases {
		out, err := testenv.Run(bin, dir, nil, c.args...)
		if err == nil {
			t.Errorf("%v: exit 0, want failure\n%s", c.args, out)
			continue
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%v: output does not mention %q:\n%s", c.args, c.want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
		t.Errorf("a failed command created ./data")
	}
}

func TestBadConfigFailsAtStartup(t *testing.T) {
	bin := testenv.Binary(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte("providers:\n  - name: stripe\n    scheme: stripe\n    secrets: [\"${STRIPE_WEBHOOK_SECRET}\"]\n"), 0o600)
	out, err := testenv.Run(bin, dir, nil, "serve")
	if err == nil || !strings.Contains(out, "hookledger.yml:4") || !strings.Contains(out, "STRIPE_WEBHOOK_SECRET") {
		t.Errorf("want a startup error naming hookledger.yml:4 and the variable, got %v\n%s", err, out)
	}
}
