package schema

import "github.com/jmoiron/sqlx"

// Batch is the writer's batch transaction (BEGIN IMMEDIATE on the single
// write connection). The writes beside the hot path (reconcile checkpoints,
// redelivery requests, retention) run through its typed methods, with no
// SQL of their own; the writer commits the batch.
//
// Declared here until the ledger's storage move (schema/chain.go) declares
// it, in the same shape, with the chain head's reads.
type Batch struct{ *sqlx.Tx }
