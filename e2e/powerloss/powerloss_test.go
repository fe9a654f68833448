package powerloss_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/internal/powerloss"
	"github.com/hookledger/hookledger/internal/testenv"
)

// Power-loss tests: serve runs on internal/powerloss's filesystem, which
// keeps every byte that was not fsynced in memory until a simulated power
// cut drops it. kill -9 alone keeps the kernel's page cache, so it cannot
// tell a commit that was fsynced from one that was only written.

// cutRig is one serve on a power-loss disk, its load and what was
// acknowledged.
type cutRig struct {
	t    *testing.T
	bin  string
	disk *powerloss.Disk
	work string // outside the disk: configuration, replica, restores
	data string // on the disk
	env  []string
	rng  *rand.Rand

	litestream bool // replicate to work/replica (another machine: never cut)
	ackReplica bool // durability: replica

	apiKey string
	app    *httptest.Server
	pg     *pgOnDisk // PostgreSQL's data directory on the disk, when set

	serve  *exec.Cmd
	stderr *testenv.Buffer
	url    string

	seq   atomic.Int64
	mu    sync.Mutex
	acked map[string]time.Time // provider + "\x00" + event_id: when first acknowledged
	cutAt time.Time            // the last cut
}

const cutSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func newCutRig(t *testing.T, sync powerloss.Sync, litestream, ackReplica bool) *cutRig {
	t.Helper()
	r := &cutRig{
		t: t, bin: testenv.Binary(t), disk: powerloss.NewDisk(t, sync), work: t.TempDir(),
		litestream: litestream || ackReplica, ackReplica: ackReplica,
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 29)), acked: map[string]time.Time{},
	}
	// Two levels serve creates: the data directory and its parent.
	r.data = filepath.Join(r.disk.Dir, "srv", "data")
	// The forwarding destination: an app that answers 200 (stays up across cuts).
	r.app = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { io.Copy(io.Discard, req.Body) }))
	t.Cleanup(r.app.Close)
	durability := "local"
	if ackReplica {
		durability = "replica"
	}
	cfg := fmt.Sprintf(`data: %s
durability: %s
providers:
  - name: default
    scheme: standard
    secrets: [%q]
usage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
destinations:
  - name: app
    url: %s
    secrets: [%q]
    backoff: 100ms
    max_backoff: 1s
`, r.data, durability, cutSecret, r.app.URL, cutSecret)
	r.write("hookledger.yml", cfg)
	r.env = []string{"HOOKLEDGER_CONFIG=" + filepath.Join(r.work, "hookledger.yml")}
	if r.litestream {
		// The shipped litestream.yml's timing (a cut every second, the
		// replica synced every second): what the replica lacks at a cut is
		// what a team running it would lose (docs/backups.md).
		r.write("litestream.yml", fmt.Sprintf(`dbs:
  - path: %s
    replica:
      type: file
      path: %s
      sync-interval: 1s
shutdown-sync-timeout: 5s
`, filepath.Join(r.data, "hookledger.db"), filepath.Join(r.work, "replica")))
		r.env = append(r.env, "HOOKLEDGER_LITESTREAM_CONFIG="+filepath.Join(r.work, "litestream.yml"))
	} else {
		r.env = append(r.env, "HOOKLEDGER_NO_REPLICATION=1")
	}
	return r
}

func (r *cutRig) write(name, content string) {
	r.t.Helper()
	if err := os.WriteFile(filepath.Join(r.work, name), []byte(content), 0o600); err != nil {
		r.t.Fatal(err)
	}
}

func (r *cutRig) run(args ...string) (string, error) {
	return testenv.Run(r.bin, r.work, r.env, args...)
}

// start starts serve (a first start creates the data directory).
func (r *cutRig) start() {
	r.t.Helper()
	r.serve, r.stderr, r.url = testenv.StartServe(r.t, r.bin, r.work, r.env)
}

// kill is the power cut's effect on the process.
func (r *cutRig) kill() {
	r.serve.Process.Kill()
	r.serve.Wait()
}

