package replication_test

// End-to-end tests of replication and restore against the built binary: a
// real `serve` with Litestream embedded, real load, kill -9, and `restore`
// from the replica alone. The replication package has the unit tests,
// including the S3 replica (in-process gofakes3) and the same replica
// restored through both the S3 and the file client:
// replication.TestS3ReplicaAndFileClient and TestStockLitestreamRestores.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/cli"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/internal/testenv/fakes3"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/scheme"
)

// replEnv is a working directory with a litestream.yml for ./data/hookledger.db
// and a file replica in ./replica, outside the data directory, so deleting
// ./data loses the machine but not the backup.
type replEnv struct {
	t   *testing.T
	bin string
	dir string
	env []string // extra environment for every command
}

// newReplEnv writes litestream.yml with the given Litestream intervals.
func newReplEnv(t *testing.T, bin string, monitor, sync time.Duration) *replEnv {
	t.Helper()
	return newReplEnvYML(t, bin, fmt.Sprintf(`dbs:
  - path: ./data/hookledger.db
    monitor-interval: %s
    replica:
      type: file
      path: ./replica
      sync-interval: %s
shutdown-sync-timeout: 5s
`, monitor, sync))
}

func newReplEnvYML(t *testing.T, bin, yml string, env ...string) *replEnv {
	t.Helper()
	e := &replEnv{t: t, bin: bin, dir: t.TempDir(), env: append([]string{"HOOKLEDGER_SECRET=" + e2e.Secret}, env...)}
	if err := os.WriteFile(filepath.Join(e.dir, "litestream.yml"), []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *replEnv) path(p ...string) string { return filepath.Join(append([]string{e.dir}, p...)...) }
func (e *replEnv) db() string              { return e.path("data", "hookledger.db") }

func (e *replEnv) serve(args ...string) (*exec.Cmd, *testenv.Buffer, string) {
	e.t.Helper()
	return testenv.StartServe(e.t, e.bin, e.dir, e.env, args...)
}

// stop sends SIGTERM and expects a clean exit.
func (e *replEnv) stop(cmd *exec.Cmd, stderr *testenv.Buffer) {
	e.t.Helper()
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		e.t.Fatalf("serve exited with %v after SIGTERM\n%s", err, stderr)
	}
}

// run runs the binary in the working directory with the environment.
func (e *replEnv) run(args ...string) (string, error) {
	return testenv.Run(e.bin, e.dir, e.env, args...)
}

