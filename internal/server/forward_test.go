package server

import (
	"testing"
	"time"
)

// Only group commits of several items on average (a writer near its
// capacity) make serve busy for the relay; lone commits, as light traffic
// makes, never do, nor does the odd batch of several among them, as
// 1,000 webhooks/s make; and a writer idle for busyWindow is not busy.
func TestBusyWriterCountsSustainedGroupCommits(t *testing.T) {
	now := time.Unix(1_764_590_000, 0)
	b := busyWriter{now: func() time.Time { return now }}
	commit := func(sizes ...int) {
		for _, n := range sizes {
			now = now.Add(time.Millisecond)
			b.committed(n)
		}
	}
	if b.busy() {
		t.Fatal("busy before any commit")
	}
	commit(1)
	if b.busy() {
		t.Fatal("a lone commit made the writer busy")
	}
	for range 50 { // as at 1,000 webhooks/s: mostly alone, now and then a few together
		commit(1, 1, 1, 1, 1, 1, 1, 8)
		if b.busy() {
			t.Fatalf("busy at mean %.2f, from lone commits and a batch of 8 among them", b.mean)
		}
	}
	commit(16, 12, 14, 16, 9, 13)
	if !b.busy() {
		t.Fatalf("batches of 9 to 16 in a row did not make the writer busy (mean %.2f)", b.mean)
	}
	now = now.Add(busyWindow)
	if b.busy() {
		t.Fatal("still busy after a window without commits")
	}
	commit(2)
	if b.busy() {
		t.Fatal("a batch after an idle window continued the old average")
	}
}
