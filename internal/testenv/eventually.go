package testenv

import (
	"testing"
	"time"
)

// Eventually calls cond every 50 ms until it returns true and returns how
// long that took; if timeout passes first, it fails the test naming what was
// awaited. Tests wait for a condition, never for a fixed time: a loaded
// machine stretches every step, and a sleep that was long enough on a quiet
// one is not.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	for deadline := begin.Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
	}
	return time.Since(begin)
}
