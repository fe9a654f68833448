package forward

import (
	"context"
	"sync"
	"time"
)

// adaptive is a destination's concurrency limit: how many of its requests
// may be in flight. It moves between floor (the destination's concurrency)
// and ceiling (max_concurrency) the way TCP's congestion window does (AIMD,
// Reno-style), per answer rather than per batch, so it reacts within one
// round of requests:
//
//   - It grows only while work waits for a slot (the batch has more
//     messages than the limit lets out) and the answer was healthy: a 2xx
//     no slower than twice the recent typical latency. Below the threshold
//     (the ceiling at first, the limit after a cut) each such answer adds
//     one, doubling the limit per round (slow start); above it a round of
//     them (limit answers) adds one.
//   - Any other outcome (an error status, 429, a timeout, a refused
//     connection) halves it, at most once per round: answers to requests
//     sent before the last cut were sent at the old limit and do not cut
//     again. The threshold becomes the halved limit.
//
// A slow answer that is still a 2xx holds the limit where it is: a
// destination whose latency climbs with its load stops being pushed
// harder. Retry-After and the destination's backoff are record's to apply,
// whatever the limit: it only says how many requests may overlap.
//
// Its methods are safe for concurrent use: acquire from the worker that
// dispatches a batch, release from each request's goroutine.
type adaptive struct {
	floor, ceiling int

	mu        sync.Mutex
	limit     int
	threshold int // slow start below, additive increase above
	credit    int // healthy answers towards the next additive increase
	inFlight  int
	waiting   bool          // acquire is blocked: there is more work than the limit
	typical   time.Duration // moving average of 2xx latencies (0: none yet)
	cutAt     time.Time     // the last decrease
	freed     chan struct{} // a slot was released (capacity 1: one dispatcher waits)
}

// latencyWeight is the weight of each new 2xx latency in the moving
// average (1/16: it follows the destination over a few rounds, not one
// request).
const latencyWeight = 1.0 / 16

// newAdaptive starts at floor. A ceiling below floor is floor: a fixed limit.
func newAdaptive(floor, ceiling int) *adaptive {
	floor = max(floor, 1)
	ceiling = max(ceiling, floor)
	return &adaptive{floor: floor, ceiling: ceiling, limit: floor, threshold: ceiling,
		freed: make(chan struct{}, 1)}
}

// Limit is the current limit.
func (a *adaptive) Limit() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit
}

// acquire waits for a slot, or for ctx to end.
func (a *adaptive) acquire(ctx context.Context) error {
	for {
		a.mu.Lock()
		if a.inFlight < a.limit {
			a.inFlight++
			a.waiting = false
			a.mu.Unlock()
			return nil
		}
		a.waiting = true
		a.mu.Unlock()
		select {
		case <-a.freed:
		case <-ctx.Done():
			a.mu.Lock()
			a.waiting = false
			a.mu.Unlock()
			return context.Cause(ctx)
		}
	}
}

// release frees the slot of a request sent at sent, and adjusts the limit
// by what it found: healthy (a 2xx) or not, and its latency. A request
// that had no outcome (the relay stopped) passes counted false and leaves
// the limit alone.
func (a *adaptive) release(sent time.Time, counted, healthy bool, latency time.Duration) {
	a.mu.Lock()
	a.inFlight--
	if counted {
		a.adjust(sent, healthy, latency)
	}
	a.mu.Unlock()
	select {
	case a.freed <- struct{}{}:
	default:
	}
}

// adjust is the AIMD rule; a.mu is held.
func (a *adaptive) adjust(sent time.Time, healthy bool, latency time.Duration) {
	if !healthy {
		if sent.Before(a.cutAt) {
			return // sent at the limit already cut
		}
		a.limit = max(a.floor, a.limit/2)
		a.threshold, a.credit = a.limit, 0
		a.cutAt = time.Now()
		return
	}
	slow := a.typical > 0 && latency > 2*a.typical
	if a.typical == 0 {
		a.typical = latency
	} else {
		a.typical += time.Duration(latencyWeight * float64(latency-a.typical))
	}
	if slow || !a.waiting {
		return
	}
	if a.limit < a.threshold {
		a.limit++
	} else if a.credit++; a.credit >= a.limit {
		a.limit, a.credit = a.limit+1, 0
	}
	a.limit = min(a.limit, a.ceiling)
}
