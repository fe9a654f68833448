package reconcile

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// githubFixture: nine deliveries, newest first. g1 and g3 reached the
// receiver; g2 (delivered twice, both failed), g4 and g6 did not; g7 is too
// new to judge (inside Settle); g5 and g0 are older than the window.
func githubFixture(t *testing.T, e *env) {
	t.Helper()
	type d struct {
		id    int64
		guid  string
		ago   time.Duration
		code  int
		redel bool
		event string
	}
	ds := []d{
		{109, "g7", time.Minute, 200, false, "push"},
		{108, "g6", 10 * time.Minute, 500, false, "push"},
		{107, "g2", 20 * time.Minute, 502, true, "push"},
		{106, "g3", 30 * time.Minute, 200, false, "push"},
		{105, "g4", 40 * time.Minute, 0, false, "issues"},
		{104, "g2", 50 * time.Minute, 500, false, "push"},
		{103, "g1", 60 * time.Minute, 200, false, "push"},
		{101, "g5", 80 * time.Hour, 500, false, "push"},
		{100, "g0", 90 * time.Hour, 500, false, "push"},
	}
	e.github.payloads = map[string][]byte{}
	for _, x := range ds {
		e.github.deliveries = append(e.github.deliveries, githubDeliveryJSON{
			ID: x.id, GUID: x.guid, DeliveredAt: testNow.Add(-x.ago).Format(time.RFC3339), Redelivery: x.redel,
			Status: "status", StatusCode: x.code, Event: x.event, Action: "opened",
		})
		e.github.payloads[x.guid] = []byte(fmt.Sprintf(`{"action":"opened","guid":%q}`, x.guid))
	}
	for _, g := range []string{"g1", "g3"} {
		if code, r := e.post("github", g, "push", e.github.payloads[g]); code != 200 || r["duplicate"] != false {
			t.Fatalf("webhook %s: %d %v", g, code, r)
		}
	}
}

func TestGitHubMissingDeliveryIsRedeliveredOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	githubFixture(t, e)
	e.github.deliverOn["g2"] = true // GitHub's redelivery of g2 reaches the receiver; g4's and g6's do not
	r := e.reconciler("github")
	rep, err := r.Run(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Seen != 5 || rep.AlreadyPresent != 2 || rep.RedeliveryRequested != 3 || rep.RedeliveryPending != 0 || rep.Inserted != 0 || rep.Failed != 0 {
		t.Fatalf("report %+v", rep)
	}
	if e.github.lists != 3 {
		t.Errorf("listed %d pages, want 3 (stop at the first delivery older than the window)", e.github.lists)
	}
	for id, want := range map[string]int{"108": 1, "107": 1, "105": 1, "104": 0, "106": 0, "103": 0, "109": 0, "101": 0} {
		if got := e.github.postCount(id); got != want {
			t.Errorf("delivery %s: %d redelivery requests, want %d", id, got, want)
		}
	}
	if n := e.Int(`SELECT COUNT(*) FROM redelivery_requests WHERE provider = 'github' AND status_code = 202`); n != 3 {
		t.Errorf("recorded requests = %d", n)
	}
	// g2's redelivery arrived as an ordinary signed webhook.
	if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE provider = 'github' AND event_id = 'g2' AND source = 'webhook'`); n != 1 {
		t.Errorf("g2 not received")
	}

	// Later runs never ask again for the same events.
	for run := 2; run <= 3; run++ {
		rep, err := r.Run(context.Background(), Options{Since: 72 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Seen != 5 || rep.AlreadyPresent != 3 || rep.RedeliveryRequested != 0 || rep.RedeliveryPending != 2 {
			t.Errorf("run %d: %+v", run, rep)
		}
	}
	for _, id := range []string{"108", "107", "105"} {
		if got := e.github.postCount(id); got != 1 {
			t.Errorf("delivery %s: %d requests after three runs, want 1", id, got)
		}
	}
}

func TestGitHubFailedRedeliveryRequestIsAskedAgainNextRun(t *testing.T) {
	e := newEnv(t, envOptions{})
	githubFixture(t, e)
	e.github.postFail = map[string]int{"105": 404}
	r := e.reconciler("github")
	rep, err := r.Run(context.Background(), Options{})
	if !errors.Is(err, ErrIncomplete) || rep.Failed != 1 || rep.RedeliveryRequested != 2 || rep.Pages != 2 {
		t.Fatalf("err %v report %+v", err, rep)
	}
	if n := e.Int(`SELECT COUNT(*) FROM redelivery_requests WHERE event_id = 'g4'`); n != 0 {
		t.Errorf("a failed request was recorded as asked")
	}
	if cp := e.checkpoint("github"); cp.Cursor != "v1_3" || cp.CompletedThrough != 0 {
		t.Errorf("checkpoint %+v, want the cursor after page 1", cp)
	}
	if got := e.github.postCount("105"); got != 1 {
		t.Errorf("404 was retried: %d requests", got)
	}
	e.github.postFail = nil
	rep, err = r.Run(context.Background(), Options{})
	if err != nil || !rep.Resumed || rep.RedeliveryRequested != 1 {
		t.Fatalf("err %v report %+v", err, rep)
	}
	if got := e.github.postCount("105"); got != 2 {
		t.Errorf("g4: %d requests, want 2 (one refused, one accepted)", got)
	}
	if n := e.Int(`SELECT COUNT(*) FROM redelivery_requests WHERE provider = 'github' AND event_id = 'g4'`); n != 1 {
		t.Errorf("redelivery_requests rows for g4 = %d, want 1", n)
	}
	if n := e.Int(`SELECT COUNT(*) FROM redelivery_requests WHERE provider = 'github' AND event_id = 'g4'
		AND delivery_id = '105' AND status_code = 202`); n != 1 {
		t.Errorf("redelivery_requests rows for g4 with delivery 105 and the accepted 202 = %d, want 1", n)
	}
	for _, id := range []string{"108", "107"} {
		if got := e.github.postCount(id); got != 1 {
			t.Errorf("delivery %s: %d requests, want 1", id, got)
		}
	}
}

func TestNextCursor(t *testing.T) {
	for link, want := range map[string]string{
		`<https://api.github.com/repos/o/r/hooks/1/deliveries?per_page=100&cursor=v1_77>; rel="next"`:  "v1_77",
		`<https://x/d?per_page=2>; rel="first", <https://x/d?cursor=abc%3D%3D&per_page=2>; rel="next"`: "abc==",
		`<https://x/d?per_page=2>; rel="first"`:                                                        "",
		``:                                                                                             "",
		`garbage`:                                                                                      "",
		`<https://x/d?cursor=p>; rel="prev", <https://x/d?cursor=n>;rel="next"`: "n",
	} {
		if got := nextCursor(link); got != want {
			t.Errorf("nextCursor(%q) = %q, want %q", link, got, want)
		}
	}
}
