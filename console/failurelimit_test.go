package console

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// The table of addresses with failures stays bounded however many
// addresses guess; a full table drops expired windows first, then the
// oldest, and keeps counting the newest guessers.
func TestFailureLimitBounded(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFailureLimit(func() time.Time { return now })
	for i := range maxSources + 500 {
		f.fail(fmt.Sprintf("10.%d.%d.%d", i>>16, (i>>8)&255, i&255))
		now = now.Add(time.Millisecond)
	}
	if len(f.m) > maxSources {
		t.Fatalf("%d addresses kept, want at most %d", len(f.m), maxSources)
	}
	if _, ok := f.m["10.0.0.0"]; ok {
		t.Error("the oldest address is still kept in a full table")
	}
	last := fmt.Sprintf("10.%d.%d.%d", (maxSources+499)>>16, ((maxSources+499)>>8)&255, (maxSources+499)&255)
	for range maxFailures - 1 {
		f.fail(last)
	}
	if !f.blocked(last) {
		t.Errorf("%s failed %d times and is not blocked", last, maxFailures)
	}
	now = now.Add(failureWindow)
	f.fail("192.0.2.1")
	if len(f.m) > maxSources || f.blocked(last) {
		t.Errorf("after the window: %d kept, %s blocked %v", len(f.m), last, f.blocked(last))
	}
}

// Sign-ins count against the connection's address, an IPv6 one by its /64,
// never against a header the client chooses.
func TestFailureSource(t *testing.T) {
	for _, c := range []struct{ remote, xff, want string }{
		{"192.0.2.7:51000", "", "192.0.2.7"},
		{"192.0.2.7:51000", "198.51.100.1", "192.0.2.7"},
		{"[2001:db8:1:2:3:4:5:6]:443", "", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2:ffff::1]:443", "", "2001:db8:1:2::/64"},
		{"[::ffff:192.0.2.7]:80", "", "192.0.2.7"},
	} {
		r, _ := http.NewRequest("POST", "/ui/signin", nil)
		r.RemoteAddr = c.remote
		if c.xff != "" {
			r.Header.Set("X-Forwarded-For", c.xff)
		}
		if got := source(r); got != c.want {
			t.Errorf("%s (X-Forwarded-For %q): %s, want %s", c.remote, c.xff, got, c.want)
		}
	}
}
