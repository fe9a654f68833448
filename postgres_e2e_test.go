package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand"
	"net/http"
	"os/exec"
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
	resp.Body.Close()
	return resp.StatusCode/100 == 2, nil
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
		if a := count("delivery_attempts"); a != attempts {
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

	var acked, sent atomic.Int64
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
		sent.Add(1)
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
