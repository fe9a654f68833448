package config

import (
	"strings"
	"testing"
	"time"
)

// A usage mapping's event-time window: documented defaults when unset, a
// positive duration or "off" when set; zero, a negative or a bad value is a
// startup error naming the line and the key.
func TestUsageWindow(t *testing.T) {
	mapping := func(extra string) []byte {
		return []byte(meterProvider + "usage:\n  - type: t\n    customer: c\n    meter: m\n    quantity: q\n" + extra)
	}
	for _, tc := range []struct {
		name, extra  string
		future, past time.Duration
	}{
		{"defaults", "", DefaultMaxFuture, DefaultMaxPast},
		{"stripe's", "    max_future: 5m\n    max_past: 35d\n", 5 * time.Minute, 35 * 24 * time.Hour},
		{"off", "    max_future: off\n    max_past: off\n", 0, 0},
	} {
		c, err := Parse(mapping(tc.extra), t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if u := c.Usage[0]; u.MaxFuture.Max != tc.future || u.MaxPast.Max != tc.past {
			t.Errorf("%s: max_future %s, max_past %s; want %s, %s", tc.name, u.MaxFuture.Max, u.MaxPast.Max, tc.future, tc.past)
		}
	}
	for _, tc := range []struct{ extra, want string }{
		{"    max_future: 0\n", "10: usage[0].max_future: \"0\": want a positive duration (e.g. 5m, 35d), or off to accept any event time"},
		{"    max_past: 0s\n", "10: usage[0].max_past: \"0s\": want a positive duration"},
		{"    max_past: -5m\n", "10: usage[0].max_past: \"-5m\": want a positive duration"},
		{"    max_past: soon\n", "10: usage[0].max_past: invalid duration \"soon\" (use e.g. 300s, 5m, 72h or 30d), or off"},
		{"    max_future: 1.5d\n", "10: usage[0].max_future: invalid duration \"1.5d\""},
	} {
		_, err := Parse(mapping(tc.extra), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want %q", tc.extra, err, tc.want)
		}
	}
}