// sendWebhook delivers one signed usage event; twin sends the same event
// twice at once (a racing duplicate). It records the event once a delivery
// of it was answered 2xx.
func (r *cutRig) sendWebhook(client *http.Client, id string, twin bool) {
	body := fmt.Appendf(nil, `{"type":"usage.recorded","data":{"customer":"cus_%d","meter":"api_requests","quantity":1,"occurred_at":"2026-11-29T10:00:00Z"}}`, len(id)%7)
	post := func() {
		req, _ := http.NewRequest(http.MethodPost, r.url+"/webhooks/default", bytes.NewReader(body))
		if err := testenv.SignStandard(req.Header, cutSecret, id, "usage.recorded", body, time.Now()); err != nil {
			panic(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			return
		}
		reply, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && bytes.Contains(reply, []byte(`"accepted":true`)) {
			r.ack("default", id)
		}
	}
	if !twin {
		post()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); post() }()
	go func() { defer wg.Done(); post() }()
	wg.Wait()
}

// sendBatch posts a batch of CloudEvents to the ingest API, some of them
// already sent; twin posts it twice at once.
func (r *cutRig) sendBatch(client *http.Client, ids []string, twin bool) {
	events := make([][]byte, len(ids))
	for i, id := range ids {
		events[i] = testenv.CloudEvent("load", id, "cus_b", "api_requests", "2")
	}
	body := testenv.Batch(events...)
	post := func() {
		req, _ := http.NewRequest(http.MethodPost, r.url+"/v1/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/cloudevents-batch+json")
		req.Header.Set("Authorization", "Bearer "+r.apiKey)
		resp, err := client.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		var reply struct {
			Results []struct {
				EventID string `json:"event_id"`
				Outcome string `json:"outcome"`
			} `json:"results"`
		}
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&reply) != nil {
			return
		}
		for _, res := range reply.Results {
			if res.Outcome == "applied" || res.Outcome == "duplicate" {
				r.ack("api:load", res.EventID)
			}
		}
	}
	if !twin {
		post()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); post() }()
	go func() { defer wg.Done(); post() }()
	wg.Wait()
}

func (r *cutRig) ack(provider, id string) {
	r.mu.Lock()
	if _, ok := r.acked[provider+"\x00"+id]; !ok {
		r.acked[provider+"\x00"+id] = time.Now()
	}
	r.mu.Unlock()
}

func (r *cutRig) ackedCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.acked)
}

// load runs senders (6 webhook, 2 ingest; about 10% racing duplicates)
// until stop is closed.
func (r *cutRig) load(stop <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 10 * time.Second}
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for {
				select {
				case <-stop:
					return
				default:
				}
				twin := rng.IntN(10) == 0
				if w < 6 {
					r.sendWebhook(client, "w-"+strconv.FormatInt(r.seq.Add(1), 10), twin)
					continue
				}
				ids := make([]string, 1+rng.IntN(20))
				for i := range ids {
					n := r.seq.Add(1)
					if rng.IntN(10) == 0 && n > 10 {
						n -= int64(1 + rng.IntN(10)) // an event that may have been sent already
					}
					ids[i] = "i-" + strconv.FormatInt(n, 10)
				}
				r.sendBatch(client, ids, twin)
			}
		}()
	}
	return &wg
}

// cutUnderLoad starts the load, cuts the power at a random moment once at
// least a few events were acknowledged, and mounts the disk again.
func (r *cutRig) cutUnderLoad(kind powerloss.Cut) {
	r.t.Helper()
	stop := make(chan struct{})
	wg := r.load(stop)
	before := r.ackedCount()
	for deadline := time.Now().Add(30 * time.Second); r.ackedCount() < before+5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(stop)
			wg.Wait()
			r.t.Fatalf("no events acknowledged under load in 30 s:\n%s", r.stderr)
		}
	}
	pause := time.Duration(r.rng.IntN(800)) * time.Millisecond
	if r.litestream && !r.ackReplica {
		// The async replica's loss at a cut of a serve that has run a few
		// sync intervals (1 s), as a serve on a VM has: cut within a second
		// of each start, as every other mode is, the replica never got a
		// sync in and lagged further behind at every cut.
		pause += 3 * time.Second
	}
	time.Sleep(pause)
	r.cutAt = time.Now()
	r.kill()
	close(stop)
	wg.Wait()
	if r.pg != nil {
		r.pg.kill()
	}
	r.disk.PowerCut(kind, r.rng)
	if r.pg != nil {
		r.pg.start() // PostgreSQL's own recovery
	}
}

