package schema

import (
	"context"

	"github.com/jmoiron/sqlx"
)

// Attempt is one stored delivery attempt of an event. The first attempt of
// a receipt stored since migration 0009 is kept in the receipt's row and has
// no id of its own (ID 0); every other attempt is a delivery_attempts row,
// ID its row id (ids grow in arrival order).
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

// versionFirstAttempt is the migration that keeps a receipt's first attempt
// in its row (receipts.status_code IS NOT NULL); a receipt stored before it
// has its first attempt as a delivery_attempts row.
const versionFirstAttempt = 9

// inlineAttempts selects the first attempts kept in receipts rows as
// delivery attempts, with the columns of attemptColumns.
const inlineAttempts = `SELECT provider, event_id, 0 AS id, received_at, remote_addr, user_agent, request_id,
	body_sha256, signature_headers, signature_age_ms, 'inserted' AS outcome, status_code FROM receipts WHERE status_code IS NOT NULL`

const attemptColumns = `provider, event_id, id, received_at, remote_addr, user_agent, request_id,
	body_sha256, signature_headers, signature_age_ms, outcome, status_code`

const insertAttemptSQL = `INSERT INTO delivery_attempts
	(provider, event_id, received_at, remote_addr, user_agent, request_id, body_sha256, signature_headers, signature_age_ms, outcome, status_code)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// InsertAttempt records a redelivery (outcome duplicate or
// payload_mismatch) of an event that has its receipt; the attempt that
// inserted a receipt is stored with it (InsertReceipt). ID is assigned, and
// ignored here. a is passed by value, once per delivery.
func (b Batch) InsertAttempt(ctx context.Context, a Attempt) error {
	if b.pg != nil {
		b.pg.attempts = append(b.pg.attempts, a)
		return nil
	}
	_, err := b.tx.ExecContext(ctx, insertAttemptSQL, a.Provider, a.EventID, a.ReceivedAt, a.RemoteAddr, a.UserAgent, a.RequestID,
		a.BodySHA256, a.SignatureHeaders, signatureAge(a.SignatureAgeMS), a.Outcome, a.StatusCode)
	return err
}

// signatureAge is a plain int64 (or nil) in the interface: database/sql
// would dereference a pointer by reflection.
func signatureAge(ms *int64) any {
	if ms == nil {
		return nil
	}
	return *ms
}

// EventAttempts reads every delivery attempt of provider's events eventIDs,
// wherever it is stored, event by event (in event id order): the first
// attempt first (kept in the receipt, or on a receipt from before migration
// 0009 the oldest delivery_attempts row), then the redeliveries in id
// (arrival) order.
func (tx *ReadTx) EventAttempts(ctx context.Context, provider string, eventIDs []string) ([]Attempt, error) {
	// A read-only open of an older database has no first attempts in its
	// receipts. Asked first, not after a failed query: on PostgreSQL a
	// failed statement ends the read transaction.
	older := predates(ctx, tx.tx, versionFirstAttempt)
	var out []Attempt
	err := eventIDChunks(provider, eventIDs, func(in string, args []any) error {
		var as []Attempt
		var err error
		if older {
			err = sqlx.SelectContext(ctx, tx.tx, &as, `SELECT `+attemptColumns+` FROM delivery_attempts WHERE `+in+` ORDER BY event_id, id`, args...)
		} else {
			// An inline attempt has id 0, so it sorts before its event's
			// rows. Both halves are probes of an index by event id (on
			// PostgreSQL the receipts' digest key, byEventKey, and the
			// attempts' hash index).
			err = sqlx.SelectContext(ctx, tx.tx, &as, byEventKey(tx.tx, inlineAttempts+` AND `+in+` UNION ALL SELECT `+attemptColumns+
				` FROM delivery_attempts WHERE `+in+` ORDER BY event_id, id`), append(args, args...)...)
		}
		if err != nil {
			return err
		}
		out = append(out, as...)
		return nil
	})
	return out, err
}

// AllAttempts reads every delivery attempt, wherever it is stored, event by
// event in (provider, event_id) order and within one event as EventAttempts
// orders them. It reads whole tables: for tests and small databases.
func (db *DB) AllAttempts(ctx context.Context) ([]Attempt, error) {
	var as []Attempt
	err := sqlx.SelectContext(ctx, db.Read, &as, inlineAttempts+` UNION ALL SELECT `+attemptColumns+
		` FROM delivery_attempts ORDER BY provider, event_id, id`)
	if err != nil && predates(ctx, db.Read, versionFirstAttempt) {
		err = sqlx.SelectContext(ctx, db.Read, &as, `SELECT `+attemptColumns+` FROM delivery_attempts ORDER BY provider, event_id, id`)
	}
	return as, err
}

// CountAttempts counts every delivery attempt: the first attempts kept in
// receipts and the delivery_attempts rows. The first half reads every
// receipt (no index holds status_code): for tests, copy and bench, not for
// a scrape.
func (db *DB) CountAttempts(ctx context.Context) (int64, error) {
	var n int64
	err := db.Read.GetContext(ctx, &n, `SELECT (SELECT COUNT(status_code) FROM receipts) + (SELECT COUNT(*) FROM delivery_attempts)`)
	if err != nil && predates(ctx, db.Read, versionFirstAttempt) {
		err = db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM delivery_attempts`)
	}
	return n, err
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
	if err := sqlx.SelectContext(ctx, db.Read, &ms, keyJoins(db.Read, q), args...); err != nil {
		return nil, err
	}
	return ms, nil
}
