package schema

import "context"

// FeedEvent is one receipt of the pull feed.
type FeedEvent struct {
	ID         int64  `db:"id"`
	Provider   string `db:"provider"`
	EventID    string `db:"event_id"`
	EventType  string `db:"event_type"`
	Status     string `db:"status"`
	Source     string `db:"source"`
	ReceivedAt int64  `db:"received_at"`
	Body       []byte `db:"body"`
	Pruned     bool   `db:"pruned"`
}

// EventFeed reads up to limit receipts with an id above after, in id order.
// A receipt's id is its place in the receipts chain, assigned from the chain
// head inside the write transaction that holds the write lock (on
// PostgreSQL, the head row's lock): a batch that commits later always has
// higher ids than every batch before it. So id order is commit order, and a
// reader that has seen id N will never later find a new receipt below N.
func (db *DB) EventFeed(ctx context.Context, after int64, limit int) ([]FeedEvent, error) {
	var out []FeedEvent
	err := db.Read.SelectContext(ctx, &out, `SELECT id, provider, event_id, event_type, status, source, received_at, body, body IS NULL AS pruned
		FROM receipts WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	return out, err
}