// lag is what an async replica lacked right after a cut: acknowledged
// events, and how long before the cut the oldest of them was acknowledged.
type lag struct {
	events int
	window time.Duration
}

// problems lists what the disk lost or broke after a cut: acknowledged
// events missing or doubled, forwarding messages dropped, verify's and
// SQLite's integrity check's findings; with Litestream, the same of a
// restore of the replica (acknowledged events missing from it are problems
// in ACK-after-replica mode; in async mode they are the replica's lag).
func (r *cutRig) problems(cut int) (problems []string, replica lag) {
	r.t.Helper()
	problems, missing := r.check("local", r.data)
	if missing.events > 0 {
		problems = append(problems, fmt.Sprintf("local: %d of %d acknowledged events missing, acknowledged up to %v before the cut",
			missing.events, len(r.acked), missing.window))
	}
	if out, err := r.run("verify"); err != nil {
		problems = append(problems, fmt.Sprintf("verify: %v\n%s", err, out))
	}
	if !r.litestream {
		return problems, lag{}
	}
	dir := filepath.Join(r.work, "restore-"+strconv.Itoa(cut))
	defer os.RemoveAll(dir)
	if out, err := r.run("restore", "-o", filepath.Join(dir, "hookledger.db")); err != nil {
		return append(problems, fmt.Sprintf("restore: %v\n%s", err, out)), lag{}
	}
	if out, err := r.run("verify", "--data", dir); err != nil {
		problems = append(problems, fmt.Sprintf("verify the restored replica: %v\n%s", err, out))
	}
	restored, replica := r.check("replica", dir)
	problems = append(problems, restored...)
	if r.ackReplica && replica.events > 0 {
		problems = append(problems, fmt.Sprintf("replica: %d of %d acknowledged events missing (ACK-after-replica), acknowledged up to %v before the cut",
			replica.events, len(r.acked), replica.window))
	}
	return problems, replica
}

