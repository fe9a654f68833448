package forward

import (
	"context"
	"time"
)

// The concurrency limit (adaptive.go) as the external tests drive it.

type Adaptive = adaptive

var NewAdaptive = newAdaptive

func (a *adaptive) Acquire(ctx context.Context) error { return a.acquire(ctx) }

func (a *adaptive) Release(sent time.Time, counted, healthy bool, latency time.Duration) {
	a.release(sent, counted, healthy, latency)
}

// Answer feeds one answer of a request sent at sent, with work waiting for
// a slot or not, without taking a slot.
func (a *adaptive) Answer(sent time.Time, waiting, healthy bool, latency time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.waiting = waiting
	a.adjust(sent, healthy, latency)
}

// Waiting reports whether an acquire is blocked at the limit.
func (a *adaptive) Waiting() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waiting
}

func (a *adaptive) InFlight() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inFlight
}
