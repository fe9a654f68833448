package schema

import "github.com/jmoiron/sqlx"

// Batch is the writer's batch transaction (BEGIN IMMEDIATE on the single
// write connection). The writes beside the hot path (reconcile checkpoints,
// redelivery requests, retention) run through its typed methods, with no
// SQL of their own; the writer commits the batch.
// The chain head and the refs of adjustments are read through it too
// (chain.go).
type Batch struct{ *sqlx.Tx }
