package schema

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// Replay is one replay of a stored receipt: what its status was and became,
// and which handler versions applied it before and now. Times in unix ms.
type Replay struct {
	Provider           string
	EventID            string
	ReplayedAt         int64
	FromStatus         string
	ToStatus           string
	Error              string
	FromHandlerVersion string
	HandlerVersion     string
}

// InsertReplay records r in the transaction that reapplied the receipt
// (GetReceipt, UpdateReceiptStatus): verify follows the replays from a
// receipt's first status to its current one.
func (b Batch) InsertReplay(ctx context.Context, r Replay) error {
	_, err := b.tx.ExecContext(ctx, `INSERT INTO replays
		(provider, event_id, replayed_at, from_status, to_status, error, from_handler_version, handler_version)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.Provider, r.EventID, r.ReplayedAt, r.FromStatus, r.ToStatus, r.Error,
		r.FromHandlerVersion, r.HandlerVersion)
	return err
}

// EventIDsWithStatus lists the event ids of provider's receipts in status
// received at or after since (unix ms), in arrival order: what a bulk replay
// selects. The (status, received_at) index serves it.
func (db *DB) EventIDsWithStatus(ctx context.Context, provider, status string, since int64) ([]string, error) {
	var ids []string
	err := sqlx.SelectContext(ctx, db.Read, &ids, `SELECT event_id FROM receipts
		WHERE status = ? AND received_at >= ? AND provider = ? ORDER BY received_at, id`, status, since, provider)
	return ids, err
}
