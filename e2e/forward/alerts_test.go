package forward_test

// End-to-end test of threshold alerts (issue 28) against the built binary:
// serve is killed with SIGKILL after the commit that crossed the thresholds
// and before their alerts were delivered; after a restart each alert
// reaches the application once, under one webhook-id.

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
)

func TestAlertSurvivesKill9BeforeItsForward(t *testing.T) {
	bin := testenv.Binary(t)
	dir := t.TempDir()
	a := newDedupeApp(t, e2e.Secret)
	a.fail.Store(true) // the application is down: nothing is delivered before the kill
	forwardConfig(t, dir, testenv.FreeAddr(t), a.srv.URL, `meters:
  - name: api_requests
plans:
  - name: free
    currency: USD
    effective_from: 2026-01-01
    limits:
      - {meter: api_requests, limit: 100, period: month, kind: hard, alerts: ["80%", "100%"]}
customers:
  default_plan: free
`)
	// Only alerts go to the app, so every request it sees is one.
	cfgPath := dir + "/hookledger.yml"
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "    timeout: 2s\n", "    timeout: 2s\n    events: {types: [\"usage.threshold_crossed\"]}\n", 1))
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, _, url := testenv.StartServe(t, bin, dir, nil)
	body := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":100,"occurred_at":"` +
		time.Now().UTC().Format(time.RFC3339) + `"}}`)
	h := http.Header{}
	if err := testenv.SignStandard(h, e2e.Secret, "evt_1", "", body, time.Now()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/default", strings.NewReader(string(body)))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("send: %d", resp.StatusCode)
	}
	// The crossing row's commit is acknowledged; the relay has tried (and
	// failed) to forward: kill it now, with both alerts undelivered.
	await.Eventually(t, 45*time.Second, "a failed attempt at the app", func() bool { _, reqs, _ := a.deduped(); return reqs > 0 })
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	a.fail.Store(false)
	cmd2, stderr2, _ := testenv.StartServe(t, bin, dir, nil)
	// Delivered after the restart (the app records a request before it
	// answers, so the outbox is what says it accepted them).
	await.Eventually(t, 45*time.Second, "both alerts delivered", func() bool {
		out, err := testenv.Run(bin, dir, nil, "forward", "status", "--format", "json")
		if err != nil {
			return false
		}
		var st []forward.DestinationStatus
		return json.Unmarshal([]byte(out), &st) == nil && len(st) == 1 && st[0].Delivered == 2 && st[0].Pending == 0 && st[0].Dead == 0
	})
	got, _, bad := a.deduped()
	if len(got) != 2 {
		t.Errorf("the app saw %d events, want the two alerts", len(got))
	}
	if bad != 0 {
		t.Errorf("%d requests did not verify or reused a webhook-id for another event", bad)
	}
	a.mu.Lock()
	ids := map[string][]string{} // alert event -> webhook-ids
	for id, ev := range a.byID {
		ids[ev] = append(ids[ev], id)
	}
	a.mu.Unlock()
	for ev := range got {
		if !strings.HasPrefix(ev, "thr_") || len(ids[ev]) != 1 {
			t.Errorf("event %s reached the app under webhook-ids %v, want one alert id under one", ev, ids[ev])
		}
	}
	out, err := testenv.Run(bin, dir, nil, "alerts", "list", "--format", "csv")
	if err != nil || strings.Count(out, "\n") != 3 || !strings.Contains(out, ",80%,") || !strings.Contains(out, ",100%,") {
		t.Errorf("alerts list: %v\n%s", err, out)
	}
	if out, err := testenv.Run(bin, dir, nil, "verify"); err != nil {
		t.Errorf("verify: %v\n%s", err, out)
	}
	cmd2.Process.Signal(os.Interrupt)
	cmd2.Wait()
	if strings.Contains(stderr2.String(), "panic") {
		t.Errorf("serve log:\n%s", stderr2)
	}

}
