package replication_test

// End-to-end tests of serve's start and stop against the built binary
// (issue 12, "Starting and stopping must never strand webhooks", and issue
// 13's "serve has side effects before it fails"): serve starts and takes
// webhooks while its replica is unreachable and catches the replica up when
// it returns; one serve per data directory; no replication onto a replica
// that is ahead of the local database; nothing created before validation.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/cli"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

func TestLifecycle(t *testing.T) {
	bin := testenv.Binary(t)
	testenv.Parallel(t, bin, []testenv.Case{
		{Name: "one serve per data directory", Run: testDataDirLock},
		{Name: "file replica unreachable at start, local mode", Run: func(t *testing.T, bin string) { testReplicaUnreachableAtStart(t, bin, false) }},
		{Name: "file replica unreachable at start, ACK-after-replica", Run: func(t *testing.T, bin string) { testReplicaUnreachableAtStart(t, bin, true) }},
		{Name: "s3 endpoint refusing connections at start", Run: testS3RefusedAtStart},
		{Name: "restore-if-missing with the replica unreachable", Run: testRestoreIfMissingUnreachable},
		{Name: "replica ahead of the local database", Run: testReplicaAhead},
		{Name: "nothing created before validation", Run: testNoSideEffectsBeforeValidation},
	})
}

