package ops_test

// End-to-end tests for operating hookledger (issue 8): metrics after a
// scripted run, secrets and bodies kept out of logs, admin token rules at
// startup, HTTPS with a certificate reloaded on SIGHUP. Each runs the real
// binary as a subprocess, so signals and exit codes are the real ones.

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// Distinctive values that must never appear in a log line.
const (
	opsSecret     = "whsec_c2VjcmV0LW5ldmVyLWluLWxvZ3MtOTk3MzE="
	opsWrongKey   = "whsec_d3Jvbmcta2V5LWZvci10ZXN0cy0xMjM0NTY="
	opsAdminToken = "adm-token-never-in-logs-5d1e8c"
	opsBodyMarker = "BODY-MARKER-never-in-logs-42f0"
)

// TestOperating builds the binary once and runs the operating scenarios
// against it, in parallel: each has its own directory, ports and process.
func TestOperating(t *testing.T) {
	bin := testenv.ReleaseBinary(t)
	testenv.Parallel(t, bin, []testenv.Case{
		{Name: "metrics after a scripted run", Run: opsMetricsAfterScriptedRun},
		{Name: "logs never hold secrets or bodies", Run: opsLogsNeverHoldSecretsOrBodies},
		{Name: "chain head anchors in the log and metrics", Run: opsChainHeadAnchors},
		{Name: "startup refusals", Run: opsServeStartupRefusals},
		{Name: "non-loopback admin with token", Run: opsNonLoopbackAdminWithToken},
		{Name: "log level and format", Run: opsLogLevelAndFormat},
		{Name: "HTTPS end to end and reload on SIGHUP", Run: opsHTTPSEndToEndAndReloadOnSIGHUP},
		{Name: "totals beyond 64-bit micro-units are exact", Run: opsWideTotals},
	})
}