// check opens the database in dir and compares it with what was
// acknowledged: it returns what is wrong with the events it holds, and
// which acknowledged events it lacks.
func (r *cutRig) check(what, dir string) ([]string, lag) {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	oldest := func() lag {
		var l lag
		for _, at := range r.acked {
			l.events++
			l.window = max(l.window, r.cutAt.Sub(at).Round(time.Millisecond))
		}
		return l
	}
	var db *sqlx.DB
	var problems []string
	if r.pg != nil && what == "local" {
		// verify runs PostgreSQL's own checks (amcheck).
		var err error
		if db, err = sqlx.Open("pgx", r.pg.url); err != nil {
			r.t.Fatal(err)
		}
		defer db.Close()
	} else {
		path := filepath.Join(dir, "hookledger.db")
		if _, err := os.Stat(path); err != nil {
			return []string{fmt.Sprintf("%s: the database is gone (%v)", what, err)}, oldest()
		}
		// Read a copy made by another process: this process serves the
		// mount, and SQLite touching it from here can deadlock the Go
		// runtime (a stop-the-world pause waiting on a FUSE request only
		// this process can answer).
		copied := r.t.TempDir()
		if out, err := exec.Command("sh", "-c", `cp "$1"/hookledger.db* "$2"/`, "cp", dir, copied).CombinedOutput(); err != nil {
			r.t.Fatalf("copy the database out of the disk: %v\n%s", err, out)
		}
		path = filepath.Join(copied, "hookledger.db")
		// Exclusive locking: SQLite keeps the WAL index in memory instead of
		// mapping the -shm file, which this process itself serves over FUSE (a
		// page fault there during a stop-the-world pause would deadlock).
		var err error
		if db, err = sqlx.Open("sqlite", "file:"+path+"?_pragma=locking_mode(exclusive)&_pragma=busy_timeout(10000)"); err != nil {
			r.t.Fatal(err)
		}
		defer db.Close()
		var integrity string
		if err := db.Get(&integrity, `PRAGMA integrity_check`); err != nil {
			return []string{fmt.Sprintf("%s: integrity_check: %v", what, err)}, oldest()
		}
		if integrity != "ok" {
			problems = append(problems, what+": integrity_check: "+integrity)
		}
	}
	type row struct {
		Provider string `db:"provider"`
		EventID  string `db:"event_id"`
		Usage    int    `db:"usage"`
		Outbox   int    `db:"outbox"`
		Dead     int    `db:"dead"`
	}
	var rows []row
	if err := db.Select(&rows, `SELECT r.provider, r.event_id,
		    (SELECT count(*) FROM metered_usage u WHERE u.provider = r.provider AND u.event_id = r.event_id) AS usage,
		    (SELECT count(*) FROM outbox o WHERE o.receipt_id = r.id) AS outbox,
		    (SELECT count(*) FROM outbox o WHERE o.receipt_id = r.id AND o.status = 'dead') AS dead
		FROM receipts r`); err != nil {
		return append(problems, fmt.Sprintf("%s: read receipts: %v", what, err)), oldest()
	}
	present := map[string]row{}
	for _, x := range rows {
		present[x.Provider+"\x00"+x.EventID] = x
	}
	var missing lag
	for key, at := range r.acked {
		x, ok := present[key]
		name := strings.ReplaceAll(key, "\x00", "/")
		switch {
		case !ok:
			missing.events++
			missing.window = max(missing.window, r.cutAt.Sub(at).Round(time.Millisecond))
		case x.Usage != 1:
			problems = append(problems, fmt.Sprintf("%s: event %s has %d usage rows, not 1", what, name, x.Usage))
		case x.Outbox != 1 || x.Dead != 0:
			problems = append(problems, fmt.Sprintf("%s: event %s has %d forwarding messages (%d dead), not 1 owed or delivered", what, name, x.Outbox, x.Dead))
		}
	}
	return problems, missing
}

// torture runs cuts power cuts under load and returns, per cut, what went
// wrong (nothing, when every acknowledged event survived) and what the
// replica lacked right after it. It stops at the first cut that lost
// something.
func (r *cutRig) torture(cuts int, kinds []powerloss.Cut) (failed [][]string, replica []lag) {
	r.t.Helper()
	if out, err := r.run("migrate"); err != nil {
		r.t.Fatalf("migrate: %v\n%s", err, out)
	}
	out, err := r.run("keys", "create", "load", "--quiet")
	if err != nil {
		r.t.Fatalf("keys create: %v\n%s", err, out)
	}
	r.apiKey = strings.TrimSpace(out)
	r.start()
	for cut := 0; cut < cuts; cut++ {
		kind := kinds[cut%len(kinds)]
		r.cutUnderLoad(kind)
		problems, l := r.problems(cut)
		failed = append(failed, problems)
		replica = append(replica, l)
		if len(problems) > 0 {
			r.t.Logf("cut %d (%s, %s): %d acknowledged so far:\n  %s", cut, r.disk.Sync, kind, r.ackedCount(), strings.Join(problems, "\n  "))
			return failed, replica
		}
		line := fmt.Sprintf("cut %d (%s, %s): %d acknowledged so far, none lost", cut, r.disk.Sync, kind, r.ackedCount())
		if r.litestream {
			line += fmt.Sprintf("; the replica lacked %d (acknowledged up to %v before the cut)", l.events, l.window)
		}
		r.t.Log(line)
		r.start()
	}
	r.kill()
	return failed, replica
}

// cutsFromEnv is the number of cuts per mode: HOOKLEDGER_TORTURE_CUTS
// (task torture), else a few.
func cutsFromEnv(t *testing.T, short int) int {
	if s := os.Getenv("HOOKLEDGER_TORTURE_CUTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("HOOKLEDGER_TORTURE_CUTS=%q: want a positive number", s)
		}
		return n
	}
	return short
}

