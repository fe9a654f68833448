package schema

import (
	"context"
	"database/sql"
	"errors"
)

// A forwarding destination's relay state (forward_destinations, migration
// 0007): paused by an operator, backed off while it fails.

// DestinationState is a destination's relay state: paused by an operator,
// and Failures attempts in a row failed, so nothing is attempted before
// BackoffUntil (unix ms).
type DestinationState struct {
	Name         string        `db:"name"`
	Paused       bool          `db:"paused"`
	PausedAt     sql.NullInt64 `db:"paused_at"`
	Failures     int           `db:"failures"`
	BackoffUntil int64         `db:"backoff_until"`
	LastError    string        `db:"last_error"`
	UpdatedAt    int64         `db:"updated_at"`
}

// EnsureDestination adds a state row for name unless it has one.
func (b Batch) EnsureDestination(ctx context.Context, name string, now int64) error {
	_, err := b.tx.ExecContext(ctx, `INSERT INTO forward_destinations (name, updated_at) VALUES (?, ?) ON CONFLICT (name) DO NOTHING`, name, now)
	return err
}

// SaveBackoff stores a destination's failure streak and backoff; paused is
// left as it is.
func (b Batch) SaveBackoff(ctx context.Context, s DestinationState) error {
	_, err := b.tx.ExecContext(ctx, `INSERT INTO forward_destinations (name, failures, backoff_until, last_error, updated_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET failures = excluded.failures,
		backoff_until = excluded.backoff_until, last_error = excluded.last_error, updated_at = excluded.updated_at`,
		s.Name, s.Failures, s.BackoffUntil, s.LastError, s.UpdatedAt)
	return err
}

// SetPaused pauses or resumes a destination. Resuming also ends its backoff,
// so it is attempted at once.
func (b Batch) SetPaused(ctx context.Context, name string, paused bool, now int64) error {
	var at any
	flag := 0 // an integer column on both engines
	if paused {
		at, flag = now, 1
	}
	_, err := b.tx.ExecContext(ctx, `INSERT INTO forward_destinations (name, paused, paused_at, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, paused_at = excluded.paused_at, updated_at = excluded.updated_at,
		failures = CASE WHEN excluded.paused = 0 THEN 0 ELSE forward_destinations.failures END,
		backoff_until = CASE WHEN excluded.paused = 0 THEN 0 ELSE forward_destinations.backoff_until END`, name, flag, at, now)
	return err
}

// DestinationState reads name's state; a destination without a row has the
// zero state.
func (db *DB) DestinationState(ctx context.Context, name string) (DestinationState, error) {
	s := DestinationState{Name: name}
	err := db.Read.GetContext(ctx, &s, `SELECT name, paused, paused_at, failures, backoff_until, last_error, updated_at
		FROM forward_destinations WHERE name = ?`, name)
	if errors.Is(err, sql.ErrNoRows) {
		return DestinationState{Name: name}, nil
	}
	return s, err
}
