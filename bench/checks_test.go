package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// The checks are an open loop: a server that answers nothing until the run
// ends delays every check scheduled meanwhile, and each one's latency counts
// from its scheduled time. With one worker, a closed loop would send the
// second check only after the first answer, so every check but the first
// would show the fast answer after the stall: here at least half of them
// waited for half the run or more, by construction (the stall lasts the
// whole run, whatever the machine's speed).
func TestChecksCountTheWaitOfAStall(t *testing.T) {
	release := make(chan struct{})
	var got atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		if r.Header.Get("Authorization") != "Bearer hl_test" || r.URL.Path != "/v1/entitlements/cus_1/api_requests" &&
			r.URL.Path != "/v1/entitlements/cus_0/api_requests" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
			return
		}
		got.Add(1)
		w.Write([]byte(`{"allowed":true}`))
	}))
	defer srv.Close()

	const run = 200 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), run)
	defer cancel()
	go func() { <-ctx.Done(); close(release) }()
	res, err := Checks{BaseURL: srv.URL, Key: "hl_test", Meter: "api_requests", Customers: 2, Rate: 500, Workers: 1}.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Scheduled < 10 || !res.OK() || int(got.Load()) != res.Scheduled {
		t.Fatalf("%d scheduled, %d answered by the server, statuses %v (%s)", res.Scheduled, got.Load(), res.Status, res.FirstError)
	}
	if half := float64(run.Milliseconds()) / 2; res.Latency.P50 < half*0.9 {
		t.Errorf("p50 %.2f ms: the checks scheduled during the stall did not count their wait (want at least about %.0f ms)", res.Latency.P50, half)
	}
}
