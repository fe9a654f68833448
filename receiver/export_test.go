package receiver

import "context"

// The tests that drive the handler through testenv are in package
// receiver_test (testenv imports receiver); these give them its seams.

// Hold takes n bytes of the budget, as stalled senders would.
func (b *BodyBudget) Hold(ctx context.Context, n int64) error { return b.sem.Acquire(ctx, n) }

// Give returns n bytes Hold took.
func (b *BodyBudget) Give(n int64) { b.sem.Release(n) }

// TryHold is Hold without waiting: false if n bytes are not free.
func (b *BodyBudget) TryHold(n int64) bool { return b.sem.TryAcquire(n) }

// Held is the budget's bytes that bodies being read or answered hold.
func (b *BodyBudget) Held() int64 { return b.held.Load() }

// Reading is the number of requests reading a body under the budget.
func (b *BodyBudget) Reading() int64 { return b.reading.Load() }

// ReadArriving is readArriving, for the tests of how a buffer grows.
var ReadArriving = readArriving
