// Package await is the tests' one way to wait: for a condition, never for a
// fixed time. A loaded machine stretches every step, and a sleep that was
// long enough on a quiet one is not. It imports nothing of the module, so
// the tests of every package can use it, the storage's and the writer's
// included.
package await

import (
	"testing"
	"time"
)

// Eventually calls cond until it returns true and returns how long that
// took; if timeout passes first, it fails the test naming what was awaited.
// It polls every millisecond at first and backs off to every 50 ms, so a
// condition that turns true at once costs no more than a millisecond or two
// and a slow one does not spin.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	begin := time.Now()
	pause := time.Millisecond
	for deadline := begin.Add(timeout); !cond(); pause = min(2*pause, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(pause)
	}
	return time.Since(begin)
}