// opsConfig writes hookledger.yml with provider "acme"; extra is appended.
func opsConfig(t *testing.T, dir, extra string) string {
	t.Helper()
	yml := fmt.Sprintf(`listen: 127.0.0.1:0
data: %s
providers:
  - name: acme
    scheme: standard
    secrets: [%q]
usage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
`, filepath.Join(dir, "data"), opsSecret) + extra
	path := filepath.Join(dir, "hookledger.yml")
	if err := os.WriteFile(path, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// opsServer is a running `hookledger serve`.
type opsServer struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has exited
	err    error         // its exit error, once exited
	logs   *testenv.Buffer
	url    string // webhook listener
	admin  string // admin listener, "" if disabled
	dbPath string
}

// opsStart runs serve and waits for its "serving" log line, which carries
// the addresses it bound (the config asks for port 0).
func opsStart(t *testing.T, bin, dir string, env []string, args ...string) *opsServer {
	t.Helper()
	s := &opsServer{logs: &testenv.Buffer{}, dbPath: filepath.Join(dir, "data", schema.FileName)}
	s.cmd = testenv.Command(bin, dir, env, append([]string{"serve"}, args...)...)
	s.cmd.Stderr = s.logs
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s.exited = make(chan struct{})
	go func() { s.err = s.cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { s.cmd.Process.Kill(); <-s.exited })
	if slices.Contains(args, "--listen") {
		return s // the caller knows the address
	}
	deadline := time.After(20 * time.Second)
	for {
		for _, l := range opsLogLines(t, s.logs.String()) {
			switch l["msg"] {
			case "admin API":
				s.admin = "http://" + l["addr"].(string)
			case "serving":
				scheme := "http://"
				if l["tls"] == true {
					scheme = "https://"
				}
				s.url = scheme + l["addr"].(string)
				return s
			}
		}
		select {
		case <-s.exited:
			t.Fatalf("serve exited before serving:\n%s", s.logs)
		case <-deadline:
			t.Fatalf("serve did not start:\n%s", s.logs)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM and requires a clean exit.
func (s *opsServer) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		if s.err != nil {
			t.Fatalf("serve exited with %v after SIGTERM:\n%s", s.err, s.logs)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
}

// opsLogLines parses every complete stderr line as JSON (stderr is not a
// terminal, so the format must be JSON); a non-JSON line fails the test.
func opsLogLines(t *testing.T, logs string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		lines = append(lines, m)
	}
	return lines
}

// delivery is one scripted webhook request.
type delivery struct {
	provider, id, typ, body, secret, requestID string
	signedAt                                   time.Time
}

func opsEvent(id, typ, quantity string) string {
	return fmt.Sprintf(`{"id":%q,"type":%q,"data":{"customer":"cus_1","meter":"api_requests","quantity":%s,"note":%q}}`,
		id, typ, quantity, opsBodyMarker)
}

// send signs d with the Standard Webhooks scheme and posts it.
func (d delivery) send(t *testing.T, client *http.Client, base string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/webhooks/"+d.provider, strings.NewReader(d.body))
	if d.signedAt.IsZero() {
		d.signedAt = time.Now()
	}
	if err := testenv.SignStandard(req.Header, d.secret, d.id, d.typ, []byte(d.body), d.signedAt); err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", d.requestID)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// opsScript is the scripted run: every outcome once or more.
var opsScript = []struct {
	d    delivery
	code int
}{
	{delivery{provider: "acme", id: "evt_1", typ: "usage.recorded", body: opsEvent("evt_1", "usage.recorded", "2"), secret: opsSecret, requestID: "req-1"}, 200},
	{delivery{provider: "acme", id: "evt_2", typ: "usage.recorded", body: opsEvent("evt_2", "usage.recorded", "0.5"), secret: opsSecret, requestID: "req-2"}, 200},
	// A mapped type whose payload does not fit: kept as failed.
	{delivery{provider: "acme", id: "evt_3", typ: "usage.recorded", body: opsEvent("evt_3", "usage.recorded", `"lots"`), secret: opsSecret, requestID: "req-3"}, 200},
	// An unmapped type: kept as ignored.
	{delivery{provider: "acme", id: "evt_4", typ: "customer.updated", body: opsEvent("evt_4", "customer.updated", "1"), secret: opsSecret, requestID: "req-4"}, 200},
	{delivery{provider: "acme", id: "evt_1", typ: "usage.recorded", body: opsEvent("evt_1", "usage.recorded", "2"), secret: opsSecret, requestID: "req-5"}, 200},
	{delivery{provider: "acme", id: "evt_2", typ: "usage.recorded", body: opsEvent("evt_2", "usage.recorded", "7"), secret: opsSecret, requestID: "req-6"}, 200},
	{delivery{provider: "acme", id: "evt_5", typ: "usage.recorded", body: opsEvent("evt_5", "usage.recorded", "1"), secret: opsWrongKey, requestID: "req-7"}, 401},
	{delivery{provider: "acme", id: "evt_6", typ: "usage.recorded", body: opsEvent("evt_6", "usage.recorded", "1"), secret: opsSecret, requestID: "req-8", signedAt: time.Now().Add(-time.Hour)}, 401},
	{delivery{provider: "nope", id: "evt_7", typ: "usage.recorded", body: opsEvent("evt_7", "usage.recorded", "1"), secret: opsSecret, requestID: "req-9"}, 404},
}

// opsRun starts serve with an admin token and plays opsScript.
func opsRun(t *testing.T, bin string) *opsServer {
	t.Helper()
	dir := t.TempDir()
	cfg := opsConfig(t, dir, "admin:\n  listen: 127.0.0.1:0\n")
	// At debug: a line per delivery attempt, beside the summary.
	s := opsStart(t, bin, dir, []string{"HOOKLEDGER_ADMIN_TOKEN=" + opsAdminToken, "HOOKLEDGER_LOG_LEVEL=debug"}, "--config", cfg)
	if s.admin == "" {
		t.Fatalf("admin listener not started:\n%s", s.logs)
	}
	for i, step := range opsScript {
		if code := step.d.send(t, http.DefaultClient, s.url); code != step.code {
			t.Fatalf("step %d (%s %s): status %d, want %d\n%s", i+1, step.d.provider, step.d.id, code, step.code, s.logs)
		}
	}
	return s
}

func opsScrape(t *testing.T, adminURL, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, _ := http.NewRequest("GET", adminURL+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return resp.StatusCode, nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("Prometheus text parser: %v", err)
	}
	return resp.StatusCode, mfs
}

// opsValue sums the counter/gauge samples of name whose labels include want.
func opsValue(t *testing.T, mfs map[string]*dto.MetricFamily, name string, want map[string]string) (float64, int) {
	t.Helper()
	mf := mfs[name]
	if mf == nil {
		t.Fatalf("%s is not exported", name)
	}
	var sum float64
	var n int
next:
	for _, m := range mf.Metric {
		for _, l := range m.Label {
			if v, ok := want[l.GetName()]; ok && v != l.GetValue() {
				continue next
			}
		}
		n++
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum, n
}

func opsMetricsAfterScriptedRun(t *testing.T, bin string) {
	start := time.Now()
	s := opsRun(t, bin)

	for _, tok := range []string{"", "wrong-token-0123456789"} {
		if code, _ := opsScrape(t, s.admin, tok); code != http.StatusUnauthorized {
			t.Errorf("/metrics with token %q: %d, want 401", tok, code)
		}
	}
	code, mfs := opsScrape(t, s.admin, opsAdminToken)
	if code != 200 {
		t.Fatalf("/metrics with the token: %d", code)
	}

	type lbl = map[string]string
	for _, c := range []struct {
		name   string
		labels lbl
		want   float64
	}{
		{"hookledger_deliveries_total", lbl{"provider": "acme", "outcome": "inserted", "reason": ""}, 4},
		{"hookledger_deliveries_total", lbl{"provider": "acme", "outcome": "duplicate", "reason": ""}, 1},
		{"hookledger_deliveries_total", lbl{"provider": "acme", "outcome": "payload_mismatch", "reason": ""}, 1},
		{"hookledger_deliveries_total", lbl{"provider": "acme", "outcome": "rejected", "reason": "bad_signature"}, 1},
		{"hookledger_deliveries_total", lbl{"provider": "acme", "outcome": "rejected", "reason": "timestamp_out_of_tolerance"}, 1},
		{"hookledger_deliveries_total", lbl{"provider": "_unknown", "outcome": "rejected", "reason": "unknown_provider"}, 1},
		{"hookledger_deliveries_total", nil, float64(len(opsScript))},
		{"hookledger_delivery_duration_seconds", nil, float64(len(opsScript))}, // observations
		{"hookledger_delivery_duration_seconds", lbl{"provider": "acme", "outcome": "inserted"}, 4},
		{"hookledger_receipts", lbl{"status": "applied"}, 2},
		{"hookledger_receipts", lbl{"status": "failed"}, 1},
		{"hookledger_receipts", lbl{"status": "ignored"}, 1},
		{"hookledger_ledger_rows", nil, 2},
		{"hookledger_db_stats_up", nil, 1},
		{"hookledger_writer_queue_depth", nil, 0},
		{"hookledger_writer_queue_capacity", nil, 4096},
		{"hookledger_build_info", lbl{"version": testenv.ReleaseVersion, "commit": testenv.ReleaseCommit}, 1},
	} {
		if got, _ := opsValue(t, mfs, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if _, n := opsValue(t, mfs, "hookledger_deliveries_total", lbl{"provider": "nope"}); n != 0 {
		t.Error("an unconfigured provider name from the URL became a label value")
	}

	// The gauges agree with the rows in the database file.
	db, err := schema.Open(context.Background(), s.dbPath, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var receipts, ledgerRows, attempts int
	var micro int64
	db.Read.Get(&receipts, `SELECT COUNT(*) FROM receipts`)
	db.Read.Get(&ledgerRows, `SELECT COUNT(*) FROM metered_usage`)
	db.Read.Get(&micro, `SELECT COALESCE(SUM(quantity), 0) FROM metered_usage`)
	if n, err := db.CountAttempts(context.Background()); err == nil {
		attempts = int(n)
	}
	if got, _ := opsValue(t, mfs, "hookledger_receipts", nil); int(got) != receipts || receipts != 4 {
		t.Errorf("receipts: metric %v, table %d, want 4", got, receipts)
	}
	if ledgerRows != 2 || micro != 2_500_000 {
		t.Errorf("ledger: %d rows totalling %d micro-units, want 2 and 2.5 units", ledgerRows, micro)
	}
	// Every authenticated delivery went through the writer exactly once.
	items := mfs["hookledger_writer_batch_size"].Metric[0].GetHistogram()
	commits := mfs["hookledger_writer_commit_duration_seconds"].Metric[0].GetHistogram()
	if attempts != 6 || items.GetSampleSum() < float64(attempts) {
		t.Errorf("writer items %v, delivery attempts %d (want 6)", items.GetSampleSum(), attempts)
	}
	if items.GetSampleCount() == 0 || commits.GetSampleCount() != items.GetSampleCount() {
		t.Errorf("batches %d, commits timed %d", items.GetSampleCount(), commits.GetSampleCount())
	}
	age, _ := opsValue(t, mfs, "hookledger_oldest_failed_receipt_age_seconds", nil)
	if age < 0 || age > time.Since(start).Seconds()+1 {
		t.Errorf("oldest failed receipt age %v s, the test began %v ago", age, time.Since(start))
	}
	for _, name := range []string{"go_goroutines", "go_gc_duration_seconds", "process_start_time_seconds", "process_resident_memory_bytes", "go_sql_open_connections"} {
		if mfs[name] == nil {
			t.Errorf("%s not exported", name)
		}
	}

	// The admin /readyz names the checks; the public one too, without detail.
	for _, u := range []string{s.url + "/readyz", s.admin + "/readyz"} {
		req, _ := http.NewRequest("GET", u, nil)
		req.Header.Set("Authorization", "Bearer "+opsAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"database":"ok"`) || !strings.Contains(string(body), `"migrations":"ok"`) {
			t.Errorf("%s: %d %s", u, resp.StatusCode, body)
		}
	}
	s.stop(t)
}

func opsLogsNeverHoldSecretsOrBodies(t *testing.T, bin string) {
	s := opsRun(t, bin)
	s.stop(t)
	logs := s.logs.String()

	forbidden := []string{opsSecret, strings.TrimPrefix(opsSecret, "whsec_"), opsWrongKey, strings.TrimPrefix(opsWrongKey, "whsec_"),
		opsAdminToken, opsBodyMarker, "cus_1"}
	for _, st := range opsScript {
		forbidden = append(forbidden, st.d.body)
	}
	for _, f := range forbidden {
		if strings.Contains(logs, f) {
			t.Errorf("logs contain %q", f)
		}
	}

	// One line per attempt, with what an operator needs to follow it.
	byReq := map[string]map[string]any{}
	for _, l := range opsLogLines(t, logs) {
		if l["msg"] != "delivery" {
			continue
		}
		id, _ := l["request_id"].(string)
		if byReq[id] != nil {
			t.Errorf("two delivery lines for %s", id)
		}
		byReq[id] = l
		for _, k := range []string{"time", "level", "provider", "outcome", "status", "latency_ms"} {
			if _, ok := l[k]; !ok {
				t.Errorf("%s: delivery line without %s: %v", id, k, l)
			}
		}
	}
	if len(byReq) != len(opsScript) {
		t.Fatalf("%d delivery lines for %d attempts:\n%s", len(byReq), len(opsScript), logs)
	}
	for i, st := range opsScript {
		l := byReq[st.d.requestID]
		if int(l["status"].(float64)) != st.code {
			t.Errorf("step %d: logged status %v, answered %d", i+1, l["status"], st.code)
		}
		if st.code != 200 {
			if l["reason"] == nil || l["signature"] != nil {
				t.Errorf("step %d: a rejection logs its reason and no valid signature: %v", i+1, l)
			}
			continue
		}
		if l["event_id"] != st.d.id || l["event_type"] != st.d.typ || l["signature"] != "valid" {
			t.Errorf("step %d: %v", i+1, l)
		}
		if age, ok := l["signature_age_ms"].(float64); !ok || age < 0 || age > 60_000 {
			t.Errorf("step %d: signature_age_ms %v", i+1, l["signature_age_ms"])
		}
	}
	want := map[string]string{"req-1": "inserted", "req-5": "duplicate", "req-6": "payload_mismatch", "req-7": "rejected", "req-9": "rejected"}
	for id, outcome := range want {
		if byReq[id]["outcome"] != outcome {
			t.Errorf("%s: outcome %v, want %s", id, byReq[id]["outcome"], outcome)
		}
	}
	if byReq["req-7"]["reason"] != "bad_signature" || byReq["req-8"]["reason"] != "timestamp_out_of_tolerance" {
		t.Errorf("reasons: %v / %v", byReq["req-7"]["reason"], byReq["req-8"]["reason"])
	}

	// The summary, logged when serve stops (the minute had not passed):
	// one line per provider, adding up to the attempts, refusals summed by
	// reason at warn.
	requests, refused := 0, ""
	for _, l := range opsLogLines(t, logs) {
		if l["msg"] != "deliveries" {
			continue
		}
		requests += int(l["requests"].(float64))
		if r, ok := l["reasons"].(string); ok {
			refused += r + " "
			if l["level"] != "WARN" {
				t.Errorf("a summary with refusals at %v: %v", l["level"], l)
			}
		}
	}
	if requests != len(opsScript) || !strings.Contains(refused, "bad_signature:") || !strings.Contains(refused, "timestamp_out_of_tolerance:") {
		t.Errorf("the summaries count %d requests (want %d), refusals %q", requests, len(opsScript), refused)
	}
}

func opsServeStartupRefusals(t *testing.T, bin string) {
	for _, c := range []struct {
		name  string
		admin string
		env   []string
		args  []string
		want  []string
	}{
		{"non-loopback admin without token", "admin:\n  listen: 0.0.0.0:0\n", nil, nil,
			[]string{"0.0.0.0:0 is not a loopback address", "HOOKLEDGER_ADMIN_TOKEN"}},
		{"all-interfaces admin without token", "admin:\n  listen: \":0\"\n", nil, nil,
			[]string{"is not a loopback address"}},
		{"tls cert without key", "", nil, []string{"--tls-cert", "cert.pem"},
			[]string{"--tls-cert and --tls-key must be given together"}},
		{"missing tls files", "", nil, []string{"--tls-cert", "cert.pem", "--tls-key", "key.pem"},
			[]string{"load TLS certificate cert.pem", "no such file"}},
		{"bad log level", "", nil, []string{"--log-level", "loud"},
			[]string{`--log-level "loud": want debug, info, warn or error`}},
		{"bad log format from env", "", []string{"HOOKLEDGER_LOG_FORMAT=xml"}, nil,
			[]string{`--log-format "xml": want json, text or auto`}},
		{"negative log summary", "", nil, []string{"--log-summary", "-1m"},
			[]string{"--log-summary -1m0s: a duration, 0 for never"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := opsConfig(t, dir, c.admin)
			cmd := exec.Command(bin, append([]string{"serve", "--config", cfg}, c.args...)...)
			cmd.Dir, cmd.Env = dir, append(testenv.Environ(), c.env...)
			done := make(chan struct{})
			var out []byte
			var err error
			go func() { out, err = cmd.CombinedOutput(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				cmd.Process.Kill()
				t.Fatal("serve started instead of refusing")
			}
			if err == nil {
				t.Fatalf("exit status 0:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// A non-loopback admin listener starts once a token is set, and answers 401
// without it.
func opsNonLoopbackAdminWithToken(t *testing.T, bin string) {
	dir := t.TempDir()
	cfg := opsConfig(t, dir, "admin:\n  listen: 0.0.0.0:0\n")
	s := opsStart(t, bin, dir, []string{"HOOKLEDGER_ADMIN_TOKEN=" + opsAdminToken}, "--config", cfg)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(s.admin, "http://"))
	local := "http://127.0.0.1:" + port
	if code, _ := opsScrape(t, local, ""); code != 401 {
		t.Errorf("no token: %d", code)
	}
	if code, _ := opsScrape(t, local, opsAdminToken); code != 200 {
		t.Errorf("token: %d", code)
	}
	s.stop(t)
}

// opsWaitHealthy polls /healthz (used when logs cannot announce the address).
func opsWaitHealthy(t *testing.T, s *opsServer, url string) {
	t.Helper()
	await.Eventually(t, 20*time.Second, "serve healthy", func() bool {
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

func opsLogLevelAndFormat(t *testing.T, bin string) {
	t.Run("warn drops info lines", func(t *testing.T) {
		dir := t.TempDir()
		addr := testenv.FreeAddr(t)
		s := opsStart(t, bin, dir, []string{"HOOKLEDGER_LOG_LEVEL=warn"}, "--config", opsConfig(t, dir, ""), "--listen", addr)
		opsWaitHealthy(t, s, "http://"+addr)
		if code := opsScript[0].d.send(t, http.DefaultClient, "http://"+addr); code != 200 {
			t.Fatalf("send: %d", code)
		}
		if code := opsScript[6].d.send(t, http.DefaultClient, "http://"+addr); code != 401 {
			t.Fatalf("bad signature: %d", code)
		}
		s.stop(t)
		// The refusal as it happened and the summary of it, at warn: no
		// info line.
		logs := s.logs.String()
		if strings.Count(logs, "\n") != 2 || !strings.Contains(logs, `"level":"WARN","msg":"delivery refused","provider":"acme"`) ||
			!strings.Contains(logs, `"reason":"bad_signature","source":"127.0.0.1"`) ||
			!strings.Contains(logs, `"level":"WARN","msg":"deliveries","provider":"acme"`) || !strings.Contains(logs, `"reasons":"bad_signature:1"`) {
			t.Errorf("--log-level warn logged:\n%s", logs)
		}
	})
	t.Run("text format", func(t *testing.T) {
		dir := t.TempDir()
		addr := testenv.FreeAddr(t)
		s := opsStart(t, bin, dir, nil, "--config", opsConfig(t, dir, ""), "--listen", addr, "--log-format", "text", "--log-level", "debug")
		opsWaitHealthy(t, s, "http://"+addr)
		if code := opsScript[0].d.send(t, http.DefaultClient, "http://"+addr); code != 200 {
			t.Fatalf("send: %d", code)
		}
		s.stop(t)
		logs := s.logs.String()
		for _, want := range []string{"level=INFO msg=serving addr=" + addr, "level=DEBUG msg=delivery provider=acme request_id=req-1 signature=valid", "level=INFO msg=deliveries provider=acme", "outcome=inserted status=200"} {
			if !strings.Contains(logs, want) {
				t.Errorf("text logs lack %q:\n%s", want, logs)
			}
		}
		if strings.HasPrefix(strings.TrimSpace(logs), "{") {
			t.Errorf("--log-format text wrote JSON:\n%s", logs)
		}
	})
}

// writeCert writes a self-signed ECDSA certificate for 127.0.0.1 and returns it.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: fmt.Sprintf("hookledger test %d", serial)},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	// Write to temporary names and rename, as certbot and friends do.
	for file, block := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(file+".tmp", pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".tmp", file); err != nil {
			t.Fatal(err)
		}
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// peerSerial opens a fresh TLS connection and returns the served certificate's serial.
func peerSerial(t *testing.T, addr string, roots *x509.CertPool) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	st := conn.ConnectionState()
	if st.Version < tls.VersionTLS12 {
		t.Errorf("negotiated TLS version %x", st.Version)
	}
	return st.PeerCertificates[0].SerialNumber.Int64()
}

func opsHTTPSEndToEndAndReloadOnSIGHUP(t *testing.T, bin string) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certA := writeCert(t, certFile, keyFile, 1001)
	cfg := opsConfig(t, dir, "admin:\n  listen: 127.0.0.1:0\n")
	s := opsStart(t, bin, dir, []string{"HOOKLEDGER_ADMIN_TOKEN=" + opsAdminToken, "HOOKLEDGER_TLS_KEY=" + keyFile},
		"--config", cfg, "--tls-cert", certFile)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("serving %s, want https", s.url)
	}
	addr := strings.TrimPrefix(s.url, "https://")

	roots := x509.NewCertPool()
	roots.AddCert(certA)
	// No keep-alive: every request is a new handshake, so it sees reloads.
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, DisableKeepAlives: true}}

	d := opsScript[0].d
	if code := d.send(t, client, s.url); code != 200 {
		t.Fatalf("HTTPS delivery: %d\n%s", code, s.logs)
	}
	if got := peerSerial(t, addr, roots); got != 1001 {
		t.Fatalf("serial %d, want 1001", got)
	}
	// TLS 1.1 and older are refused.
	if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, MaxVersion: tls.VersionTLS11}); err == nil {
		conn.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}
	// Plain HTTP to the HTTPS port does not deliver anything.
	if code := opsScript[1].d.send(t, http.DefaultClient, "http://"+addr); code == 200 {
		t.Error("plain HTTP accepted on the TLS listener")
	}

	// Replace the files, then SIGHUP: new handshakes get the new certificate.
	certB := writeCert(t, certFile, keyFile, 2002)
	roots.AddCert(certB)
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLog(t, s, "SIGHUP: TLS certificate reloaded")
	if got := peerSerial(t, addr, roots); got != 2002 {
		t.Fatalf("after reload: serial %d, want 2002", got)
	}
	d2 := opsScript[1].d
	if code := d2.send(t, client, s.url); code != 200 {
		t.Fatalf("HTTPS delivery after reload: %d", code)
	}

	// A broken key file on reload keeps the working certificate.
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitLog(t, s, "SIGHUP: TLS certificate not reloaded; still serving the previous one")
	if got := peerSerial(t, addr, roots); got != 2002 {
		t.Fatalf("after a failed reload: serial %d, want 2002", got)
	}

	_, mfs := opsScrape(t, s.admin, opsAdminToken)
	if ok, _ := opsValue(t, mfs, "hookledger_tls_reloads_total", map[string]string{"result": "ok"}); ok != 1 {
		t.Errorf("tls reloads ok = %v, want 1", ok)
	}
	if bad, _ := opsValue(t, mfs, "hookledger_tls_reloads_total", map[string]string{"result": "error"}); bad != 1 {
		t.Errorf("tls reloads error = %v, want 1", bad)
	}
	if exp, _ := opsValue(t, mfs, "hookledger_tls_certificate_expiry_timestamp_seconds", nil); int64(exp) != certB.NotAfter.Unix() {
		t.Errorf("expiry %v, want %d", exp, certB.NotAfter.Unix())
	}
	s.stop(t)

	db, err := schema.Open(context.Background(), s.dbPath, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ids []string
	db.Read.Select(&ids, `SELECT event_id FROM receipts ORDER BY event_id`)
	if strings.Join(ids, ",") != "evt_1,evt_2" {
		t.Errorf("receipts %v, want evt_1,evt_2 (both HTTPS deliveries, nothing over plain HTTP)", ids)
	}
}

func waitLog(t *testing.T, s *opsServer, msg string) {
	t.Helper()
	await.Eventually(t, 10*time.Second, "the log line "+msg, func() bool {
		for _, l := range opsLogLines(t, s.logs.String()) {
			if m, _ := l["msg"].(string); strings.HasPrefix(m, msg) {
				return true
			}
		}
		return false
	})
}

// opsChainHeadAnchors: serve logs the chain head as anchors at start and at
// shutdown and exports it as metrics; the log kept as it is anchors verify,
// which then catches the deletion of the newest (ignored) receipt even with
// the head row rewound to match.
func opsChainHeadAnchors(t *testing.T, bin string) {
	s := opsRun(t, bin) // receipts 1-4 (evt_4 ignored, the newest), ledger rows 1-2
	_, mfs := opsScrape(t, s.admin, opsAdminToken)
	for chain, want := range map[string]float64{"ledger": 2, "receipts": 4} {
		if got, _ := opsValue(t, mfs, "hookledger_chain_head_id", map[string]string{"chain": chain}); got != want {
			t.Errorf("hookledger_chain_head_id{chain=%q} = %v, want %v", chain, got, want)
		}
	}
	var infoAnchors []string
	for _, m := range mfs["hookledger_chain_head_info"].GetMetric() {
		for _, l := range m.Label {
			if l.GetName() == "anchor" {
				infoAnchors = append(infoAnchors, l.GetValue())
			}
		}
	}
	s.stop(t)
	var heads []map[string]any
	for _, l := range opsLogLines(t, s.logs.String()) {
		if l["msg"] == "chain head" {
			heads = append(heads, l)
		}
	}
	if len(heads) != 2 || heads[0]["receipts"] == heads[1]["receipts"] {
		t.Fatalf("want a chain head line at start and one at shutdown, got %v\n%s", heads, s.logs)
	}
	last := heads[1]
	slices.Sort(infoAnchors)
	// Every anchor the line carries (closes, credits, ledger, receipts) is a metric.
	want := []string{fmt.Sprint(last["closes"]), fmt.Sprint(last["credits"]), fmt.Sprint(last["ledger"]), fmt.Sprint(last["receipts"])}
	if slices.Sort(want); !slices.Equal(infoAnchors, want) {
		t.Errorf("metrics anchors %v, shutdown line %v", infoAnchors, want)
	}
	if !strings.HasPrefix(last["receipts"].(string), "receipts:4:") || !strings.HasPrefix(last["ledger"].(string), "ledger:2:") {
		t.Errorf("shutdown head: %v", last)
	}

	logFile := filepath.Join(t.TempDir(), "serve.log")
	if err := os.WriteFile(logFile, []byte(s.logs.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Dir(s.dbPath)
	verify := func() (string, error) {
		cmd := exec.Command(bin, "verify", "--data", data, "--anchors", logFile)
		cmd.Env = testenv.Environ()
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil {
		t.Fatalf("verify with serve's log as anchors: %v\n%s", err, out)
	}
	db, err := sqlx.Open("sqlite", "file:"+s.dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`DELETE FROM delivery_attempts WHERE event_id = 'evt_4'`,
		`DELETE FROM receipts WHERE event_id = 'evt_4'`,
		`DROP TRIGGER chain_head_forward_only`,
		`UPDATE chain_head SET receipt_id = 3, receipt_hash = (SELECT row_hash FROM receipts WHERE id = 3)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	out, err := verify()
	if err == nil || !strings.Contains(out, "anchor "+last["receipts"].(string)+": row 4 is missing") {
		t.Fatalf("verify after deleting the newest receipt: %v\n%s", err, out)
	}
}
