package ops_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
)

// A non-loopback admin listener with a guessable token is a startup error,
// and serve refuses before it creates anything in the data directory.
func TestServeRefusesWeakAdminTokenOffLoopback(t *testing.T) {
	bin := testenv.Binary(t)
	for name, token := range map[string]string{
		"one character":   "x",
		"whitespace only": "                        ",
		"15 characters":   "0123456789abcde",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := opsConfig(t, dir, "admin:\n  listen: 0.0.0.0:0\n")
			cmd := exec.Command(bin, "serve", "--config", cfg)
			cmd.Dir, cmd.Env = dir, append(testenv.Environ(), "HOOKLEDGER_ADMIN_TOKEN="+token)
			var out []byte
			var err error
			done := make(chan struct{})
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				<-done
				t.Fatalf("serve started with admin token %q on 0.0.0.0", token)
			}
			if testenv.ExitCode(err) != 1 {
				t.Fatalf("exit %d, want 1:\n%s", testenv.ExitCode(err), out)
			}
			for _, want := range []string{"0.0.0.0:0 is not a loopback address", "shorter than 16 characters or only whitespace", "HOOKLEDGER_ADMIN_TOKEN"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); !os.IsNotExist(err) {
				t.Errorf("the refused start created the data directory (stat: %v)", err)
			}
		})
	}
}
