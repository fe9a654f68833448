package receiver

import (
	"testing"
	"time"
)

// A source's first refusal is logged at once; the next ones within
// refusalEvery are left out and counted, and the first after it carries
// that count. Each source has its own allowance.
func TestRefusalLogLimitsEachSource(t *testing.T) {
	var l refusalLog
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	if ok, n := l.allow("acme 10.0.0.1", t0); !ok || n != 0 {
		t.Fatalf("the first refusal: %v, %d suppressed", ok, n)
	}
	for i := 1; i <= 5; i++ {
		if ok, _ := l.allow("acme 10.0.0.1", t0.Add(time.Duration(i)*time.Second)); ok {
			t.Fatalf("refusal %d within the interval was logged", i)
		}
	}
	if ok, _ := l.allow("acme 10.0.0.2", t0.Add(time.Second)); !ok {
		t.Error("another source's first refusal was left out")
	}
	if ok, n := l.allow("acme 10.0.0.1", t0.Add(refusalEvery)); !ok || n != 5 {
		t.Errorf("after the interval: %v with %d suppressed, want logged with 5", ok, n)
	}
	if ok, n := l.allow("acme 10.0.0.1", t0.Add(3*refusalEvery)); !ok || n != 0 {
		t.Errorf("a quiet source: %v with %d suppressed, want logged with 0", ok, n)
	}
}

// The sources remembered stay bounded: quiet ones are forgotten.
func TestRefusalLogForgetsQuietSources(t *testing.T) {
	var l refusalLog
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for i := range maxRefusalSources {
		l.allow(string(rune(i)), t0)
	}
	l.allow("late", t0.Add(refusalEvery))
	if len(l.by) != 1 {
		t.Errorf("%d sources remembered, want only the one heard since", len(l.by))
	}
}
