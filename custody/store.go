package custody

import (
	"context"

	"github.com/hookledger/hookledger/schema"
)

// What custody needs from storage, as small interfaces; the storage backend
// (schema) provides them and holds every SQL statement. The writer runs each
// batch in a schema.Batch, whose typed methods are the only writes it makes
// (the receipt, its attempt, usage rows, the chain head, a replay); custody
// keeps the batching, the two-pass commit, the chain and the replies.

// Store is the write connection's side of storage (*schema.Writer, from
// schema.DB.OpenWriter): the hot path's statements, prepared once, and the
// batch transactions begun on them.
type Store interface {
	// Begin starts a batch that holds the write lock until it ends, so the
	// chain head it reads stays the head until it commits.
	Begin(ctx context.Context) (schema.Batch, error)
	Close() error
}

// ReplaySource selects the receipts a bulk replay re-applies (*schema.DB).
type ReplaySource interface {
	EventIDsWithStatus(ctx context.Context, provider, status string, since int64) ([]string, error)
}
