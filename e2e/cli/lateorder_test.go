package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
)

// The reproduction through the real binary, on both backends: July
// closed for all, late July usage, then May closed for c1. May's close no
// longer bills the late July usage, so verify passes; the usage stays
// pending, and August's close bills it.
func TestCloseOfAnEarlierPeriodThroughTheBinary(t *testing.T) {
	bin := testenv.Binary(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			dir := t.TempDir()
			var env []string
			if backend == "postgres" {
				env = []string{"HOOKLEDGER_DATABASE=" + testenv.PostgresDatabase(t)}
			}
			cfg := `data: ./data
providers:
  - name: default
    scheme: standard
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
` + testenv.UsageYAML
			if err := os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, url := testenv.StartServe(t, bin, dir, env)
			run := func(args ...string) (string, error) { return testenv.Run(bin, dir, env, args...) }
			mustRun := func(args ...string) string {
				t.Helper()
				out, err := run(args...)
				if err != nil {
					t.Fatalf("%v: %v\n%s", args, err, out)
				}
				return out
			}
			send := func(id, at string) {
				t.Helper()
				if out := mustRun("send", "--url", url, "--id", id, "--customer", "c1", "--meter", "api_requests", "--quantity", "1", "--occurred-at", at); !strings.Contains(out, "200 OK") {
					t.Fatalf("send %s: %s", id, out)
				}
			}
			send("e1", "2026-07-10T00:00:00Z")
			mustRun("invoice", "close", "--period", "2026-07", "--all")
			send("e2", "2026-07-11T00:00:00Z")
			mustRun("invoice", "close", "--period", "2026-05", "--customer", "c1")
			if out := mustRun("invoice", "list", "--format", "csv"); strings.Count(out, "\n") != 2 || strings.Contains(out, "2026-05") {
				t.Fatalf("May has no usage, so no invoice:\n%s", out)
			}
			if out, err := run("verify"); err != nil || strings.Contains(out, "BROKEN") || strings.Contains(out, "note") {
				t.Fatalf("verify after May's close: %v\n%s", err, out)
			}
			if out := mustRun("usage", "late", "--format", "csv"); !strings.Contains(out, "c1,api_requests,2026-07,UTC,sum,1,,1,0,1,2") {
				t.Fatalf("late July usage is pending:\n%s", out)
			}
			out := mustRun("invoice", "close", "--period", "2026-08", "--customer", "c1", "--format", "csv")
			if !strings.Contains(out, ",c1,1,api_requests,2026-07,yes,sum,1,") {
				t.Fatalf("August bills the late July usage:\n%s", out)
			}
			if out, err := run("verify"); err != nil || strings.Contains(out, "BROKEN") || strings.Contains(out, "note") {
				t.Fatalf("verify after August's close: %v\n%s", err, out)
			}
		})
	}
}
