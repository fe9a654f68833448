package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Several receivers, one PostgreSQL database: the seam's promise that the
// invariants hold across processes. Each receiver is a real serve subprocess
// with its own data directory; they share only the database.

// pgReceivers starts n serve processes on dsn.
func pgReceivers(t *testing.T, bin, dsn string, n int) (cmds []*exec.Cmd, urls []string) {
	t.Helper()
	env := []string{"HOOKLEDGER_DATABASE=" + dsn, "HOOKLEDGER_SECRET=" + testenv.Secret}
	var wg sync.WaitGroup
	cmds, urls = make([]*exec.Cmd, n), make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() { // together: their migrations race for the advisory lock
			defer wg.Done()
			cmds[i], _, urls[i] = testenv.StartServe(t, bin, t.TempDir(), env)
		}()
	}
	wg.Wait()
	return cmds, urls
}

// pgEvent is one usage event of a load.
type pgEvent struct {
	id, customer string
	quantity     int64 // micro-units
	body         []byte
}

func pgLoad(n, customers int, seed int64) []pgEvent {
	rng := rand.New(rand.NewSource(seed))
	events := make([]pgEvent, n)
	for i := range events {
		c := fmt.Sprintf("cus_%d", rng.Intn(customers))
		q := rng.Int63n(1_000_000) + 1 // up to 1 unit, in micro-units
		events[i] = pgEvent{id: fmt.Sprintf("evt_%06d", i), customer: c, quantity: q,
			body: testenv.UsageBody(c, "api_requests", ledger.Quantity(q).String())}
	}
	return events
}

// deliver posts e to url, signed now; ok is a 2xx.
func deliver(client *http.Client, url string, e pgEvent) (ok bool, err error) {
	req, err := http.NewRequest("POST", url+"/webhooks/default", bytes.NewReader(e.body))
	if err != nil {
		return false, err
	}
	if err := testenv.SignStandard(req.Header, testenv.Secret, e.id, "usage.recorded", e.body, time.Now()); err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return false, fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return true, nil
}

