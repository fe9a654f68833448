package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/jmoiron/sqlx"
)

// Mismatch is an authenticated delivery that reused a stored event id with a
// different body: the original was kept, this one had no effect. Expected
// when reconcile inserted an event from the provider's API and the webhook
// came later (the API's JSON bytes differ from the webhook's); anything else
// deserves a look.
type Mismatch struct {
	Provider        string    `db:"provider" json:"provider"`
	EventID         string    `db:"event_id" json:"event_id"`
	OriginalSource  string    `db:"source" json:"original_source"`
	OriginalSHA256  []byte    `db:"original_sha256" json:"-"`
	OriginalAt      int64     `db:"original_at" json:"-"`
	DuplicateSHA256 []byte    `db:"duplicate_sha256" json:"-"`
	DuplicateAt     int64     `db:"duplicate_at" json:"-"`
	RemoteAddr      string    `db:"remote_addr" json:"remote_addr"`
	RequestID       string    `db:"request_id" json:"request_id"`
	OriginalHex     string    `db:"-" json:"original_sha256"`
	DuplicateHex    string    `db:"-" json:"duplicate_sha256"`
	OriginalTime    time.Time `db:"-" json:"original_received_at"`
	DuplicateTime   time.Time `db:"-" json:"duplicate_received_at"`
}

// MismatchFilter narrows Mismatches; zero fields match everything.
type MismatchFilter struct {
	Provider string
	Since    time.Time
	Limit    int // default 1000
}

// Mismatches lists payload_mismatch attempts with both digests and times,
// oldest first.
func Mismatches(ctx context.Context, db sqlx.QueryerContext, f MismatchFilter) ([]Mismatch, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	q := `SELECT a.provider, a.event_id, r.source, r.body_sha256 AS original_sha256, r.received_at AS original_at,
			a.body_sha256 AS duplicate_sha256, a.received_at AS duplicate_at, a.remote_addr, a.request_id
		FROM delivery_attempts a JOIN receipts r ON r.provider = a.provider AND r.event_id = a.event_id
		WHERE a.outcome = 'payload_mismatch' AND a.received_at >= ?`
	args := []any{f.Since.UnixMilli()}
	if f.Provider != "" {
		q += ` AND a.provider = ?`
		args = append(args, f.Provider)
	}
	q += ` ORDER BY a.received_at, a.id LIMIT ?`
	args = append(args, f.Limit)
	var ms []Mismatch
	if err := sqlx.SelectContext(ctx, db, &ms, q, args...); err != nil {
		return nil, fmt.Errorf("list mismatches: %w", err)
	}
	for i := range ms {
		m := &ms[i]
		m.OriginalHex, m.DuplicateHex = fmt.Sprintf("%x", m.OriginalSHA256), fmt.Sprintf("%x", m.DuplicateSHA256)
		m.OriginalTime, m.DuplicateTime = time.UnixMilli(m.OriginalAt).UTC(), time.UnixMilli(m.DuplicateAt).UTC()
	}
	return ms, nil
}
