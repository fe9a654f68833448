package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Checks is an open-loop load of entitlement checks (GET
// /v1/entitlements/{customer}/{meter}, docs/entitlements.md): requests are
// scheduled at a fixed Rate whatever the answers do, and each one's latency
// is measured from its scheduled time, not from when a free connection sent
// it. A closed loop (each connection sending its next request after the
// last answer) sends less when the server slows down, so its percentiles
// leave out the requests a stall delayed (coordinated omission); here a
// stall delays every request scheduled during it, and they count.
type Checks struct {
	// BaseURL is the server's, e.g. http://127.0.0.1:8080.
	BaseURL string
	// Key is the ingest API key (hl_…) the checks authenticate with.
	Key string
	// Meter is the meter checked; customers are cus_0 … cus_{Customers-1},
	// checked in turn.
	Meter     string
	Customers int
	// Rate is the checks scheduled per second.
	Rate float64
	// Workers bounds the checks in flight (default 64): when all are busy
	// the scheduled ones wait, and their wait counts in their latency.
	Workers int
	// Timeout bounds each check. Default 10 s.
	Timeout time.Duration
	// Warmup is how long checks run, at Rate, before the ones measured:
	// the workers open their connections and serve its read pool then, a
	// one-off that would otherwise be a tail of every run.
	Warmup time.Duration
}

// CheckResult is what a Checks run measured. Latencies are in
// milliseconds: Latency from each check's scheduled time (what a caller
// waiting on it would see), Service from when a worker sent it. The
// difference is the wait for the generator itself: a timer fires late
// (about 0.65 ms at the median on the 2-core project VM, idle) and a check
// waits for a free worker.
type CheckResult struct {
	Scheduled int            `json:"scheduled"`
	Seconds   float64        `json:"seconds"`
	Rate      float64        `json:"rate"` // answered per second
	Latency   Latency        `json:"latency_ms"`
	Service   Latency        `json:"service_ms"`
	Status    map[string]int `json:"status"` // HTTP status code, or "error" for a transport failure
	// FirstError is the first answer that was not a 200 with a decision.
	FirstError string `json:"first_error,omitempty"`
}

// OK reports whether every check was answered 200.
func (r CheckResult) OK() bool { return r.Status["200"] == r.Scheduled }

// Ready waits until a check of the first customer is answered 200, for up
// to wait: serve answers 503 while it builds the usage state at start.
func (c Checks) Ready(ctx context.Context, wait time.Duration) error {
	client := &http.Client{Timeout: 10 * time.Second}
	deadline := time.Now().Add(wait)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			c.BaseURL+"/v1/entitlements/cus_0/"+url.PathEscape(c.Meter), nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+c.Key)
		resp, err := client.Do(req)
		last := ""
		if err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%d: %.200s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no entitlement check answered 200 within %s: last %s", wait, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Run schedules checks from now until ctx is done, waits for the ones in
// flight, and summarises them.
func (c Checks) Run(ctx context.Context) (CheckResult, error) {
	switch {
	case c.Rate <= 0:
		return CheckResult{}, fmt.Errorf("rate must be positive, got %g", c.Rate)
	case c.Customers < 1:
		return CheckResult{}, fmt.Errorf("customers must be at least 1, got %d", c.Customers)
	case c.Meter == "" || c.Key == "":
		return CheckResult{}, errors.New("meter and key are required")
	}
	workers := c.Workers
	if workers <= 0 {
		workers = 64
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		MaxIdleConns: workers, MaxIdleConnsPerHost: workers, IdleConnTimeout: time.Minute}}
	defer client.CloseIdleConnections()
	urls := make([]string, c.Customers)
	for i := range urls {
		urls[i] = c.BaseURL + "/v1/entitlements/" + url.PathEscape("cus_"+strconv.Itoa(i)) + "/" + url.PathEscape(c.Meter)
	}

	type check struct {
		n      int
		at     time.Time // scheduled
		warmup bool
	}
	type answer struct {
		latency, service time.Duration
		status           int
		err              string
	}
	// The schedule never waits for a worker: a buffer of a minute of checks
	// (more than any run here) holds those no worker has taken yet.
	queue := make(chan check, int(c.Rate*60)+1)
	var mu sync.Mutex
	var answers []answer
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ch := range queue {
				a := answer{}
				req, _ := http.NewRequest(http.MethodGet, urls[ch.n%len(urls)], nil)
				req.Header.Set("Authorization", "Bearer "+c.Key)
				sent := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					a.err = err.Error()
				} else {
					a.status = resp.StatusCode
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if a.status != http.StatusOK {
						a.err = fmt.Sprintf("%d: %.200s", a.status, body)
					}
				}
				a.latency, a.service = time.Since(ch.at), time.Since(sent)
				if ch.warmup {
					continue
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			}
		})
	}
	interval := time.Duration(float64(time.Second) / c.Rate)
	start := time.Now()
	measured := start.Add(c.Warmup)
	n, warm := 0, 0
schedule:
	for ; ; n++ {
		at := start.Add(time.Duration(n) * interval)
		if d := time.Until(at); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				break schedule
			case <-t.C:
			}
		} else if ctx.Err() != nil {
			break
		}
		if at.Before(measured) {
			warm++
		}
		select {
		case queue <- check{n, at, at.Before(measured)}:
		default:
			close(queue)
			wg.Wait()
			return CheckResult{}, fmt.Errorf("more than a minute of checks (%d) waiting for a worker: the server is not answering", cap(queue))
		}
	}
	close(queue)
	wg.Wait()
	elapsed := time.Since(measured)
	n -= warm

	r := CheckResult{Scheduled: n, Seconds: elapsed.Seconds(), Rate: float64(len(answers)) / elapsed.Seconds(), Status: map[string]int{}}
	latency := make([]time.Duration, 0, len(answers))
	service := make([]time.Duration, 0, len(answers))
	for _, a := range answers {
		key := "error"
		if a.status != 0 {
			key = strconv.Itoa(a.status)
		}
		r.Status[key]++
		if a.err != "" && r.FirstError == "" {
			r.FirstError = a.err
		}
		latency, service = append(latency, a.latency), append(service, a.service)
	}
	r.Latency, r.Service = latencyOf(latency), latencyOf(service)
	return r, nil
}