// pgCheck asserts one receipt and one usage row per event, exact totals per
// customer, and a clean verify.
func pgCheck(t *testing.T, bin, dsn string, events []pgEvent, attempts int64) {
	t.Helper()
	ctx := context.Background()
	db, err := schema.Open(ctx, dsn, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(table string) int64 {
		n, err := db.CountRows(ctx, table)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if r, u := count("receipts"), count("metered_usage"); r != int64(len(events)) || u != int64(len(events)) {
		t.Errorf("%d receipts and %d usage rows for %d events, want one of each per event", r, u, len(events))
	}
	if attempts > 0 {
		if a, err := db.CountAttempts(ctx); err != nil || a != attempts {
			t.Errorf("%d delivery attempts, want %d (one per 2xx)", a, attempts)
		}
	}
	var perEvent []struct {
		N int64 `db:"n"`
	}
	if err := db.Read.Select(&perEvent, `SELECT COUNT(*) AS n FROM metered_usage GROUP BY provider, event_id HAVING COUNT(*) > 1`); err != nil {
		t.Fatal(err)
	}
	if len(perEvent) > 0 {
		t.Errorf("%d events have more than one usage row", len(perEvent))
	}

	want := map[string]*big.Int{}
	for _, e := range events {
		if want[e.customer] == nil {
			want[e.customer] = new(big.Int)
		}
		want[e.customer].Add(want[e.customer], big.NewInt(e.quantity))
	}
	env := []string{"HOOKLEDGER_DATABASE=" + dsn}
	out, err := testenv.Run(bin, t.TempDir(), env, "usage", "--format", "json")
	if err != nil {
		t.Fatalf("usage: %v\n%s", err, out)
	}
	var rows []struct {
		Customer string `json:"customer"`
		Quantity string `json:"quantity"`
		Events   int    `json:"events"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("usage output: %v\n%s", err, out)
	}
	if len(rows) != len(want) {
		t.Errorf("usage lists %d customers, want %d", len(rows), len(want))
	}
	for _, r := range rows {
		q, err := ledger.ParseQuantity(r.Quantity)
		if err != nil {
			t.Fatal(err)
		}
		if w := want[r.Customer]; w == nil || big.NewInt(int64(q)).Cmp(w) != 0 {
			t.Errorf("%s: total %s, want %v micro-units", r.Customer, r.Quantity, w)
		}
	}
	if out, err := testenv.Run(bin, t.TempDir(), env, "verify"); err != nil {
		t.Errorf("verify: %v\n%s", err, out)
	}
}

// Three receivers, 10,000 events and 2,000 duplicates, each duplicate sent
// to another receiver at the same moment as its original: one receipt and
// one usage row per event, every request 2xx, exact totals, one chain.
func TestPostgresReceiversShareOneLedger(t *testing.T) {
	bin := testenv.Binary(t)
	dsn := testenv.PostgresDatabase(t)
	_, urls := pgReceivers(t, bin, dsn, 3)
	events := pgLoad(10_000, 50, 1)

	type send struct {
		url string
		e   pgEvent
	}
	work := make(chan []send)
	var failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for group := range work {
				var inner sync.WaitGroup
				for _, s := range group { // an original and its duplicate race
					inner.Add(1)
					go func() {
						defer inner.Done()
						if ok, err := deliver(client, s.url, s.e); !ok {
							failed.Add(1)
							firstErr.CompareAndSwap(nil, fmt.Sprint(s.e.id, " at ", s.url, ": ", err))
						}
					}()
				}
				inner.Wait()
			}
		}()
	}
	rng := rand.New(rand.NewSource(2))
	for i, e := range events {
		r := rng.Intn(3)
		group := []send{{urls[r], e}}
		if i%5 == 0 { // 20%: a duplicate to another receiver, at once
			group = append(group, send{urls[(r+1+rng.Intn(2))%3], e})
		}
		work <- group
	}
	close(work)
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Fatalf("%d requests were not answered 2xx; first: %v", n, firstErr.Load())
	}
	pgCheck(t, bin, dsn, events, 12_000)
}

// kill -9 of one receiver under load while two keep serving: the senders
// retry what was not acknowledged at another receiver, as a provider would,
// and every event ends up stored exactly once.
func TestPostgresReceiverKilledUnderLoad(t *testing.T) {
	bin := testenv.Binary(t)
	dsn := testenv.PostgresDatabase(t)
	cmds, urls := pgReceivers(t, bin, dsn, 3)
	events := pgLoad(6_000, 20, 3)

	var acked atomic.Int64
	work := make(chan pgEvent)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	var killed atomic.Bool
	for w := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range work {
				for try := 0; ; try++ {
					if try == 50 {
						t.Errorf("%s: not acknowledged after 50 tries", e.id)
						break
					}
					r := (w + try) % 3
					if r == 0 && killed.Load() {
						continue
					}
					if ok, _ := deliver(client, urls[r], e); ok {
						acked.Add(1)
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	for i, e := range events {
		if i == len(events)/3 {
			cmds[0].Process.Kill() // SIGKILL, mid-load
			killed.Store(true)
		}
		work <- e
	}
	close(work)
	wg.Wait()
	if a := acked.Load(); a != int64(len(events)) {
		t.Fatalf("%d of %d events acknowledged", a, len(events))
	}
	// Attempts are not counted: an event whose 2xx the kill cut off was
	// stored and acknowledged again elsewhere, as a duplicate.
	pgCheck(t, bin, dsn, events, 0)
	if !strings.Contains(fmt.Sprint(cmds[0].Wait()), "killed") {
		t.Errorf("receiver 0 was not killed")
	}
}

// copy moves a SQLite ledger with invoices, an adjustment, a late event and
// pruned bodies into PostgreSQL: verify is clean there, and every report
// reads the same on both.
func TestCopySQLiteLedgerToPostgres(t *testing.T) {
	bin := testenv.Binary(t)
	dsn := testenv.PostgresDatabase(t)
	dir := t.TempDir()
	cfg := "data: ./data\nproviders:\n  - name: default\n    scheme: standard\n    secrets: [\"" + testenv.Secret + "\"]\n" +
		"retention:\n  payload: 1s\n  interval: 1h\n" + testenv.UsageYAML
	if err := os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) string {
		t.Helper()
		out, err := testenv.Run(bin, dir, env, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return out
	}
	serve, _, url := testenv.StartServe(t, bin, dir, nil, "--no-replication")
	send := func(id, customer, qty, at string) {
		t.Helper()
		if out := run(nil, "send", "--url", url, "--id", id, "--customer", customer, "--quantity", qty, "--occurred-at", at); !strings.Contains(out, "200 OK") {
			t.Fatalf("send %s: %s", id, out)
		}
	}
	send("evt_1", "cus_1", "3", "2026-10-20T10:00:00Z")
	send("evt_1", "cus_1", "3", "2026-10-20T10:00:00Z") // a duplicate attempt
	send("evt_2", "cus_1", "2.25", "2026-10-21T10:00:00Z")
	send("evt_3", "cus_2", "7", "2026-10-22T10:00:00Z")
	run(nil, "invoice", "close", "--period", "2026-10", "--all")
	send("evt_4", "cus_1", "1.5", "2026-10-30T10:00:00Z") // late for October
	send("evt_5", "cus_2", "4", "2026-11-03T10:00:00Z")
	run(nil, "adjust", "--customer", "cus_2", "--meter", "api_requests", "--quantity", "-1", "--reason", "goodwill", "--occurred-at", "2026-11-04T00:00:00Z")
	time.Sleep(1100 * time.Millisecond) // past retention.payload
	serve.Process.Signal(os.Interrupt)
	serve.Wait()
	run(nil, "prune")

	out := run(nil, "copy", "--to", dsn)
	if !strings.Contains(out, "5 receipts, 6 delivery attempts, 6 ledger rows, 2 invoices") {
		t.Errorf("copy reported:\n%s", out)
	}
	pg := []string{"HOOKLEDGER_DATABASE=" + dsn}
	if out, err := testenv.Run(bin, dir, pg, "verify"); err != nil {
		t.Errorf("verify on PostgreSQL: %v\n%s", err, out)
	}
	for _, args := range [][]string{
		{"usage", "--from", "2026-10", "--to", "2026-11"}, {"usage", "--group-by", "customer,meter,day"}, {"usage", "late"},
		{"invoice", "list"}, {"invoice", "show", "1"}, {"invoice", "show", "2"},
		{"dispute", "invoice:1/1", "--format", "json"}, {"ledger", "head"},
	} {
		sqlite, pgOut := run(nil, args...), run(pg, args...)
		if sqlite != pgOut {
			t.Errorf("%v differs:\n--- SQLite\n%s\n--- PostgreSQL\n%s", args, sqlite, pgOut)
		}
	}
	// The pruned bodies stayed pruned: the digests came, the bytes did not.
	db, err := schema.Open(context.Background(), dsn, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var bodies, pruned int
	db.Read.Get(&bodies, `SELECT COUNT(*) FROM receipts WHERE body IS NOT NULL`)
	db.Read.Get(&pruned, `SELECT COUNT(*) FROM receipts WHERE body IS NULL AND length(body_sha256) = 32`)
	if bodies != 0 || pruned != 5 {
		t.Errorf("%d receipts with a body and %d pruned, want 0 and 5", bodies, pruned)
	}

	// A second copy into the same database is refused and changes nothing.
	out, err = testenv.Run(bin, dir, nil, "copy", "--to", dsn)
	if err == nil || !strings.Contains(out, "the target database is not empty") {
		t.Errorf("second copy: %v\n%s", err, out)
	}
}

// serve on PostgreSQL refuses what it cannot honour, and never prints the
// database's password.
func TestPostgresServeRefusals(t *testing.T) {
	bin := testenv.Binary(t)
	dsn := testenv.PostgresDatabase(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	wrong := *u
	wrong.User = url.UserPassword(u.User.Username(), "not-the-password")
	missing := *u
	missing.Path = "/hookledger_no_such_database"
	for _, c := range []struct {
		name, db string
		args     []string
		want     string
	}{
		{"durability replica without a standby", dsn, []string{"--ack-after-replica"}, "the server has none (synchronous_standby_names is empty"},
		{"restore-if-missing", dsn, []string{"--restore-if-missing"}, "--restore-if-missing is for Litestream's replica of a SQLite database"},
		{"wrong password", wrong.String(), nil, "password authentication failed"},
		{"missing database", missing.String(), nil, `database "hookledger_no_such_database" does not exist`},
		{"not a postgres URL", "mysql://x/y", nil, "--database: must be a postgres:// or postgresql:// URL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out, err := testenv.RunFor(t, bin, dir, []string{"HOOKLEDGER_SECRET=" + testenv.Secret},
				append([]string{"serve", "--listen", testenv.FreeAddr(t), "--database", c.db}, c.args...)...)
			if err == nil || !strings.Contains(out, c.want) {
				t.Fatalf("serve: %v, want an error with %q:\n%s", err, c.want, out)
			}
			if strings.Contains(out, "not-the-password") || strings.Contains(out, ":hookledger@") {
				t.Errorf("the output shows a password:\n%s", out)
			}
		})
	}
}

// Two receivers on one PostgreSQL database forward to one application: their
// relays claim disjoint messages (FOR UPDATE SKIP LOCKED), so every event
// arrives, under one webhook-id, and none twice.
func TestPostgresReceiversForwardOnce(t *testing.T) {
	bin := testenv.Binary(t)
	dsn := testenv.PostgresDatabase(t)
	var mu sync.Mutex
	got := map[string][]string{} // event id -> webhook-ids received
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ev := r.Header.Get("X-Hookledger-Event-Id")
		got[ev] = append(got[ev], r.Header.Get("Webhook-Id"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer app.Close()
	cfg := "providers:\n  - name: default\n    scheme: standard\n    secrets: [\"" + testenv.Secret + "\"]\n" +
		"destinations:\n  - name: app\n    url: " + app.URL + "\n    secrets: [\"" + testenv.Secret + "\"]\n" + testenv.UsageYAML
	env := []string{"HOOKLEDGER_DATABASE=" + dsn}
	var urls []string
	for r := range 2 {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "hookledger.yml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		_, log, u := testenv.StartServe(t, bin, dir, env)
		urls = append(urls, u)
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("receiver %d (%s):\n%s", r, u, log)
			}
		})
	}
	events := pgLoad(2_000, 10, 5)
	client := &http.Client{Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if ok, err := deliver(client, urls[i%2], events[i]); !ok {
					t.Errorf("%s: not acknowledged (%v)", events[i].id, err)
				}
			}
		})
	}
	for i := range events {
		work <- i
	}
	close(work)
	wg.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == len(events) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	twice := 0
	for _, e := range events {
		ids := got[e.id]
		switch {
		case len(ids) == 0:
			t.Errorf("%s was never forwarded", e.id)
		case len(ids) > 1:
			twice++
		}
		for _, id := range ids {
			if id != ids[0] {
				t.Errorf("%s arrived under two webhook-ids: %v", e.id, ids)
			}
		}
	}
	if twice > 0 {
		t.Errorf("%d of %d events were forwarded more than once by two relays on one database", twice, len(events))
	}
}