// withAdmin writes hookledger.yml with the default provider and an admin
// listener, and returns a function that GETs an admin path.
func withAdmin(t *testing.T, e *replEnv) func(path string) (int, string) {
	t.Helper()
	const token = "lifecycle-admin-token-0123456789"
	addr := testenv.FreeAddr(t)
	if err := os.WriteFile(e.path("hookledger.yml"), fmt.Appendf(nil, `admin:
  listen: %s
  tokens: [%q]
providers:
  - name: default
    scheme: standard
    secrets: [%q]
`+testenv.UsageYAML, addr, token, e2e.Secret), 0o600); err != nil {
		t.Fatal(err)
	}
	return func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// restoredReceipts restores the replica's latest state into a scratch file
// and returns the event ids of its receipts, or nil if it cannot.
func (e *replEnv) restoredReceipts(t *testing.T, name string) []string {
	t.Helper()
	out := e.path(name)
	os.Remove(out)
	if _, err := e.run("restore", "-o", out); err != nil {
		return nil
	}
	rows, err := e2e.OpenRO(t, out).Query(`SELECT event_id FROM receipts ORDER BY event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		ids = append(ids, id)
	}
	return ids
}

// errorLines counts ERROR log lines whose message contains msg.
func errorLines(stderr, msg string) int {
	n := 0
	for _, line := range strings.Split(stderr, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["level"] == "ERROR" && strings.Contains(fmt.Sprint(m["msg"]), msg) {
			n++
		}
	}
	return n
}

// A second serve on the same data directory is refused with the PID of the
// one holding it; kill -9 leaves no stale lock; restore will not write into
// the directory of a running serve, while read-only commands still work.
func testDataDirLock(t *testing.T, bin string) {
	e := newReplEnv(t, bin, time.Second, time.Second)
	first, stderr, url := e.serve()
	if code, body := e2e.Post(t, url, "evt_lock_1"); code != 200 {
		t.Fatalf("first serve: %d %s", code, body)
	}
	out, err := testenv.RunFor(t, bin, e.dir, e.env, "serve", "--listen", testenv.FreeAddr(t))
	pid := strconv.Itoa(first.Process.Pid)
	if err == nil || !strings.Contains(out, "pid "+pid) || !strings.Contains(out, "data") {
		t.Fatalf("second serve on the same data directory: %v; want a refusal naming pid %s\n%s", err, pid, out)
	}
	out, err = testenv.RunFor(t, bin, e.dir, e.env, "restore", "-o", e.path("data", "other.db"))
	if err == nil || !strings.Contains(out, "pid "+pid) {
		t.Errorf("restore into the data directory of a running serve: %v\n%s", err, out)
	}
	if _, err := os.Stat(e.path("data", "other.db")); !os.IsNotExist(err) {
		t.Errorf("the refused restore wrote its output")
	}
	if out, err := testenv.RunFor(t, bin, e.dir, e.env, "usage", "--format", "json"); err != nil || !strings.Contains(out, "cus_1") {
		t.Errorf("usage beside a running serve: %v\n%s", err, out)
	}
	if out, err := testenv.RunFor(t, bin, e.dir, e.env, "migrate"); err == nil || !strings.Contains(out, "pid "+pid) {
		t.Errorf("migrate beside a running serve: %v\n%s", err, out)
	}

	first.Process.Kill() // SIGKILL: the OS releases the lock
	first.Wait()
	_ = stderr
	_, _, url = e.serve()
	if code, body := e2e.Post(t, url, "evt_lock_1"); code != 200 || !strings.Contains(body, `"duplicate":true`) {
		t.Fatalf("after kill -9 and a restart: %d %s; want the event stored before the kill as a duplicate", code, body)
	}
	n := testenv.CountAttempts(t, e.db(), func(a schema.Attempt) bool { return a.EventID == "evt_lock_1" })
	if n != 2 {
		t.Errorf("%d delivery attempts for evt_lock_1; want 2 (one per serve)", n)
	}
}

// A file replica whose directory became a file: serve starts, takes webhooks
// (local mode: 200; ACK-after-replica: 503 until the replica is back), says
// replication is down, and catches the replica up once it is back.
func testReplicaUnreachableAtStart(t *testing.T, bin string, ack bool) {
	e := newReplEnv(t, bin, 200*time.Millisecond, 200*time.Millisecond)
	admin := withAdmin(t, e)
	if err := os.WriteFile(e.path("replica"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	var args []string
	if ack {
		args = append(args, "--ack-after-replica")
	}
	begin := time.Now()
	cmd, stderr, url := e.serve(args...)
	t.Logf("healthy %v after start with the replica unreachable", time.Since(begin).Round(time.Millisecond))

	ids := []string{"evt_down_1", "evt_down_2", "evt_down_3"}
	for _, id := range ids {
		code, body := e2e.Post(t, url, id)
		if want := map[bool]int{false: 200, true: 503}[ack]; code != want {
			t.Fatalf("%s with the replica down: %d %s; want %d", id, code, body, want)
		}
	}
	var stored int
	e2e.OpenRO(t, e.db()).QueryRow(`SELECT COUNT(*) FROM receipts WHERE event_id LIKE 'evt\_down\_%' ESCAPE '\'`).Scan(&stored)
	if stored != 3 {
		t.Fatalf("%d of 3 events stored locally while the replica was down", stored)
	}
	if code, body := admin("/readyz"); !strings.Contains(body, "not a directory") {
		t.Errorf("admin /readyz with the replica down: %d %s; want the replication error", code, body)
	} else if want := map[bool]int{false: 200, true: 503}[ack]; code != want {
		t.Errorf("admin /readyz with the replica down: %d; want %d (ACK mode is unready, local mode is not)", code, want)
	}
	if _, body := admin("/metrics"); !strings.Contains(body, "\nhookledger_replication_up 0\n") {
		t.Errorf("metrics with the replica down lack hookledger_replication_up 0")
	}
	await.Eventually(t, 45*time.Second, "an ERROR line saying replication is down", func() bool { return errorLines(stderr.String(), "replication is down") > 0 })
	time.Sleep(3 * time.Second) // several retries: still one ERROR line (rate-limited)
	if n := errorLines(stderr.String(), "replication is down"); n != 1 {
		t.Errorf("%d ERROR lines for one outage in a few seconds; want 1 (rate-limited)\n%s", n, stderr)
	}

	if err := os.Remove(e.path("replica")); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	took := await.Eventually(t, 45*time.Second, "the replica catching up", func() bool { return len(e.restoredReceipts(t, "probe.db")) == 3 })
	t.Logf("replica caught up %v after it became reachable", took.Round(time.Millisecond))
	_ = back
	if ack {
		for _, id := range ids {
			var code int
			var body string
			await.Eventually(t, 45*time.Second, "a retry acknowledged", func() bool { code, body = e2e.Post(t, url, id); return code == 200 })
			if !strings.Contains(body, `"duplicate":true`) {
				t.Errorf("retry of %s: %s; want a duplicate (it was committed locally)", id, body)
			}
		}
	}
	await.Eventually(t, 45*time.Second, "hookledger_replication_up 1", func() bool {
		_, body := admin("/metrics")
		return strings.Contains(body, "\nhookledger_replication_up 1\n")
	})
	// The recovery line comes from the replica-status loop, which looks
	// again every few seconds while the replica is down: wait for it
	// rather than stop serve before its next look.
	await.Eventually(t, 45*time.Second, "serve logging the recovery", func() bool { return strings.Contains(stderr.String(), "replication recovered") })
	e.stop(cmd, stderr)
	if got := e.restoredReceipts(t, "final.db"); len(got) != 3 {
		t.Errorf("the replica holds %v after shutdown; want the 3 events", got)
	}
}

// An S3 endpoint that refuses connections: serve starts promptly and takes
// webhooks; once an S3 server listens there, the replica catches up.
func testS3RefusedAtStart(t *testing.T, bin string) {
	addr := testenv.FreeAddr(t) // nothing listens here yet
	e := newReplEnvYML(t, bin, fmt.Sprintf(`dbs:
  - path: ./data/hookledger.db
    monitor-interval: 200ms
    replica:
      type: s3
      bucket: hookledger
      path: lifecycle
      endpoint: http://%s
      region: us-east-1
      access-key-id: fake-key
      secret-access-key: fake-secret
      sync-interval: 200ms
`, addr), "AWS_CA_BUNDLE=")
	begin := time.Now()
	cmd, stderr, url := e.serve()
	startup := time.Since(begin)
	t.Logf("serve healthy %v after start with the S3 endpoint refusing connections", startup.Round(time.Millisecond))
	if startup > 12*time.Second {
		t.Errorf("serve took %v to start with S3 down; it must not wait for the replica", startup)
	}
	for i := range 3 {
		if code, body := e2e.Post(t, url, fmt.Sprintf("evt_s3_%d", i)); code != 200 {
			t.Fatalf("with S3 down (local mode): %d %s", code, body)
		}
	}

	backend := gofakes3.New(s3mem.New(), gofakes3.WithAutoBucket(true), gofakes3.WithLogger(gofakes3.DiscardLog()))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	srv := &http.Server{Handler: backend.Server()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	took := await.Eventually(t, 45*time.Second, "the S3 replica catching up", func() bool { return len(e.restoredReceipts(t, "probe.db")) == 3 })
	t.Logf("S3 replica caught up %v after the endpoint came up", took.Round(time.Millisecond))
	e.stop(cmd, stderr)
}

// --restore-if-missing on a new machine whose replica is unreachable: an
// empty database would fork the replica's history, so serve refuses to start
// and creates no database.
func testRestoreIfMissingUnreachable(t *testing.T, bin string) {
	e := newReplEnv(t, bin, time.Second, time.Second)
	if err := os.WriteFile(e.path("replica"), []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := testenv.RunFor(t, bin, e.dir, e.env, "serve", "--listen", testenv.FreeAddr(t), "--restore-if-missing")
	if err == nil || !strings.Contains(out, "restore-if-missing") || !strings.Contains(out, "not a directory") {
		t.Fatalf("serve --restore-if-missing with the replica unreachable: %v\n%s", err, out)
	}
	if _, err := os.Stat(e.db()); !os.IsNotExist(err) {
		t.Errorf("serve created a database it could not restore")
	}
}

// A database behind its replica (restored at an older point) is refused
// before anything is replicated, the replica's latest state is unchanged;
// a new, empty database on a replica with data likewise. --replica-takeover
// moves the old replica aside (kept whole) and replicates the local state.
func testReplicaAhead(t *testing.T, bin string) {
	e := newReplEnv(t, bin, 200*time.Millisecond, 200*time.Millisecond)
	cmd, stderr, url := e.serve("--ack-after-replica")
	for i := range 5 {
		e2e.Post(t, url, fmt.Sprintf("evt_a_%d", i))
	}
	var st cli.ReplicaStatusJSON
	if err := json.Unmarshal([]byte(e.mustRun("replica", "status", "--format", "json")), &st); err != nil {
		t.Fatal(err)
	}
	older := st.ReplicaTXID
	for i := 5; i < 10; i++ {
		e2e.Post(t, url, fmt.Sprintf("evt_a_%d", i))
	}
	e.stop(cmd, stderr)
	latest := e.restoredReceipts(t, "latest-before.db")
	if len(latest) != 10 {
		t.Fatalf("the replica holds %d events; want 10", len(latest))
	}
	wantState, _ := ledgerDigest(t, e.path("latest-before.db"))

	// Machine B: restored at the older point, started on the shared replica.
	e.removeDB()
	e.mustRun("restore", "--txid", older)
	out, err := testenv.RunFor(t, bin, e.dir, e.env, "serve", "--listen", testenv.FreeAddr(t))
	if err == nil {
		t.Fatalf("serve on a database behind its replica started:\n%s", out)
	}
	for _, want := range []string{"replica holds later transactions", older, "--replica-takeover", "hookledger restore"} {
		if !strings.Contains(out, want) {
			t.Errorf("refusal does not mention %q:\n%s", want, out)
		}
	}
	if got, _ := ledgerDigest(t, e.path(restoreAgain(t, e, "latest-after-refusal.db"))); got != wantState {
		t.Fatalf("the refused serve changed the replica's latest state")
	}

	// A new machine without --restore-if-missing: an empty database.
	e.removeDB()
	out, err = testenv.RunFor(t, bin, e.dir, e.env, "serve", "--listen", testenv.FreeAddr(t))
	if err == nil || !strings.Contains(out, "replica holds later transactions") {
		t.Fatalf("serve with a new empty database on a replica with data: %v\n%s", err, out)
	}
	if got, _ := ledgerDigest(t, e.path(restoreAgain(t, e, "latest-after-empty.db"))); got != wantState {
		t.Fatalf("the refused serve changed the replica's latest state")
	}

	// The operator chooses B's state: take the replica over.
	e.removeDB()
	e.mustRun("restore", "--txid", older)
	cmd, stderr, url = e.serve("--ack-after-replica", "--replica-takeover")
	if code, body := e2e.Post(t, url, "evt_b_1"); code != 200 {
		t.Fatalf("after takeover: %d %s", code, body)
	}
	e.stop(cmd, stderr)
	m := regexp.MustCompile(`"msg":"replica takeover[^\n]*"archive":"file:([^"]+)"`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("takeover did not say where the old replica went:\n%s", stderr)
	}
	archive := m[1]
	got := e.restoredReceipts(t, "latest-after-takeover.db")
	if len(got) != 6 || got[len(got)-1] != "evt_b_1" {
		t.Errorf("after takeover the replica holds %v; want the 5 older events and evt_b_1", got)
	}
	// The old history is whole where the takeover moved it.
	old := newReplEnvYML(t, bin, fmt.Sprintf("dbs:\n  - path: ./data/hookledger.db\n    replica:\n      type: file\n      path: %s\n", archive))
	if ids := old.restoredReceipts(t, "archived.db"); len(ids) != 10 {
		t.Errorf("the archived replica %s restores %d events; want 10", archive, len(ids))
	}
}

// restoreAgain restores the latest state into e.path(name).
func restoreAgain(t *testing.T, e *replEnv, name string) string {
	t.Helper()
	e.mustRun("restore", "-o", e.path(name))
	return name
}

// serve validates its configuration, the litestream config, its listen and
// admin addresses and TLS files before it creates anything.
func testNoSideEffectsBeforeValidation(t *testing.T, bin string) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	const yml = "dbs:\n  - path: ./data/hookledger.db\n    replica:\n      type: file\n      path: ./replica\n"
	const provider = "providers:\n  - name: default\n    scheme: standard\n    secrets: [\"" + e2e.Secret + "\"]\n"
	for _, c := range []struct {
		name       string
		hookledger string // hookledger.yml; "" for none
		args       []string
		want       []string
	}{
		{"litestream.yml names another database", "", []string{"--listen", "127.0.0.1:0"},
			[]string{"dbs[0].path", "--no-replication"}},
		{"webhook port in use", "", []string{"--no-replication", "--listen", busy.Addr().String()},
			[]string{"listen", "address already in use"}},
		{"admin port in use", "admin:\n  listen: " + busy.Addr().String() + "\n  tokens: [\"0123456789abcdef0123\"]\n",
			[]string{"--no-replication", "--listen", "127.0.0.1:0"}, []string{"admin listen", "address already in use"}},
		{"admin refused", "admin:\n  listen: 0.0.0.0:0\n", []string{"--no-replication", "--listen", "127.0.0.1:0"},
			[]string{"not a loopback address"}},
		{"missing TLS files", "", []string{"--no-replication", "--listen", "127.0.0.1:0", "--tls-cert", "c.pem", "--tls-key", "k.pem"},
			[]string{"load TLS certificate"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "litestream.yml"), []byte(yml), 0o600)
			data := filepath.Join(t.TempDir(), "x")
			if c.hookledger != "" {
				os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(c.hookledger+provider), 0o600)
			}
			out, err := testenv.RunFor(t, bin, dir, nil, append([]string{"serve", "--data", data}, c.args...)...)
			if err == nil {
				t.Fatalf("exit 0:\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if strings.Contains(out, "Generated a signing secret") {
				t.Errorf("printed the secret banner before failing:\n%s", out)
			}
			if _, err := os.Stat(data); !os.IsNotExist(err) {
				t.Errorf("the failed serve created %s", data)
			}
		})
	}

	// --no-replication serves the other directory, with its banner.
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "litestream.yml"), []byte(yml), 0o600)
	data := filepath.Join(t.TempDir(), "x")
	cmd, stderr, url := testenv.StartServe(t, bin, dir, nil, "--data", data, "--no-replication")
	if !strings.Contains(stderr.String(), "Generated a signing secret") {
		t.Errorf("no banner on the first start:\n%s", stderr)
	}
	if resp, err := http.Get(url + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/readyz: %v %v", resp, err)
	}
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if _, err := os.Stat(filepath.Join(dir, "replica")); !os.IsNotExist(err) {
		t.Errorf("--no-replication replicated")
	}
	if _, err := os.Stat(filepath.Join(data, "hookledger.db")); err != nil {
		t.Errorf("no database in --data: %v", err)
	}
}