// TestPowerLossTorture is the torture test: serve under concurrent signed
// webhooks and ingest batches with racing duplicates, forwarding to a local
// app, cut at random moments (kill -9 and a power cut), mounted again and
// restarted: every acknowledged event is present exactly once with its one
// usage row and its forwarding message (owed or delivered), verify and
// SQLite's integrity check are clean; with Litestream a restore of the
// replica verifies after each cut, and in ACK-after-replica mode it holds
// every acknowledged event.
func TestPowerLossTorture(t *testing.T) {
	both := []powerloss.Cut{powerloss.DropAll, powerloss.KeepSome}
	for _, tc := range []struct {
		name             string
		sync             powerloss.Sync
		litestream, ackR bool
	}{
		{"strict", powerloss.Strict, false, false},
		{"journaled", powerloss.Journaled, false, false},
		{"litestream", powerloss.Journaled, true, false},
		{"ack-after-replica", powerloss.Journaled, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newCutRig(t, tc.sync, tc.litestream, tc.ackR)
			cuts := cutsFromEnv(t, 3)
			failed, replica := r.torture(cuts, both)
			for i, p := range failed {
				if len(p) > 0 {
					t.Fatalf("cut %d of %d lost or broke something:\n%s\nserve's log:\n%s", i, cuts, strings.Join(p, "\n"), r.stderr)
				}
			}
			// One line per mode for RELIABILITY.md's table (task torture).
			var events []int
			var window time.Duration
			for _, l := range replica {
				events = append(events, l.events)
				window = max(window, l.window)
			}
			slices.Sort(events)
			summary := fmt.Sprintf("summary: mode=%s cuts=%d acknowledged=%d lost=0", tc.name, cuts, r.ackedCount())
			if tc.litestream {
				summary += fmt.Sprintf(" replica_missing_median=%d replica_missing_max=%d replica_window_max=%v",
					events[len(events)/2], events[len(events)-1], window)
			}
			t.Log(summary)
		})
	}
}

// TestPowerLossLyingDiskFails is the torture test's own check: on a disk
// whose fsync saves nothing (its data directory and database made durably
// first), a cut loses acknowledged events and the test's checks say so. A
// harness that cannot fail proves nothing.
func TestPowerLossLyingDiskFails(t *testing.T) {
	r := newCutRig(t, powerloss.Journaled, false, false)
	// The database and its directory exist durably; only what follows lies.
	if out, err := r.run("migrate"); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	r.disk.Sync = powerloss.Lying
	r.disk.PowerCut(powerloss.DropAll, r.rng)
	failed, _ := r.torture(2, []powerloss.Cut{powerloss.DropAll})
	for _, p := range failed {
		if len(p) > 0 {
			return
		}
	}
	t.Fatalf("a disk that ignores fsync lost nothing in %d cuts: the torture test cannot fail", len(failed))
}

// TestDataDirectorySurvivesPowerCut: serve creates its data directory (and
// its parent); under strict POSIX rules those names are durable only once
// their parent directories are fsynced. Without that, a cut on the first
// day loses the whole directory with every acknowledged event in it.
func TestDataDirectorySurvivesPowerCut(t *testing.T) {
	r := newCutRig(t, powerloss.Strict, false, false)
	r.start()
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 5 {
		r.sendWebhook(client, "first-day-"+strconv.Itoa(i), false)
	}
	if n := r.ackedCount(); n != 5 {
		t.Fatalf("%d of 5 events acknowledged:\n%s", n, r.stderr)
	}
	r.kill()
	r.disk.PowerCut(powerloss.DropAll, r.rng)
	problems, missing := r.check("local", r.data)
	if missing.events > 0 {
		problems = append(problems, fmt.Sprintf("%d of 5 acknowledged events missing", missing.events))
	}
	if len(problems) > 0 {
		t.Fatalf("after a power cut on the first day:\n%s", strings.Join(problems, "\n"))
	}
}
