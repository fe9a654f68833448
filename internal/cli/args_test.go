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
	err := app.Run(helpArgs(append([]string{"hookledger"}, args...)))
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
			`hookledger: --quantity: "-9223372036854.775808": out of range: its digits, decimal point aside, exceed 9223372036854775807 (one row's limit)`},
		{append(adjust, "--quantity=9223372036854.775808", "--reason", "r"), 1,
			`hookledger: --quantity: "9223372036854.775808": out of range: its digits, decimal point aside, exceed 9223372036854775807 (one row's limit)`},
		{append(adjust, "--quantity=9999999999999999999", "--reason", "r"), 1,
			`hookledger: --quantity: "9999999999999999999": out of range: its digits, decimal point aside, exceed 9223372036854775807 (one row's limit)`},
		{append(adjust, "--quantity=1e19", "--reason", "r"), 1,
			`hookledger: --quantity: "1e19": out of range: its digits, decimal point aside, exceed 9223372036854775807 (one row's limit)`},
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

// `help` reaches subcommands: `help invoice close` is invoice close's help,
// not invoice's.
func TestHelpOfASubcommand(t *testing.T) {
	for _, args := range [][]string{{"help", "invoice", "close"}, {"invoice", "help", "close"}, {"invoice", "close", "--help"}} {
		code, out, stderr := exit(args...)
		if code != 0 || !strings.Contains(out, "hookledger invoice close - close a month") || !strings.Contains(out, "--period") {
			t.Errorf("%v: exit %d\n%s%s", args, code, out, stderr)
		}
	}
	if code, out, _ := exit("help", "invoice"); code != 0 || !strings.Contains(out, "hookledger invoice - close, list and show") {
		t.Errorf("help invoice: exit %d\n%s", code, out)
	}
}

// A misspelt flag is matched against every flag, and one whose value would
// parse wins: `--form 2026-11` meant --from, `--formt json` --format.
func TestFlagTypoPrefersAFlagTheValueFits(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"usage", "--form", "2026-11"}, "did you mean --from?"},
		{[]string{"usage", "--formt", "json"}, "did you mean --format?"},
		{[]string{"usage", "--form", "csv"}, "did you mean --format?"},
		{[]string{"invoice", "close", "--perod", "2026-11"}, "did you mean --period?"},
	} {
		code, _, stderr := exit(tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
}

// copy's closing line is a command that works once pasted: a password in
// the --to URL is never printed, and a placeholder says where it goes.
func TestNextVerifyNeverPrintsThePassword(t *testing.T) {
	line := nextVerify("postgres://hookledger:s3cret@db:5432/ledger?sslmode=disable", "postgres://hookledger@db:5432/ledger?sslmode=disable")
	if strings.Contains(line, "s3cret") || !strings.Contains(line, "--database 'postgres://hookledger:PASSWORD@db:5432/ledger?sslmode=disable'") ||
		!strings.Contains(line, "PASSWORD is the password in the URL you gave --to") {
		t.Errorf("with a password: %s", line)
	}
	line = nextVerify("postgres://hookledger@db/ledger", "postgres://hookledger@db/ledger")
	if !strings.HasPrefix(line, "next: hookledger verify --database 'postgres://hookledger@db/ledger', then") || strings.Contains(line, "PASSWORD") {
		t.Errorf("without a password: %s", line)
	}
}

// dispute warns only about what it uses: a provider's unresolved secret,
// never an admin token's.
func TestDisputeWarnsOnlyAboutProviderSecrets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookledger.yml")
	write := func(secret string) {
		yml := "providers:\n  - name: default\n    scheme: standard\n    secrets: [\"" + secret + "\"]\n" +
			"admin:\n  tokens: [\"${HOOKLEDGER_TEST_UNSET_TOKEN}\"]\n"
		if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.Unsetenv("HOOKLEDGER_TEST_UNSET_TOKEN")
	os.Unsetenv("HOOKLEDGER_TEST_UNSET_SECRET")
	write("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if code, out, stderr := exit("migrate", "--config", path); code != 0 {
		t.Fatalf("migrate: exit %d\n%s%s", code, out, stderr)
	}
	_, _, stderr := exit("dispute", "event:default/evt_1", "--config", path)
	if strings.Contains(stderr, "admin.tokens") || strings.Contains(stderr, "not verifiable") {
		t.Errorf("an unset admin token was warned about:\n%s", stderr)
	}
	write("${HOOKLEDGER_TEST_UNSET_SECRET}")
	_, _, stderr = exit("dispute", "event:default/evt_1", "--config", path)
	if !strings.Contains(stderr, "providers[0].secrets[0]") || !strings.Contains(stderr, "signatures it would verify are reported not verifiable") {
		t.Errorf("an unset provider secret was not warned about:\n%s", stderr)
	}
}