// mustRun is run that fails the test on error.
func (e *replEnv) mustRun(args ...string) string {
	e.t.Helper()
	out, err := e.run(args...)
	if err != nil {
		e.t.Fatalf("hookledger %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// removeDB deletes the database and every sidecar of it.
func (e *replEnv) removeDB() {
	e.t.Helper()
	db := e.db()
	for _, p := range []string{db, db + "-wal", db + "-shm", filepath.Join(filepath.Dir(db), ".hookledger.db-litestream")} {
		if err := os.RemoveAll(p); err != nil {
			e.t.Fatal(err)
		}
	}
}

// ledgerDigest hashes every row of every hookledger table (Litestream's own
// _litestream_* bookkeeping tables excluded) and counts rows per table.
func ledgerDigest(t *testing.T, path string) (string, map[string]int) {
	t.Helper()
	db := e2e.OpenRO(t, path)
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite\_%' ESCAPE '\' AND name NOT LIKE '\_litestream\_%' ESCAPE '\' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	h, counts := sha256.New(), map[string]int{}
	for _, table := range tables {
		rows, err := db.Query(`SELECT * FROM "` + table + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, fmt.Sprintf("%q", vals))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		slices.Sort(lines)
		fmt.Fprintf(h, "%s %d\n%s\n", table, len(lines), strings.Join(lines, "\n"))
		counts[table] = len(lines)
	}
	if len(tables) < 4 || counts["schema_migrations"] == 0 {
		t.Fatalf("%s has tables %v: not a hookledger database", path, tables)
	}
	return fmt.Sprintf("%x", h.Sum(nil)), counts
}

// restoredField reads one "name  value" line of `hookledger restore` output.
func restoredField(t *testing.T, out, name string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `\s+(\S+)$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("restore output has no %q line:\n%s", name, out)
	}
	return m[1]
}

// TestReplication runs every end-to-end case on one build of the binary.
func TestReplication(t *testing.T) {
	bin := testenv.Binary(t)
	t.Run("replicate-delete-restore", func(t *testing.T) { testReplicateDeleteRestore(t, bin) })
	t.Run("point-in-time", func(t *testing.T) { testPointInTimeRestore(t, bin) })
	t.Run("kill-9-ack-after-replica", func(t *testing.T) { testKillUnderLoad(t, bin, true) })
	t.Run("kill-9-default", func(t *testing.T) { testKillUnderLoad(t, bin, false) })
	t.Run("replica-down", func(t *testing.T) { testReplicaDown(t, bin) })
	t.Run("s3-replica-bounded-shutdown", func(t *testing.T) { testS3BoundedShutdown(t, bin) })
	t.Run("cli-errors", func(t *testing.T) { testReplicationCLIErrors(t, bin) })
}

// Replicate, stop, lose the database and every sidecar, restore: every
// acknowledged receipt and usage row is back and the digest over all ledger
// rows is identical. Then restore's refusals, --if-db-not-exists, --force,
// and serve --restore-if-missing on the same replica.
func testReplicateDeleteRestore(t *testing.T, bin string) {
	e := newReplEnv(t, bin, time.Second, time.Second)
	cmd, stderr, url := e.serve()
	plan, out := e2e.Load(t, url, "rt", 400, 8)
	if !out.Result.OK() {
		t.Fatalf("load: %+v", out.Result)
	}
	e.stop(cmd, stderr)
	if !strings.Contains(stderr.String(), "replication stopped") {
		t.Errorf("serve did not log its final replica sync:\n%s", stderr)
	}
	want, counts := ledgerDigest(t, e.db())
	if counts["receipts"] != 400 || counts["metered_usage"] != 400 || testenv.CountAttempts(t, e.db(), nil) != out.Delivered {
		t.Fatalf("before the loss: %v; want 400 receipts and usage rows, %d attempts", counts, out.Delivered)
	}

	e.removeDB()
	restored := e.mustRun("restore")
	if got, gotCounts := ledgerDigest(t, e.db()); got != want {
		t.Fatalf("restored ledger differs: %v, was %v", gotCounts, counts)
	}
	if restoredField(t, restored, "receipts") != "400" || restoredField(t, restored, "usage rows") != "400" ||
		restoredField(t, restored, "integrity") != "ok" {
		t.Errorf("restore output:\n%s", restored)
	}
	db, err := schema.Open(context.Background(), e.db(), schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := bench.Verify(context.Background(), db, "default", plan, out)
	if err != nil || !rep.OK() || rep.ExactlyOnce != 400 {
		t.Fatalf("acknowledged events after restore: %+v, %v", rep, err)
	}
	db.Close()
	e.mustRun("verify", "--data", "data") // hash chain, receipts ↔ usage, integrity

	// An existing database is never replaced without --force.
	if o, err := testenv.Run(e.bin, e.dir, nil, "restore"); err == nil || !strings.Contains(o, "already exists") || !strings.Contains(o, "--force") {
		t.Errorf("restore over an existing database: %v\n%s", err, o)
	}
	if o := e.mustRun("restore", "--if-db-not-exists"); !strings.Contains(o, "nothing restored") {
		t.Errorf("--if-db-not-exists: %s", o)
	}
	e.mustRun("restore", "--force")
	if got, _ := ledgerDigest(t, e.db()); got != want {
		t.Fatal("forced restore changed the ledger")
	}

	// A new machine: no database; serve restores it before taking traffic.
	e.removeDB()
	cmd, stderr, url = e.serve("--restore-if-missing")
	if !strings.Contains(stderr.String(), "restored the database from the replica") {
		t.Errorf("serve --restore-if-missing did not say it restored:\n%s", stderr)
	}
	if code, body := e2e.Post(t, url, bench.EventID("rt", 0)); code != 200 || !strings.Contains(body, `"duplicate":true`) {
		t.Errorf("an event from before the loss: %d %s; want a 200 duplicate", code, body)
	}
	e.stop(cmd, stderr)
}

// Point-in-time restore by TXID and by timestamp returns the state at that
// point; a point the replica does not reach is a clear error.
func testPointInTimeRestore(t *testing.T, bin string) {
	e := newReplEnv(t, bin, time.Second, time.Second)
	// ACK-after-replica: once load returns, the replica holds every event.
	cmd, stderr, url := e.serve("--ack-after-replica")
	if _, out := e2e.Load(t, url, "a", 100, 4); !out.Result.OK() {
		t.Fatalf("load a: %+v", out.Result)
	}
	// serve publishes its status after its first listing of the replica,
	// which on a loaded machine can come after the load: wait for it.
	var st cli.ReplicaStatusJSON
	await.Eventually(t, 45*time.Second, "serve's replica status published", func() bool {
		if err := json.Unmarshal([]byte(e.mustRun("replica", "status", "--format", "json")), &st); err != nil {
			t.Fatal(err)
		}
		return st.ReportedAt != nil
	})
	if st.ReplicaTXID == "" || st.ReplicaTXID == "0000000000000000" || st.ReportedAt == nil {
		t.Fatalf("replica status while serving: %+v", st)
	}
	stateA, countsA := ledgerDigest(t, e.db()) // read beside the running serve (WAL)
	time.Sleep(50 * time.Millisecond)          // replica timestamps have millisecond precision
	at := time.Now().UTC()
	time.Sleep(50 * time.Millisecond)
	if _, out := e2e.Load(t, url, "b", 100, 4); !out.Result.OK() {
		t.Fatalf("load b: %+v", out.Result)
	}
	e.stop(cmd, stderr)
	latest, countsLatest := ledgerDigest(t, e.db())

	byTXID := e.mustRun("restore", "-o", e.path("txid.db"), "--txid", st.ReplicaTXID)
	byTime := e.mustRun("restore", "-o", e.path("time.db"), "--timestamp", at.Format(time.RFC3339Nano))
	e.mustRun("restore", "-o", e.path("latest.db"))
	for _, c := range []struct {
		file, want string
		counts     map[string]int
	}{{"txid.db", stateA, countsA}, {"time.db", stateA, countsA}, {"latest.db", latest, countsLatest}} {
		if got, counts := ledgerDigest(t, e.path(c.file)); got != c.want {
			t.Errorf("%s: %v; want the state with %v", c.file, counts, c.counts)
		}
	}
	if restoredField(t, byTXID, "txid") != st.ReplicaTXID || restoredField(t, byTime, "receipts") != "100" {
		t.Errorf("point-in-time output:\nby txid:\n%s\nby time:\n%s", byTXID, byTime)
	}

	for _, args := range [][]string{
		{"--txid", "7fffffffffffffff"},
		{"--timestamp", "2001-01-01T00:00:00Z"},
	} {
		o, err := testenv.Run(e.bin, e.dir, nil, append([]string{"restore", "-o", e.path("never.db")}, args...)...)
		if err == nil || !strings.Contains(o, "not in the replica") {
			t.Errorf("restore %v: %v\n%s", args, err, o)
		}
	}
	if _, err := os.Stat(e.path("never.db")); !os.IsNotExist(err) {
		t.Error("a failed restore left its output behind")
	}
}

// kill -9 of serve under sustained load, then the data directory is deleted
// and the database restored from the replica alone. With ACK-after-replica
// every acknowledged event is there exactly once. By default a commit reaches
// the replica within about one monitor interval (WAL cut) plus one sync
// interval (upload), so only events acknowledged that recently before the
// kill may be lost; the test reports how many were.
func testKillUnderLoad(t *testing.T, bin string, ackAfterReplica bool) {
	const monitor, sync = 200 * time.Millisecond, 200 * time.Millisecond
	// slack covers scheduling on a loaded CI machine.
	const slack = 800 * time.Millisecond
	e := newReplEnv(t, bin, monitor, sync)
	var args []string
	if ackAfterReplica {
		args = append(args, "--ack-after-replica")
	}
	cmd, _, url := e.serve(args...)
	loadStart := time.Now()
	l := sustain(t, url, 16)
	// Kill once the load is well under way and the replica has taken several
	// uploads under it, however fast (or loaded) this machine is.
	await.Eventually(t, time.Minute, "1,500 events acknowledged and 3 uploads to the replica under load", func() bool {
		return l.ackedCount() >= 1500 && len(replicaUploads(t, e.path("replica"), loadStart)) >= 3
	})
	cmd.Process.Kill() // SIGKILL: no shutdown, no final sync
	killedAt := time.Now()
	cmd.Wait()
	acked, sent := l.stop()
	if len(acked) < 100 {
		t.Fatalf("only %d events acknowledged before the kill: not a kill under load", len(acked))
	}
	if err := os.RemoveAll(e.path("data")); err != nil {
		t.Fatal(err)
	}

	e.mustRun("restore")
	rows, err := e2e.OpenRO(t, e.db()).Query(`SELECT u.event_id, COUNT(*), SUM(u.quantity), COUNT(DISTINCT r.event_id)
		FROM metered_usage u JOIN receipts r USING (provider, event_id) WHERE u.meter = 'kill' GROUP BY u.event_id`)
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for rows.Next() {
		var id string
		var n, q, receipts int64
		rows.Scan(&id, &n, &q, &receipts)
		present[id] = true
		if want := killQuantity(id); n != 1 || receipts != 1 || ledger.Quantity(q) != want {
			t.Errorf("%s: %d usage rows totalling %s, %d receipts; want exactly one of %s", id, n, ledger.Quantity(q), receipts, want)
		}
	}
	rows.Close()
	var lost []time.Duration // how long before the kill each lost event was acknowledged
	for id, at := range acked {
		if !present[id] {
			lost = append(lost, killedAt.Sub(at))
		}
	}
	slices.Sort(lost)
	mode := map[bool]string{true: "ACK-after-replica", false: "default"}[ackAfterReplica]
	t.Logf("%s: %d events sent, %d acknowledged before kill -9; after restoring from the replica: %d present, %d acknowledged events lost",
		mode, sent, len(acked), len(present), len(lost))
	if ackAfterReplica {
		if len(lost) > 0 {
			t.Fatalf("ACK-after-replica lost %d acknowledged events", len(lost))
		}
		return
	}
	if len(lost) > 0 {
		// The replica holds every commit up to the WAL cut its last upload
		// carried, and that cut came at most one upload cycle before it. On a
		// quiet machine a cycle is about monitor + sync; on a loaded one it
		// stretches, so the window is the cycle this run actually had: the
		// longest gap between the replica's uploads under load, plus the time
		// from the last upload to the kill.
		window := monitor + sync
		uploads := replicaUploads(t, e.path("replica"), loadStart)
		for i := 1; i < len(uploads); i++ {
			window = max(window, uploads[i].Sub(uploads[i-1]))
		}
		if n := len(uploads); n > 0 && uploads[n-1].Before(killedAt) {
			window += killedAt.Sub(uploads[n-1])
		}
		t.Logf("default: the lost events were acknowledged %v to %v before the kill (monitor %v + sync %v; observed window %v over %d uploads)",
			lost[0].Round(time.Millisecond), lost[len(lost)-1].Round(time.Millisecond), monitor, sync, window.Round(time.Millisecond), len(uploads))
		if oldest := lost[len(lost)-1]; oldest > window+slack {
			t.Fatalf("default mode lost an event acknowledged %v before the kill; the replication window was %v (+%v slack)",
				oldest, window, slack)
		}
	}
}

// replicaUploads is when each level-0 LTX file in a file replica was
// written (its mtime), from since on, in order: the replica's uploads.
func replicaUploads(t *testing.T, replica string, since time.Time) []time.Time {
	t.Helper()
	var at []time.Time
	filepath.WalkDir(filepath.Join(replica, "ltx", "0"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".ltx") {
			return nil
		}
		if fi, err := d.Info(); err == nil && !fi.ModTime().Before(since) {
			at = append(at, fi.ModTime())
		}
		return nil
	})
	slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
	return at
}

// killQuantity is the quantity sent for an event id of sustain.
func killQuantity(id string) ledger.Quantity {
	var n int
	fmt.Sscanf(id[strings.LastIndexByte(id, '-')+1:], "%d", &n)
	return ledger.Quantity(n%1000+1) * ledger.Scale / 1000
}

// loader sends distinct signed events until stopped and records when each
// was acknowledged.
type loader struct {
	mu    sync.Mutex
	acked map[string]time.Time
	sent  atomic.Int64
	quit  chan struct{}
	wg    sync.WaitGroup
}

func sustain(t *testing.T, url string, workers int) *loader {
	s, _ := scheme.New("standard", scheme.HMACOptions{})
	key, err := s.Key(e2e.Secret)
	if err != nil {
		t.Fatal(err)
	}
	l := &loader{acked: map[string]time.Time{}, quit: make(chan struct{})}
	var next atomic.Int64
	occurred := time.Now().UTC().Format(time.RFC3339)
	for range workers {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		l.wg.Go(func() {
			for {
				select {
				case <-l.quit:
					return
				default:
				}
				id := fmt.Sprintf("kill-%07d", next.Add(1))
				body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":"cus_%d","meter":"kill","quantity":%s,"occurred_at":%q}}`,
					len(id)%7, killQuantity(id), occurred)
				req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/default", bytes.NewReader(body))
				s.Sign(req.Header, body, key, id, "", time.Now())
				l.sent.Add(1)
				resp, err := client.Do(req)
				if err != nil {
					time.Sleep(time.Millisecond) // refused after the kill; wait to be stopped
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					l.mu.Lock()
					l.acked[id] = time.Now()
					l.mu.Unlock()
				}
			}
		})
	}
	return l
}

