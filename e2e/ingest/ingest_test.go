package ingest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
)

// The ingest API against the built binary: keys made by one process and
// used by a running serve, send --api, ingest FILE, and kill -9 under load.

// ingestEnv is a zero-config serve's directory and environment.
type ingestEnv struct {
	bin, dir string
	env      []string
}

func newIngestEnv(t *testing.T, bin string) *ingestEnv {
	return &ingestEnv{bin: bin, dir: t.TempDir(), env: []string{"HOOKLEDGER_SECRET=" + testenv.Secret}}
}

func (e *ingestEnv) run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	out, err := testenv.RunFor(t, e.bin, e.dir, e.env, args...)
	return out, testenv.ExitCode(err)
}

func (e *ingestEnv) createKey(t *testing.T, name string, flags ...string) string {
	t.Helper()
	out, code := e.run(t, append([]string{"keys", "create", name, "--quiet"}, flags...)...)
	key := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "hl_") {
		t.Fatalf("keys create %s: exit %d\n%s", name, code, out)
	}
	return key
}

func (e *ingestEnv) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e2e.OpenRO(t, filepath.Join(e.dir, "data", "hookledger.db")).QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestIngestCommands(t *testing.T) {
	testenv.Parallel(t, testenv.Binary(t), []testenv.Case{
		{Name: "keys", Run: testKeysCommands},
		{Name: "ingest file", Run: testIngestFile},
		{Name: "kill -9 under batch load", Run: testIngestKill9},
	})
}

func testKeysCommands(t *testing.T, bin string) {
	e := newIngestEnv(t, bin)
	for _, cmd := range [][]string{{"keys", "create", "app"}, {"keys", "list"}, {"keys", "revoke", "1"}} {
		if out, code := e.run(t, cmd...); code != 1 || !strings.Contains(out, "no database") {
			t.Errorf("%s before any database: exit %d\n%s", strings.Join(cmd, " "), code, out)
		}
	}
	_, _, url := testenv.StartServe(t, bin, e.dir, e.env)

	// A key created by this process works on the running serve at once.
	out, code := e.run(t, "keys", "create", "app", "--rate", "100")
	key := strings.TrimSpace(strings.Split(out, "\n\n")[1])
	if code != 0 || !strings.HasPrefix(key, "hl_") || !strings.Contains(out, "provider api:app") {
		t.Fatalf("keys create: exit %d\n%s", code, out)
	}
	send := func() (string, int) {
		return e.run(t, "send", "--api", "--url", url, "--key", key, "--id", "evt_1", "--customer", "cus_9", "--quantity", "2.5")
	}
	if out, code := send(); code != 0 || !strings.Contains(out, "200 OK") || !strings.Contains(out, `"outcome":"applied"`) {
		t.Fatalf("send --api: exit %d\n%s", code, out)
	}
	if out, code := send(); code != 0 || !strings.Contains(out, `"outcome":"duplicate"`) {
		t.Fatalf("send --api again: exit %d\n%s", code, out)
	}
	if n := e.count(t, `SELECT COUNT(*) FROM metered_usage WHERE provider = 'api:app' AND event_id = 'hookledger-send#evt_1' AND customer_id = 'cus_9' AND quantity = 2500000`); n != 1 {
		t.Fatalf("%d usage rows for the sent event, want 1", n)
	}
	out, code = e.run(t, "keys", "list", "--format", "json")
	var keys []map[string]any
	if err := json.Unmarshal([]byte(out), &keys); code != 0 || err != nil || len(keys) != 1 || keys[0]["name"] != "app" || strings.Contains(out, key) {
		t.Fatalf("keys list: exit %d %v\n%s", code, err, out)
	}

	// The trace shows the key, the address and user agent, and says there is no signature to check.
	out, code = e.run(t, "dispute", "event:api:app/hookledger-send#evt_1", "--format", "json")
	for _, want := range []string{`"provider": "api:app"`, `no provider signature to re-verify`, `"user_agent": "hookledger/`, `"remote_addr": "127.0.0.1:`, "body_sha256"} {
		if !strings.Contains(out, want) {
			t.Errorf("dispute of an API event lacks %q (exit %d)\n%s", want, code, out)
		}
	}

	// --body: a file's bytes as they are; an array goes as generic events.
	body := filepath.Join(e.dir, "generic.json")
	os.WriteFile(body, []byte(`[{"id":"g1","type":"usage.recorded","data":{"customer":"cus_9","meter":"api_requests","quantity":1}}]`), 0o600)
	if out, code := e.run(t, "send", "--api", "--url", url, "--key", key, "--body", body); code != 0 || !strings.Contains(out, `"event_id":"app#g1","outcome":"applied"`) {
		t.Fatalf("send --api --body: exit %d\n%s", code, out)
	}
	// A scope is a provider for replay.
	if out, code := e.run(t, "replay", "--provider", "api:app", "--status", "failed"); code != 0 || !strings.Contains(out, "api:app") {
		t.Fatalf("replay --provider api:app: exit %d\n%s", code, out)
	}

	// Revoked by another process: refused within ingest.key_cache (1s).
	if out, code := e.run(t, "keys", "revoke", "1"); code != 0 || !strings.Contains(out, "revoked") {
		t.Fatalf("keys revoke: exit %d\n%s", code, out)
	}
	revoked := time.Now()
	for {
		out, code := send()
		if code == 1 && strings.Contains(out, "401") && strings.Contains(out, "revoked_key") {
			break
		}
		if time.Since(revoked) > 3*time.Second {
			t.Fatalf("the revoked key still works after %s:\n%s", time.Since(revoked), out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("revocation took effect within %s", time.Since(revoked).Round(time.Millisecond))

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"keys", "create"}, 2, "NAME"},
		{[]string{"keys", "create", "Bad Name"}, 2, "lowercase"},
		{[]string{"keys", "create", "app", "--rate", "-1"}, 2, "--rate"},
		{[]string{"keys", "create", "app", "--burst", "3"}, 2, "--burst needs --rate"},
		{[]string{"keys", "revoke", "1"}, 1, "already revoked"},
		{[]string{"keys", "revoke", "99"}, 1, "no API key 99"},
		{[]string{"keys", "revoke", "x"}, 2, "key ID"},
		{[]string{"keys", "revoke"}, 2, "ID"},
		{[]string{"send", "--api", "--url", url}, 2, "--key"},
		{[]string{"send", "--api", "--url", url, "--key", "nope"}, 2, "not an API key"},
		{[]string{"send", "--api", "--url", url, "--key", "hl_" + strings.Repeat("x", 43)}, 1, "unknown_key"},
		{[]string{"ingest", "--url", url, "--key", key}, 2, "a file"},
		{[]string{"ingest", "--url", url, "--key", key, "missing.jsonl"}, 1, "no such file"},
		{[]string{"ingest", "--url", url, "--key", key, "--batch", "0", "-"}, 2, "--batch"},
		{[]string{"ingest", "--url", url, "--key", key, body}, 1, "lines 1-1: 401 Unauthorized: API key revoked"}, // a 4xx is not retried
	} {
		if out, code := e.run(t, tc.args...); code != tc.code || !strings.Contains(out, tc.want) {
			t.Errorf("%s: exit %d, want %d with %q\n%s", strings.Join(tc.args, " "), code, tc.code, tc.want, out)
		}
	}
}

