package server

import "testing"

// Only a batch of several items (group commit under load) makes serve busy
// for the relay; lone commits, as light traffic makes, never do.
func TestBusyWriterCountsOnlyGroupCommits(t *testing.T) {
	var b busyWriter
	if b.busy() {
		t.Fatal("busy before any commit")
	}
	b.committed(1)
	if b.busy() {
		t.Fatal("a lone commit made the writer busy")
	}
	b.committed(7)
	if !b.busy() {
		t.Fatal("a batch of 7 did not make the writer busy")
	}
}
