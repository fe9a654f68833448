package cli

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/scheme"
)

// exit runs the command line as Main does, and returns what Main would exit
// with and print.
func exit(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(append([]string{"hookledger"}, args...))
	if err != nil {
		printError(&errOut, err)
	}
	return exitStatus(err), out.String(), errOut.String()
}

// A missing required flag is a usage error (exit 2) whichever command checks
// it, and a failed command exits 1 with its reason on stderr.
func TestExitCodes(t *testing.T) {
	e := newCLIEnv(t)
	e.mustRun("migrate")
	// Two of the largest ordinary quantity: the total of cus_big is beyond
	// 64-bit micro-units, and usage prints it exactly.
	for range 2 {
		e.mustRun("adjust", "--customer", "cus_big", "--meter", "api", "--quantity", "9223372036854.775807", "--reason", "test")
	}
	e.mustRun("adjust", "--customer", "cus_small", "--meter", "api", "--quantity", "1", "--reason", "test")
	badScheme := filepath.Join(e.dir, "bad-scheme.yml")
	os.WriteFile(badScheme, []byte("providers:\n  - name: x\n    scheme: stripee\n    secrets: [s]\n"), 0o600)
	adjust := []string{"adjust", "--config", e.config, "--customer", "c1", "--meter", "api"}
	for _, c := range []struct {
		args []string
		code int
		want string // stderr's first line (a usage error's second is its usage line)
	}{
		{[]string{"invoice", "close", "--config", e.config, "--period", "2026-10"}, 2, "hookledger: --customer C or --all is required"},
		{[]string{"invoice", "close", "--config", e.config, "--period", "2026-10", "--all", "--customer", "c1"}, 2,
			"hookledger: give --customer C or --all, not both"},
		{[]string{"adjust", "--config", e.config, "--meter", "api", "--quantity", "1", "--reason", "r"}, 2, "hookledger: --customer is required: the customer whose usage is corrected"},
		{[]string{"adjust", "--config", e.config, "--customer", "c1", "--quantity", "1", "--reason", "r"}, 2, "hookledger: --meter is required: the meter whose usage is corrected"},
		{append(adjust, "--reason", "r"), 2, "hookledger: --quantity is required: a signed decimal, e.g. -5"},
		{append(adjust, "--quantity", "1"), 2, "hookledger: --reason is required: say why the ledger is corrected"},
		{append(adjust, "--quantity=-9223372036854.775808", "--reason", "r"), 1,
			`hookledger: --quantity: "-9223372036854.775808": out of range: one row holds at most 19 significant digits`},
		{append(adjust, "--quantity=9223372036854.775808", "--reason", "r"), 1,
			`hookledger: --quantity: "9223372036854.775808": out of range: one row holds at most 19 significant digits`},
		{append(adjust, "--quantity=1e19", "--reason", "r"), 1,
			`hookledger: --quantity: "1e19": out of range: one row holds at most 19 significant digits`},
		{append(adjust, "--quantity", "1", "--reason", " "), 2, "hookledger: --reason is required: say why the ledger is corrected"},
		{[]string{"usage", "--config", badScheme}, 1,
			`hookledger: ` + badScheme + `:3: providers[0].scheme: unknown signature scheme "stripee" (want one of ` + strings.Join(scheme.Names(), ", ") + ")"},
	} {
		code, stdout, stderr := exit(c.args...)
		first, _, _ := strings.Cut(stderr, "\n")
		if code != c.code || first != c.want || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s\nwant exit %d, nothing on stdout, and %q", c.args, code, stdout, stderr, c.code, c.want)
		}
		if c.code == 1 && strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: want one line on stderr, got:\n%s", c.args, stderr)
		}
	}
	// The refused quantities stored nothing; the smallest quantity is accepted.
	if n := e.count(`SELECT COUNT(*) FROM metered_usage WHERE customer_id = 'c1'`); n != 0 {
		t.Errorf("refused adjustments stored %d rows", n)
	}
	e.mustRun("adjust", "--customer", "c1", "--meter", "api", "--quantity=-9223372036854.775807", "--reason", "test")
	if n := e.count(`SELECT COUNT(*) FROM metered_usage WHERE customer_id = 'c1' AND quantity = -9223372036854775807`); n != 1 {
		t.Errorf("the smallest quantity: %d rows, want 1", n)
	}
	if code, stdout, stderr := exit("usage", "--config", e.config, "--customer", "cus_big", "--format", "csv"); code != 0 ||
		!strings.Contains(stdout, "cus_big,api,sum,18446744073709.551614,") {
		t.Errorf("usage of the customer whose total is beyond 64-bit micro-units: exit %d\n%s%s", code, stdout, stderr)
	}
}

