package schema

import (
	"context"
	"strings"

	"github.com/jmoiron/sqlx"
)

// Receipt is a stored receipt: an authenticated event as custody holds it.
type Receipt struct {
	Provider       string `db:"provider"`
	EventID        string `db:"event_id"`
	EventType      string `db:"event_type"`
	Status         string `db:"status"`
	Error          string `db:"error"`
	Source         string `db:"source"`
	HandlerVersion string `db:"handler_version"`
	ReceivedAt     int64  `db:"received_at"`
	ProcessedAt    int64  `db:"processed_at"`
	// Body is nil when retention pruned it (Pruned), and possibly when it was
	// empty: an empty body is not a pruned one.
	Body             []byte `db:"body"`
	Pruned           bool   `db:"pruned"`
	BodySHA256       []byte `db:"body_sha256"`
	SignatureHeaders string `db:"signature_headers"`
}

// maxEventIDs bounds the event ids bound in one query, well under SQLite's
// variable limit.
const maxEventIDs = 500

// eventIDChunks calls fn with provider's ids maxEventIDs at a time, as the
// arguments and the IN list of provider = ? AND event_id IN (…).
func eventIDChunks(provider string, ids []string, fn func(in string, args []any) error) error {
	for len(ids) > 0 {
		n := min(maxEventIDs, len(ids))
		args := make([]any, 0, n+1)
		args = append(args, provider)
		for _, id := range ids[:n] {
			args = append(args, id)
		}
		if err := fn(`provider = ? AND event_id IN (?`+strings.Repeat(", ?", n-1)+`)`, args); err != nil {
			return err
		}
		ids = ids[n:]
	}
	return nil
}

// EventReceipts reads the receipts of provider's events eventIDs that exist,
// in no particular order; the unique (provider, event_id) index answers it.
func (tx *ReadTx) EventReceipts(ctx context.Context, provider string, eventIDs []string) ([]Receipt, error) {
	var out []Receipt
	err := eventIDChunks(provider, eventIDs, func(in string, args []any) error {
		var rs []Receipt
		if err := sqlx.SelectContext(ctx, tx.tx, &rs, `SELECT provider, event_id, event_type, status, error, source, handler_version,
			received_at, processed_at, body, body IS NULL AS pruned, body_sha256, signature_headers FROM receipts WHERE `+in, args...); err != nil {
			return err
		}
		out = append(out, rs...)
		return nil
	})
	return out, err
}

// HasReceipt reports whether provider holds a receipt for eventID.
func (db *DB) HasReceipt(ctx context.Context, provider, eventID string) (bool, error) {
	var n int
	// The unique (provider, event_id) index answers it.
	err := db.Read.QueryRowxContext(ctx, `SELECT COUNT(*) FROM receipts WHERE provider = ? AND event_id = ?`, provider, eventID).Scan(&n)
	return n > 0, err
}

// ReceiptsPresent returns which of provider's eventIDs have a receipt.
func (db *DB) ReceiptsPresent(ctx context.Context, provider string, eventIDs []string) ([]string, error) {
	return present(ctx, db.Read, `SELECT event_id FROM receipts WHERE provider = ? AND event_id IN (?)`, provider, eventIDs, 1)
}

// present runs query, of the form SELECT event_id FROM t WHERE provider = ?
// AND event_id IN (?), for provider and eventIDs. A database older than
// migration version has no table t, and so none of the ids.
func present(ctx context.Context, q sqlx.QueryerContext, query, provider string, eventIDs []string, version int) ([]string, error) {
	query, args, err := sqlx.In(query, provider, eventIDs)
	if err != nil {
		return nil, err
	}
	var found []string
	if err := sqlx.SelectContext(ctx, q, &found, query, args...); err != nil {
		if predates(ctx, q, version) {
			return nil, nil
		}
		return nil, err
	}
	return found, nil
}
