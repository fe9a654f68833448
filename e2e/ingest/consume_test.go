package ingest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
)

func TestConsume(t *testing.T) {
	testenv.Parallel(t, testenv.Binary(t), []testenv.Case{
		{Name: "kill -9 while consuming", Run: testConsumeKill9},
	})
}

// 16 consumers make 300 attempts of 1 against a hard limit of 100 while
// serve is killed with SIGKILL and started again: every consume answered
// allowed has its usage row, no attempt is counted twice (each retries its
// id until it has an answer), and exactly 100 are allowed in all.
func testConsumeKill9(t *testing.T, bin string) {
	e := newIngestEnv(t, bin)
	cfg := filepath.Join(e.dir, "hookledger.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `data: ./data
providers:
  - name: default
    scheme: standard
    secrets: [%q]
meters:
  - name: api_requests
plans:
  - name: free
    currency: USD
    effective_from: "2026-01-01"
    limits: [{meter: api_requests, limit: "100"}]
customers:
  default_plan: free
`, testenv.Secret), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, _, url := testenv.StartServe(t, bin, e.dir, e.env, "--config", cfg)
	key := e.createKey(t, "app", "--config", cfg) // on the running serve's database
	var base atomic.Value
	base.Store(url)
	var mu sync.Mutex
	answers := map[string]bool{}
	allowed := atomic.Int64{}
	work := make(chan int, 300)
	for i := range 300 {
		work <- i
	}
	close(work)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				id := fmt.Sprintf("c%03d", i)
				for { // the same id until an answer: a consume is idempotent on it
					ok, answered := consumeOnce(base.Load().(string), key, id)
					if answered {
						mu.Lock()
						answers[id] = ok
						mu.Unlock()
						if ok {
							allowed.Add(1)
						}
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	await.Eventually(t, 30*time.Second, "40 consumes allowed", func() bool { return allowed.Load() >= 40 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	_, _, url2 := testenv.StartServe(t, bin, e.dir, e.env, "--config", cfg)
	base.Store(url2)
	wg.Wait()
	if n := allowed.Load(); n != 100 {
		t.Errorf("%d consumes allowed, want exactly 100", n)
	}
	if rows := e.count(t, `SELECT COUNT(*) FROM metered_usage WHERE customer_id = 'cus_1'`); rows != 100 {
		t.Errorf("%d usage rows, want 100", rows)
	}
	for id, ok := range answers {
		rows := e.count(t, `SELECT COUNT(*) FROM metered_usage WHERE event_id = ?`, "consume#"+id)
		if ok != (rows == 1) {
			t.Errorf("%s answered allowed %v, has %d rows", id, ok, rows)
		}
	}
}

// consumeOnce posts one consume of 1 for cus_1; answered false: no answer
// (serve was down or answered 5xx), try again.
func consumeOnce(base, key, id string) (allowed, answered bool) {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/entitlements/cus_1/api_requests/consume",
		strings.NewReader(`{"id":"`+id+`","quantity":"1"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Allowed bool `json:"allowed"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &r) != nil {
		return false, false
	}
	return r.Allowed, true
}