// ingest.KeyChars is the shape ingest.NewKey makes, which keyShape describes.
func TestKeyShape(t *testing.T) {
	key, _, _, err := ingest.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	if got := len(key) - len(ingest.KeyPrefix); got != ingest.KeyChars {
		t.Fatalf("a new key has %d characters after %s, KeyChars says %d", got, ingest.KeyPrefix, ingest.KeyChars)
	}
	shape := "; an API key is hl_ followed by 43 base64url characters (A-Z, a-z, 0-9, - and _)"
	for _, c := range []struct{ key, want string }{
		{"hl_bogus", "5 characters follow hl_"},
		{"hl_" + key[3:45], "42 characters follow hl_"},
		{key + "x", "44 characters follow hl_"},
		{"hl_x", "1 character follows hl_"},
		{"hl_bo!gus", `character 3 after hl_ is '!'`},
		{"sk_live_" + key[3:], "it does not start with hl_"},
	} {
		for _, args := range [][]string{
			{"ingest", "--key", c.key, "events.jsonl"},
			{"send", "--api", "--key", c.key},
		} {
			code, _, stderr := exit(args...)
			want := "hookledger: --key: not an API key: " + c.want + shape + "\n"
			if code != 2 || !strings.HasPrefix(stderr, want) {
				t.Errorf("%s --key %s: exit %d\n%s\nwant exit 2 and %q", args[0], c.key, code, stderr, want)
			}
		}
	}
}

// A batch over serve's ingest.max_events or ingest.max_body is refused as a
// whole; ingest says which flag makes the next run fit.
func TestIngestRefusedBatch(t *testing.T) {
	key, _, _, err := ingest.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	var lines strings.Builder
	for i := range 4 {
		fmt.Fprintf(&lines, `{"id":"e%d","type":"usage.recorded","data":{"customer":"c1","meter":"api","quantity":1}}`+"\n", i)
	}
	os.WriteFile(file, []byte(lines.String()), 0o600)
	for _, c := range []struct {
		reply string // serve's 413 answer, as receiver writes it
		want  string
	}{
		{`{"error":"too many events: at most 2 per request","reason":"too_many_events"}`,
			"hookledger: lines 1-4: 413 Request Entity Too Large: too many events: at most 2 per request: pass --batch 2 (serve's ingest.max_events)"},
		{`{"error":"too many events","reason":"too_many_events"}`,
			"hookledger: lines 1-4: 413 Request Entity Too Large: too many events: pass a smaller --batch (serve's ingest.max_events)"},
		{`{"error":"body exceeds 200 bytes","reason":"too_large"}`,
			"hookledger: lines 1-4: 413 Request Entity Too Large: body exceeds 200 bytes: pass --max-body 200 (serve's ingest.max_body)"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			fmt.Fprintln(w, c.reply)
		}))
		code, _, stderr := exit("ingest", "--url", srv.URL, "--key", key, file)
		srv.Close()
		if code != 1 || stderr != c.want+"\n" {
			t.Errorf("413 %s: exit %d\n%s\nwant exit 1 and %q", c.reply, code, stderr, c.want)
		}
	}
}
