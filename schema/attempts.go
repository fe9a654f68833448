package schema

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// Attempt is one stored delivery attempt of an event.
type Attempt struct {
	ID               int64  `db:"id"`
	Provider         string `db:"provider"`
	EventID          string `db:"event_id"`
	ReceivedAt       int64  `db:"received_at"`
	RemoteAddr       string `db:"remote_addr"`
	UserAgent        string `db:"user_agent"`
	RequestID        string `db:"request_id"`
	BodySHA256       []byte `db:"body_sha256"`
	SignatureHeaders string `db:"signature_headers"`
	// SignatureAgeMS is nil when the scheme signs no timestamp.
	SignatureAgeMS *int64 `db:"signature_age_ms"`
	Outcome        string `db:"outcome"`
	StatusCode     int    `db:"status_code"`
}

const insertAttemptSQL = `INSERT INTO delivery_attempts
	(provider, event_id, received_at, remote_addr, user_agent, request_id, body_sha256, signature_headers, signature_age_ms, outcome, status_code)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// InsertAttempt records one delivery attempt (ID is assigned, and ignored
// here). a is passed by value, once per delivery.
func (b Batch) InsertAttempt(ctx context.Context, a Attempt) error {
	if b.pg != nil {
		b.pg.attempts = append(b.pg.attempts, a)
		return nil
	}
	// A plain int64 (or nil) in the interface: database/sql would
	// dereference a pointer by reflection.
	var age any
	if a.SignatureAgeMS != nil {
		age = *a.SignatureAgeMS
	}
	_, err := b.st.insertAttempt.ExecContext(ctx, a.Provider, a.EventID, a.ReceivedAt, a.RemoteAddr, a.UserAgent, a.RequestID,
		a.BodySHA256, a.SignatureHeaders, age, a.Outcome, a.StatusCode)
	return err
}

// EventAttempts reads every delivery attempt of provider's events eventIDs,
// in id (arrival) order within each event.
func (tx *ReadTx) EventAttempts(ctx context.Context, provider string, eventIDs []string) ([]Attempt, error) {
	var out []Attempt
	err := eventIDChunks(provider, eventIDs, func(in string, args []any) error {
		var as []Attempt
		if err := sqlx.SelectContext(ctx, tx.tx, &as, `SELECT provider, event_id, id, received_at, remote_addr, user_agent, request_id,
			body_sha256, signature_headers, signature_age_ms, outcome, status_code FROM delivery_attempts WHERE `+in+` ORDER BY id`, args...); err != nil {
			return err
		}
		out = append(out, as...)
		return nil
	})
	return out, err
}

// Mismatch is a payload_mismatch attempt beside the receipt it collided with.
type Mismatch struct {
	Provider        string `db:"provider"`
	EventID         string `db:"event_id"`
	OriginalSource  string `db:"source"`
	OriginalSHA256  []byte `db:"original_sha256"`
	OriginalAt      int64  `db:"original_at"`
	DuplicateSHA256 []byte `db:"duplicate_sha256"`
	DuplicateAt     int64  `db:"duplicate_at"`
	RemoteAddr      string `db:"remote_addr"`
	RequestID       string `db:"request_id"`
}

// MismatchFilter narrows PayloadMismatches.
type MismatchFilter struct {
	Provider string // "" for every provider
	Since    int64  // attempts received at or after, unix ms
	Limit    int
}

// PayloadMismatches lists payload_mismatch attempts received since f.Since,
// oldest first: over the partial index of mismatches by received_at, or for
// one provider over its attempts' (provider, event_id) index.
func (db *DB) PayloadMismatches(ctx context.Context, f MismatchFilter) ([]Mismatch, error) {
	q := `SELECT a.provider, a.event_id, r.source, r.body_sha256 AS original_sha256, r.received_at AS original_at,
			a.body_sha256 AS duplicate_sha256, a.received_at AS duplicate_at, a.remote_addr, a.request_id
		FROM delivery_attempts a JOIN receipts r ON r.provider = a.provider AND r.event_id = a.event_id
		WHERE a.outcome = 'payload_mismatch' AND a.received_at >= ?`
	args := []any{f.Since}
	if f.Provider != "" {
		q += ` AND a.provider = ?`
		args = append(args, f.Provider)
	}
	q += ` ORDER BY a.received_at, a.id LIMIT ?`
	args = append(args, f.Limit)
	var ms []Mismatch
	if err := sqlx.SelectContext(ctx, db.Read, &ms, q, args...); err != nil {
		return nil, err
	}
	return ms, nil
}
