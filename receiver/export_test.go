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
