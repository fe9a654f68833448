package schema

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
)

// Checkpoint is where one provider's reconciliation stands (times in unix ms).
type Checkpoint struct {
	Provider         string `db:"provider"`
	WindowStart      int64  `db:"window_start"`
	WindowEnd        int64  `db:"window_end"`
	Cursor           string `db:"cursor"`
	Pages            int    `db:"pages"`
	CompletedThrough int64  `db:"completed_through"`
	UpdatedAt        int64  `db:"updated_at"`
}

// Checkpoint reads provider's checkpoint; found is false when it has none,
// or when the database predates reconcile (a read-only dry run may see one).
func (db *DB) Checkpoint(ctx context.Context, provider string) (cp Checkpoint, found bool, err error) {
	err = sqlx.GetContext(ctx, db.Read, &cp, `SELECT provider, window_start, window_end, cursor, pages, completed_through, updated_at
		FROM reconcile_checkpoints WHERE provider = ?`, provider)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Checkpoint{}, false, nil
	case err != nil && predates(ctx, db.Read, versionReconcile):
		return Checkpoint{}, false, nil
	case err != nil:
		return Checkpoint{}, false, err
	}
	return cp, true, nil
}

// SaveCheckpoint stores cp, replacing provider's previous checkpoint.
func (b Batch) SaveCheckpoint(ctx context.Context, cp Checkpoint) error {
	_, err := b.tx.ExecContext(ctx, `INSERT INTO reconcile_checkpoints
		(provider, window_start, window_end, cursor, pages, completed_through, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (provider) DO UPDATE SET window_start = excluded.window_start, window_end = excluded.window_end,
			cursor = excluded.cursor, pages = excluded.pages, completed_through = excluded.completed_through,
			updated_at = excluded.updated_at`,
		cp.Provider, cp.WindowStart, cp.WindowEnd, cp.Cursor, cp.Pages, cp.CompletedThrough, cp.UpdatedAt)
	return err
}

// Redelivery is a request made to a provider to send an event again.
type Redelivery struct {
	Provider    string
	EventID     string
	DeliveryID  string
	RequestedAt int64 // unix ms
	StatusCode  int   // the provider's answer
}

// RecordRedelivery remembers r; an event already asked for keeps its first request.
func (b Batch) RecordRedelivery(ctx context.Context, r Redelivery) error {
	_, err := b.tx.ExecContext(ctx, forBackend(b.tx, `INSERT INTO redelivery_requests (provider, event_id, delivery_id, requested_at, status_code)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (provider, event_id) DO NOTHING`), r.Provider, r.EventID, r.DeliveryID, r.RequestedAt, r.StatusCode)
	return err
}

// RedeliveriesRequested returns which of provider's eventIDs have a
// redelivery request; none on a database that predates reconcile.
func (db *DB) RedeliveriesRequested(ctx context.Context, provider string, eventIDs []string) ([]string, error) {
	return present(ctx, db.Read, `SELECT event_id FROM redelivery_requests WHERE provider = ? AND event_id IN (?)`,
		provider, eventIDs, versionReconcile)
}