func testIngestFile(t *testing.T, bin string) {
	e := newIngestEnv(t, bin)
	_, _, url := testenv.StartServe(t, bin, e.dir, e.env)
	key := e.createKey(t, "import")
	var b strings.Builder
	var want int64
	for i := range 1200 {
		switch {
		case i == 10 || i == 700:
			b.WriteString(`{"type":"usage.recorded","data":{}}` + "\n") // no id
		case i == 500:
			b.WriteString("\n") // blank lines are skipped
		case i == 900: // stored, but the mapping cannot use it: failed, with the reason
			fmt.Fprintf(&b, `{"id":"imp-%d","type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1e30}}`+"\n", i)
		case i%100 == 99:
			fmt.Fprintf(&b, `{"id":"imp-%d","type":"usage.recorded","data":{"customer":"cus_%d","meter":"api_requests","quantity":%d}}`+"\n", i-1, (i-1)%7, i-1)
		default:
			fmt.Fprintf(&b, `{"id":"imp-%d","type":"usage.recorded","data":{"customer":"cus_%d","meter":"api_requests","quantity":%d}}`+"\n", i, i%7, i)
			want += int64(i)
		}
	}
	file := filepath.Join(e.dir, "events.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	// 1200 lines: 1 blank, 2 without an id, 1 the mapping fails, 12 repeats of the line before.
	out, code := e.run(t, "ingest", "--url", url, "--key", key, "--batch", "250", file)
	for _, w := range []string{"applied  1184", "failed  1", "duplicate  12", "rejected  2", "line 11: rejected: the event has no id", "line 701: rejected",
		"line 901: failed: quantity"} {
		if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(w), " ")) {
			t.Errorf("ingest output lacks %q", w)
		}
	}
	if code != 3 {
		t.Errorf("ingest with rejected lines: exit %d, want 3\n%s", code, out)
	}
	sum := func() int64 {
		var n int64
		e2e.OpenRO(t, filepath.Join(e.dir, "data", "hookledger.db")).QueryRow(`SELECT COALESCE(SUM(quantity), 0) FROM metered_usage WHERE provider = 'api:import'`).Scan(&n)
		return n
	}
	if got := sum(); got != want*1_000_000 {
		t.Fatalf("sum %d, want %d", got, want*1_000_000)
	}
	// The same file again, from stdin: every stored event is a duplicate.
	// --max-body 3000: about 22 lines a request instead of --batch's 500.
	cmd := testenv.Command(bin, e.dir, e.env, "ingest", "--url", url, "--key", key, "--format", "json", "--max-body", "3000", "-")
	f, _ := os.Open(file)
	defer f.Close()
	cmd.Stdin = f
	raw, _ := cmd.Output()
	var s struct {
		Events   int            `json:"events"`
		Requests int            `json:"requests"`
		Counts   map[string]int `json:"counts"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.Counts["duplicate"] != 1197 || s.Counts["applied"] != 0 || s.Events != 1199 || s.Requests < 40 {
		t.Fatalf("again: %v %+v\n%s", err, s, raw)
	}
	if got := sum(); got != want*1_000_000 {
		t.Fatalf("again: sum %d, want %d", got, want*1_000_000)
	}

	// A rate-limited key: ingest waits Retry-After and sends the batch again.
	slow := e.createKey(t, "slow", "--rate", "1")
	start := time.Now()
	out, code = e.run(t, "ingest", "--url", url, "--key", slow, "--batch", "400", file)
	if code != 3 || !strings.Contains(strings.Join(strings.Fields(out), " "), "applied 1184") || time.Since(start) < 2*time.Second {
		t.Fatalf("ingest with a key limited to 1 request/s: exit %d after %s\n%s", code, time.Since(start), out)
	}

	// docs/ingest.md's example client, built and run as written.
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	client := filepath.Join(e.dir, "ingest-client")
	if out, err := testenv.Run("go", root, nil, "build", "-o", client, "./examples/ingest-client"); err != nil {
		t.Fatalf("build the example client: %v\n%s", err, out)
	}
	for _, want := range []string{`"applied":2`, `"duplicate":2`} {
		out, err := testenv.Run(client, e.dir, []string{"HOOKLEDGER_URL=" + url, "HOOKLEDGER_API_KEY=" + key})
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("example client: %v, want %s in\n%s", err, want, out)
		}
	}
}

func testIngestKill9(t *testing.T, bin string) {
	e := newIngestEnv(t, bin)
	cmd, _, url := testenv.StartServe(t, bin, e.dir, e.env)
	key := e.createKey(t, "load")
	var mu sync.Mutex
	acked := map[string]bool{} // event_id -> answered 2xx
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for c := range 8 {
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				var evs [][]byte
				var ids []string
				for i := range 100 {
					id := fmt.Sprintf("c%d-%d-%d", c, n, i)
					evs = append(evs, testenv.CloudEvent("load", id, fmt.Sprintf("cus_%d", i%5), "api_requests", "1"))
					ids = append(ids, ingest.EventID("load", id))
				}
				r, err := postBatch(url, key, testenv.Batch(evs...))
				if err != nil {
					return // serve is gone
				}
				if r/100 == 2 {
					mu.Lock()
					for _, id := range ids {
						acked[id] = true
					}
					mu.Unlock()
				}
			}
		})
	}
	await.Eventually(t, 30*time.Second, "a few batches acknowledged", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 500
	})
	cmd.Process.Kill() // SIGKILL mid-load
	cmd.Wait()
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("no batch was acknowledged before the kill")
	}
	_, _, url = testenv.StartServe(t, bin, e.dir, e.env)
	db := e2e.OpenRO(t, filepath.Join(e.dir, "data", "hookledger.db"))
	rows, err := db.Query(`SELECT event_id, COUNT(*) FROM metered_usage WHERE provider = 'api:load' GROUP BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		rows.Scan(&id, &n)
		stored[id] = n
	}
	rows.Close()
	missing, twice := 0, 0
	for id := range acked {
		if stored[id] != 1 {
			missing++
		}
	}
	for _, n := range stored {
		if n > 1 {
			twice++
		}
	}
	if missing > 0 || twice > 0 {
		t.Fatalf("after kill -9: %d acknowledged events not stored exactly once, %d stored twice (of %d acknowledged, %d stored)",
			missing, twice, len(acked), len(stored))
	}
	if out, code := e.run(t, "verify"); code != 0 {
		t.Fatalf("verify after kill -9: exit %d\n%s", code, out)
	}
	t.Logf("%d events acknowledged before kill -9, %d stored, each exactly once", len(acked), len(stored))
}

func postBatch(url, key string, body []byte) (int, error) {
	req, err := newEventsRequest(url, key, body)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var rep struct {
		Counts map[string]int `json:"counts"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		return 0, err // cut off mid-answer: not an acknowledgement
	}
	return resp.StatusCode, nil
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

func newEventsRequest(url, key string, body []byte) (*http.Request, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/events", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", ingest.MediaCloudEventBatch)
	req.Header.Set("Authorization", "Bearer "+key)
	return req, nil
}