func (l *loader) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *loader) stop() (map[string]time.Time, int64) {
	close(l.quit)
	l.wg.Wait()
	return l.acked, l.sent.Load()
}

// In ACK-after-replica mode an unreachable replica means 503 (not an
// unreplicated 2xx) and an unready /readyz; once it is back, the sender's
// retry is acknowledged as a duplicate.
func testReplicaDown(t *testing.T, bin string) {
	e := newReplEnv(t, bin, time.Second, time.Second)
	// The admin listener, for /metrics.
	const token = "e2e-admin-token-0123456789"
	admin := testenv.FreeAddr(t)
	if err := os.WriteFile(e.path("hookledger.yml"), fmt.Appendf(nil, `admin:
  listen: %s
  tokens: [%q]
providers:
  - name: default
    scheme: standard
    secrets: [%q]
`, admin, token, e2e.Secret), 0o600); err != nil {
		t.Fatal(err)
	}
	replicationUp := func() string {
		req, _ := http.NewRequest(http.MethodGet, "http://"+admin+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return regexp.MustCompile(`(?m)^hookledger_replication_up (\S+)$`).FindString(string(b))
	}
	cmd, stderr, url := e.serve("--ack-after-replica")
	if code, body := e2e.Post(t, url, "evt_before"); code != 200 {
		t.Fatalf("with the replica up: %d %s", code, body)
	}
	if got := replicationUp(); got != "hookledger_replication_up 1" {
		t.Errorf("metrics with the replica up: %q", got)
	}
	readyz := func() (int, string) {
		resp, err := http.Get(url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := readyz(); code != 200 || !strings.Contains(body, `"replication":"ok"`) {
		t.Fatalf("/readyz with the replica up: %d %s", code, body)
	}

	// A plain file where the replica directory was: every replica operation fails.
	replica := e.path("replica")
	if err := os.Rename(replica, replica+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(replica, []byte("gone"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, body := e2e.Post(t, url, "evt_during"); code != http.StatusServiceUnavailable {
		t.Fatalf("with the replica down: %d %s; want 503", code, body)
	}
	waitReady := func(wantCode int, want string) {
		t.Helper()
		await.Eventually(t, 45*time.Second, fmt.Sprintf("/readyz answering %d with %s", wantCode, want), func() bool {
			code, body := readyz()
			return code == wantCode && strings.Contains(body, want)
		})
	}
	waitReady(http.StatusServiceUnavailable, `"replication":"failing"`)
	if got := replicationUp(); got != "hookledger_replication_up 0" {
		t.Errorf("metrics with the replica down: %q", got)
	}

	os.Remove(replica)
	if err := os.Rename(replica+".away", replica); err != nil {
		t.Fatal(err)
	}
	// The sender retries: the event was committed locally, so it is a duplicate.
	var code int
	var body string
	await.Eventually(t, 45*time.Second, "the retry acknowledged once the replica is back", func() bool {
		code, body = e2e.Post(t, url, "evt_during")
		return code == 200
	})
	if !strings.Contains(body, `"duplicate":true`) {
		t.Fatalf("retry after the replica is back: %d %s; want a 200 duplicate", code, body)
	}
	waitReady(http.StatusOK, `"replication":"ok"`)
	e.stop(cmd, stderr)

	// The replica holds both events.
	e.removeDB()
	e.mustRun("restore")
	var n int
	e2e.OpenRO(t, e.db()).QueryRow(`SELECT COUNT(*) FROM receipts WHERE event_id IN ('evt_before', 'evt_during')`).Scan(&n)
	if n != 2 {
		t.Errorf("restored %d of the 2 events", n)
	}
}

// serve replicating to S3: acknowledged events restore from the bucket, and a
// replica that hangs at shutdown delays exit by the shutdown sync timeout,
// not forever; the delivery in flight meanwhile gets 503, not 2xx.
func testS3BoundedShutdown(t *testing.T, bin string) {
	endpoint, hang := fakes3.Serve(t)
	e := newReplEnvYML(t, bin, fmt.Sprintf(`dbs:
  - path: ./data/hookledger.db
    replica:
      type: s3
      bucket: hookledger
      path: e2e/ledger
      endpoint: %s
      region: us-east-1
      access-key-id: fake-key
      secret-access-key: ${HL_E2E_S3_SECRET}
`, endpoint), "HL_E2E_S3_SECRET=fake-secret", "AWS_CA_BUNDLE=")
	cmd, stderr, url := e.serve("--ack-after-replica", "--shutdown-sync-timeout", "1s")
	for i := range 20 {
		if code, body := e2e.Post(t, url, fmt.Sprintf("evt_%02d", i)); code != 200 {
			t.Fatalf("evt_%02d: %d %s", i, code, body)
		}
	}
	hang.Store(true)
	inflight := make(chan int, 1)
	go func() {
		// Not post: t.Fatal from this goroutine would leave the test waiting on inflight.
		code, _, err := e2e.TryPost(url, "evt_hung")
		if err != nil {
			t.Errorf("evt_hung: %v", err)
		}
		inflight <- code
	}()
	// evt_hung commits, then waits for the replica that hangs.
	ledger := e2e.OpenRO(t, e.db())
	await.Eventually(t, 30*time.Second, "evt_hung committed", func() bool {
		var n int
		return ledger.QueryRow(`SELECT COUNT(*) FROM receipts WHERE event_id = 'evt_hung'`).Scan(&n) == nil && n == 1
	})
	begin := time.Now()
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	elapsed := time.Since(begin)
	// The request waits out its replica sync (5 s) before the HTTP server
	// finishes shutting down; then the final sync is cut off after 1 s.
	if elapsed > 12*time.Second || !strings.Contains(stderr.String(), "final replica sync failed") {
		t.Fatalf("shutdown against a hung replica took %v (exit %v)\n%s", elapsed, err, stderr)
	}
	if code := <-inflight; code != http.StatusServiceUnavailable {
		t.Errorf("the delivery in flight while the replica hung got %d; want 503", code)
	}

	hang.Store(false)
	if err := os.RemoveAll(e.path("data")); err != nil {
		t.Fatal(err)
	}
	out := e.mustRun("restore")
	if got := restoredField(t, out, "from"); !strings.HasPrefix(got, "s3://hookledger/e2e/ledger") {
		t.Errorf("restored from %s", got)
	}
	var n int
	e2e.OpenRO(t, e.db()).QueryRow(`SELECT COUNT(*) FROM receipts WHERE event_id LIKE 'evt\_%' ESCAPE '\' AND event_id != 'evt_hung'`).Scan(&n)
	if n != 20 {
		t.Errorf("restored %d of the 20 acknowledged events from S3", n)
	}
}

// Configuration and restore mistakes are clear errors with a non-zero exit.
func testReplicationCLIErrors(t *testing.T, bin string) {
	runIn := func(dir string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir, cmd.Env = dir, append(testenv.Environ(), "HOOKLEDGER_SECRET="+e2e.Secret)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	file := func(dir, name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const goodYML = "dbs:\n  - path: ./data/hookledger.db\n    replica:\n      type: file\n      path: ./replica\n"
	listen := []string{"serve", "--listen", "127.0.0.1:0"}
	for _, c := range []struct {
		name       string
		litestream string // "" writes none
		hookledger string // "" writes none
		args       []string
		want       []string
	}{
		{"unknown litestream key", strings.Replace(goodYML, "type: file", "type: file\n      sync_interval: 1s", 1), "", listen,
			[]string{"litestream.yml", "line 5", `unknown key "sync_interval"`}},
		{"litestream db is not hookledger's", strings.Replace(goodYML, "./data/hookledger.db", "./other.db", 1), "", listen,
			[]string{"dbs[0].path", "other.db", "hookledger's database is"}},
		{"ack without a replica", "", "", append(listen, "--ack-after-replica"),
			[]string{"needs a replica", "litestream.yml"}},
		{"durability replica without a replica", "", "durability: replica\nproviders:\n  - name: default\n    scheme: standard\n    secrets: [\"" + e2e.Secret + "\"]\n", listen,
			[]string{"needs a replica"}},
		{"bad durability", goodYML, "durability: eventually\nproviders:\n  - name: default\n    scheme: standard\n    secrets: [\"" + e2e.Secret + "\"]\n", listen,
			[]string{"hookledger.yml:1", "durability", `"eventually"`, "local, replica"}},
		{"restore-if-missing without a replica", "", "", append(listen, "--restore-if-missing"), []string{"--restore-if-missing needs a replica"}},
		{"negative shutdown sync timeout", goodYML, "", append(listen, "--shutdown-sync-timeout", "-1s"), []string{"--shutdown-sync-timeout"}},
		{"restore from an empty replica", goodYML, "", []string{"restore"}, []string{"replica holds no backup", "litestream.yml"}},
		{"restore without litestream.yml", "", "", []string{"restore"}, []string{"no ./litestream.yml", "--litestream-config"}},
		{"restore with a missing config file", "", "", []string{"restore", "--litestream-config", "nope.yml"}, []string{"nope.yml"}},
		{"restore with both points in time", goodYML, "", []string{"restore", "--txid", "2", "--timestamp", "2026-01-01T00:00:00Z"}, []string{"choose one"}},
		{"restore with a bad txid", goodYML, "", []string{"restore", "--txid", "xyz"}, []string{"--txid", "hex"}},
		{"restore with a bad timestamp", goodYML, "", []string{"restore", "--timestamp", "yesterday"}, []string{"--timestamp", "RFC 3339"}},
		{"replica status without a replica dir", goodYML, "", []string{"replica", "status"}, []string{"replica"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.litestream != "" {
				file(dir, "litestream.yml", c.litestream)
			}
			if c.hookledger != "" {
				file(dir, "hookledger.yml", c.hookledger)
			}
			if c.name == "replica status without a replica dir" {
				file(dir, "replica", "a file, not a directory")
			}
			out, err := runIn(dir, c.args...)
			if err == nil {
				t.Fatalf("exit 0; want failure\n%s", out)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output does not mention %q:\n%s", w, out)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "data", "hookledger.db")); !os.IsNotExist(err) && c.args[0] == "restore" {
				t.Errorf("a failed restore created a database")
			}
		})
	}
}
