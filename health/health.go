// Package health answers /healthz (the process is up) and /readyz (it can take
// custody of events: the database is writable, its schema is current, and the
// replica is healthy when replicating). Checks are pluggable, so components
// wired in by main (replication) add their own.
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// CheckFunc reports nil when its condition holds. It must return promptly
// when ctx ends.
type CheckFunc func(ctx context.Context) error

// Result is one check's verdict.
type Result struct {
	Name string
	Err  error
	// Advisory results are reported but do not make the instance unready
	// (see AddAdvisory).
	Advisory bool
}

// Checker runs the readiness checks. Set fields before serving.
type Checker struct {
	// Timeout bounds one evaluation of all checks (they run concurrently).
	// Default 2 s.
	Timeout time.Duration
	// CacheFor reuses a verdict for this long. /readyz is public: without a
	// cache, anyone could flood the writer queue with probes. Default 1 s.
	CacheFor time.Duration
	// Log receives a line when a check starts failing and when it recovers.
	Log *slog.Logger

	mu      sync.Mutex
	checks  []named
	last    []Result
	lastAt  time.Time
	failing map[string]bool
	flight  singleflight.Group
}

type named struct {
	name     string
	fn       CheckFunc
	advisory bool
}

// New returns a Checker with the default timeout and cache.
func New(log *slog.Logger) *Checker {
	return &Checker{Timeout: 2 * time.Second, CacheFor: time.Second, Log: log}
}

// Add registers a readiness check under name (e.g. "replication").
func (c *Checker) Add(name string, fn CheckFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, named{name: name, fn: fn})
	c.lastAt = time.Time{}
}

// AddAdvisory registers a check that is reported like any other (its error
// in DetailHandler, "failing" on /readyz) but never makes the instance
// unready: a condition to alert on while the instance still does its job
// (e.g. a replica that is down while deliveries are kept locally).
func (c *Checker) AddAdvisory(name string, fn CheckFunc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks = append(c.checks, named{name: name, fn: fn, advisory: true})
	c.lastAt = time.Time{}
}

// Ready evaluates every check (or returns the cached verdict) and reports
// whether all passed.
func (c *Checker) Ready(ctx context.Context) (bool, []Result) {
	c.mu.Lock()
	if !c.lastAt.IsZero() && time.Since(c.lastAt) < c.CacheFor {
		res := c.last
		c.mu.Unlock()
		return allOK(res), res
	}
	c.mu.Unlock()
	// Concurrent callers share one evaluation.
	v, _, _ := c.flight.Do("ready", func() (any, error) {
		res := c.run(context.WithoutCancel(ctx))
		c.mu.Lock()
		c.last, c.lastAt = res, time.Now()
		c.mu.Unlock()
		return res, nil
	})
	res := v.([]Result)
	return allOK(res), res
}

func (c *Checker) run(ctx context.Context) []Result {
	c.mu.Lock()
	checks := slices.Clone(c.checks)
	c.mu.Unlock()
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res := make([]Result, len(checks))
	var wg sync.WaitGroup
	for i, ch := range checks {
		wg.Go(func() {
			done := make(chan error, 1)
			go func() { done <- ch.fn(ctx) }()
			// A check that ignores ctx must not hold up the answer; one that
			// honours it gets a moment to say why it gave up (half the
			// timeout: on a busy machine 100 ms was too short to be
			// scheduled, and the answer said "no answer" instead of why).
			grace := time.NewTimer(timeout + max(timeout/2, 100*time.Millisecond))
			defer grace.Stop()
			select {
			case err := <-done:
				res[i] = Result{Name: ch.name, Err: err, Advisory: ch.advisory}
			case <-grace.C:
				res[i] = Result{Name: ch.name, Err: fmt.Errorf("no answer within %v: %w", timeout, context.DeadlineExceeded), Advisory: ch.advisory}
			}
		})
	}
	wg.Wait()
	c.logTransitions(res)
	return res
}

func (c *Checker) logTransitions(res []Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing == nil {
		c.failing = map[string]bool{}
	}
	for _, r := range res {
		was := c.failing[r.Name]
		c.failing[r.Name] = r.Err != nil
		if c.Log == nil {
			continue
		}
		switch {
		case r.Err != nil && !was:
			c.Log.Warn("readiness check failing", "check", r.Name, "error", r.Err.Error())
		case r.Err == nil && was:
			c.Log.Info("readiness check recovered", "check", r.Name)
		}
	}
}

func allOK(res []Result) bool {
	for _, r := range res {
		if r.Err != nil && !r.Advisory {
			return false
		}
	}
	return true
}

// Routes registers GET /healthz and GET /readyz. These sit on the public
// listener, so /readyz names the failing checks but never their errors
// (paths, driver messages); the logs and DetailHandler have those.
func (c *Checker) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /readyz", c.handler(false))
}

// DetailHandler answers like /readyz but includes each failing check's error,
// for the authenticated admin listener.
func (c *Checker) DetailHandler() http.Handler { return c.handler(true) }

type report struct {
	Status string            `json:"status"` // ready or unready
	Checks map[string]string `json:"checks"` // name -> ok, failing, or the error (detail)
}

func (c *Checker) handler(detail bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ok, res := c.Ready(r.Context())
		rep := report{Status: "ready", Checks: make(map[string]string, len(res))}
		code := http.StatusOK
		if !ok {
			rep.Status, code = "unready", http.StatusServiceUnavailable
		}
		for _, r := range res {
			switch {
			case r.Err == nil:
				rep.Checks[r.Name] = "ok"
			case detail:
				rep.Checks[r.Name] = r.Err.Error()
			default:
				rep.Checks[r.Name] = "failing"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(rep)
	})
}
