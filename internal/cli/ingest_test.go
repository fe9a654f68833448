package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
)

// ingestFile writes lines, one a line, to a file and returns its path.
func ingestFile(t *testing.T, lines []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// eventLine is a generic usage event with id, one a line of an ingest file.
func eventLine(id string) string {
	return fmt.Sprintf(`{"id":%q,"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1}}`, id)
}

// storedIDs are the event ids of provider's usage rows, in order.
func storedIDs(e *testenv.Env, provider string) []string {
	e.T.Helper()
	var ids []string
	if err := e.DB.Read.Select(&ids, `SELECT event_id FROM metered_usage WHERE provider = $1 ORDER BY event_id`, provider); err != nil {
		e.T.Fatal(err)
	}
	return ids
}

// A line that is not a JSON object is reported by its number with the
// reason and skipped; the lines before and after it, in its batch and in the
// next ones, are stored; ingest exits 3. Against the real ingest API.
func TestIngestSkipsBadLines(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	key, _ := e.CreateKey("app", 0, 0)
	var lines, want []string
	for n := 1; n <= 12; n++ {
		id := fmt.Sprintf("imp-%02d", n)
		switch n {
		case 3: // a line cut short
			lines = append(lines, `{"id":"imp-03","type":"usage.recorded","data":{"customer":"cus_1"`)
		case 7: // JSON, not an object: sent, and rejected by serve
			lines = append(lines, `["imp-07"]`)
		case 9: // deeper than serve takes inside a batch (the batch's array is a level)
			lines = append(lines, `{"id":"imp-09","type":"usage.recorded","data":`+strings.Repeat("[", config.DefaultMaxDepth-1)+strings.Repeat("]", config.DefaultMaxDepth-1)+`}`)
		case 11: // read by serve and rejected: reported by its line as before
			lines = append(lines, `{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1}}`)
		default:
			lines = append(lines, eventLine(id))
			want = append(want, "app#"+id)
		}
	}
	file := ingestFile(t, lines)

	code, stdout, stderr := exit("ingest", "--url", e.HTTP.URL, "--key", key, "--batch", "5", file)
	if code != exitProblem {
		t.Errorf("exit %d, want %d\n%s%s", code, exitProblem, stdout, stderr)
	}
	if got := storedIDs(e, "api:app"); !slices.Equal(got, want) {
		t.Errorf("stored %v\nwant   %v", got, want)
	}
	wantOut := "OUTCOME  EVENTS\n" +
		"applied  8\n" +
		"rejected 2\n" +
		"skipped  2\n" +
		"line 3: skipped: not valid JSON: unexpected end of JSON input\n" +
		"line 7: rejected: an event must be a JSON object\n" +
		fmt.Sprintf("line 9: skipped: nests more than %d levels deep (serve's limit, %d, counts the batch's array)\n", config.DefaultMaxDepth-1, config.DefaultMaxDepth) +
		"line 11: rejected: the event has no id\n"
	if squeeze(stdout) != squeeze(wantOut) {
		t.Errorf("stdout:\n%s\nwant:\n%s", stdout, wantOut)
	}
	if want := "hookledger: 4 events were not stored as sent\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}

	// Again, as JSON: what was stored comes back as duplicates; the skipped
	// lines are listed with the rest, by line.
	code, stdout, _ = exit("ingest", "--url", e.HTTP.URL, "--key", key, "--batch", "5", "--format", "json", file)
	var sum ingestSummary
	if err := json.Unmarshal([]byte(stdout), &sum); err != nil || code != exitProblem {
		t.Fatalf("--format json: exit %d, %v\n%s", code, err, stdout)
	}
	var got []string
	for _, p := range sum.Problems {
		got = append(got, fmt.Sprintf("%d %s %s", p.Line, p.Outcome, p.Reason))
	}
	if want := []string{"3 skipped not_json", "7 rejected not_object", "9 skipped too_deep", "11 rejected no_id"}; !slices.Equal(got, want) {
		t.Errorf("problems %v, want %v", got, want)
	}
	if sum.Events != 10 || sum.Requests != 2 || sum.Counts["duplicate"] != 8 || sum.Counts["skipped"] != 2 {
		t.Errorf("summary %+v: want 10 events sent in 2 requests, 8 duplicates, 2 skipped", sum)
	}
}

// A line over serve's ingest.max_body is sent alone and refused alone: it is
// reported by its line, and the lines after it are sent.
func TestIngestLineOverServesMaxBody(t *testing.T) {
	e := testenv.New(t, testenv.Options{Edits: []func(*config.Config){func(c *config.Config) { c.Ingest.MaxBody = 400 }}})
	key, _ := e.CreateKey("app", 0, 0)
	big := fmt.Sprintf(`{"id":"imp-2","type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1,"note":%q}}`, strings.Repeat("x", 400))
	file := ingestFile(t, []string{eventLine("imp-1"), big, eventLine("imp-3"), eventLine("imp-4")})

	code, stdout, stderr := exit("ingest", "--url", e.HTTP.URL, "--key", key, "--max-body", "400", file)
	if code != exitProblem || !strings.Contains(stdout, "line 2: rejected: body exceeds 400 bytes: the line alone is over serve's ingest.max_body\n") {
		t.Errorf("exit %d, want %d and line 2 reported\n%s%s", code, exitProblem, stdout, stderr)
	}
	if got, want := storedIDs(e, "api:app"), []string{"app#imp-1", "app#imp-3", "app#imp-4"}; !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}

// ingest takes --config (and HOOKLEDGER_CONFIG) as every command does, and
// posts where that config's listen serves.
func TestIngestConfig(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	key, _ := e.CreateKey("app", 0, 0)
	t.Chdir(t.TempDir()) // no ./hookledger.yml
	for _, v := range []string{"HOOKLEDGER_URL", "HOOKLEDGER_LISTEN", "HOOKLEDGER_CONFIG"} {
		t.Setenv(v, "")
		os.Unsetenv(v)
	}
	cfg := filepath.Join(t.TempDir(), "elsewhere.yml")
	yml := fmt.Sprintf("listen: %s\ndata: %s\nproviders:\n  - name: default\n    scheme: standard\n    secrets: [%q]\n",
		strings.TrimPrefix(e.HTTP.URL, "http://"), filepath.Join(t.TempDir(), "data"), testenv.Secret)
	if err := os.WriteFile(cfg, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}

	if code, stdout, stderr := exit("ingest", "--config", cfg, "--key", key, ingestFile(t, []string{eventLine("imp-1")})); code != 0 {
		t.Errorf("ingest --config: exit %d\n%s%s", code, stdout, stderr)
	}
	t.Setenv("HOOKLEDGER_CONFIG", cfg)
	if code, stdout, stderr := exit("ingest", "--key", key, ingestFile(t, []string{eventLine("imp-2")})); code != 0 {
		t.Errorf("ingest with HOOKLEDGER_CONFIG: exit %d\n%s%s", code, stdout, stderr)
	}
	if got, want := storedIDs(e, "api:app"), []string{"app#imp-1", "app#imp-2"}; !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
}

// squeeze collapses runs of spaces (a table's padding).
func squeeze(s string) string {
	return strings.Join(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' }), " ")
}
