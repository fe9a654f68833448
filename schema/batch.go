package schema

import "github.com/jmoiron/sqlx"

// Batch is the writer's transaction as the writes beside the hot path see
// it (checkpoints, redelivery requests, retention): typed statements, no SQL
// of their own. The writer opens the transaction on the one write connection
// and commits the batch; a Batch only runs statements inside it.
type Batch struct{ tx *sqlx.Tx }

// NewBatch wraps the writer's transaction tx.
func NewBatch(tx *sqlx.Tx) *Batch { return &Batch{tx: tx} }
