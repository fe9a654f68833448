package custody

import "time"

// The write-path tests drive the writer through the real HTTP handler, so they
// are in package custody_test (receiver imports custody); these give them the
// writer's test seams.

// SetTestHook makes the writer call f inside the transaction, after a new
// receipt is inserted and before its usage rows: a failure there must undo
// the receipt too.
func (w *Writer) SetTestHook(f func(*Delivery) error) { w.testHook = f }

// SetReplicaGather sets replicaGather and returns a function restoring it.
func SetReplicaGather(d time.Duration) (restore func()) {
	old := replicaGather
	replicaGather = d
	return func() { replicaGather = old }
}
