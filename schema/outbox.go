package schema

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"

	"github.com/jmoiron/sqlx"
)

// versionOutbox is the migration that created outbox, outbox_attempts and
// forward_destinations.
const versionOutbox = 7

// Outbox statuses, as stored.
const (
	OutboxPending   = "pending"
	OutboxDelivered = "delivered"
	OutboxDead      = "dead"
)

// OutboxRow is one message to forward: a receipt for one destination. Times
// are unix ms.
type OutboxRow struct {
	ID            int64         `db:"id"`
	ReceiptID     int64         `db:"receipt_id"`
	Destination   string        `db:"destination"`
	MessageID     string        `db:"message_id"`
	Status        string        `db:"status"`
	Attempts      int           `db:"attempts"`
	CreatedAt     int64         `db:"created_at"`
	PendingSince  int64         `db:"pending_since"`
	NextAttemptAt int64         `db:"next_attempt_at"`
	LastAttemptAt sql.NullInt64 `db:"last_attempt_at"`
	DeliveredAt   sql.NullInt64 `db:"delivered_at"`
	LastStatus    int           `db:"last_status"`
	LastError     string        `db:"last_error"`
	Provider      string        `db:"provider"`   // the receipt's (reads only)
	EventID       string        `db:"event_id"`   // the receipt's (reads only)
	EventType     string        `db:"event_type"` // the receipt's (reads only)
	ReceivedAt    sql.NullInt64 `db:"received_at"`
}

const insertOutboxSQL = `INSERT INTO outbox (receipt_id, destination, message_id, status, created_at, pending_since, next_attempt_at)
	VALUES (?, ?, ?, 'pending', ?, ?, ?)`

// InsertOutbox stores a pending message for a receipt inserted in this
// batch, due at once (prepared: it runs on the hot path, once per matching
// destination of a new receipt).
func (b Batch) InsertOutbox(ctx context.Context, receiptID int64, destination, messageID string, now int64) error {
	if b.pg != nil {
		b.pg.outbox = append(b.pg.outbox, outboxRow{receiptID, destination, messageID, now})
		return nil
	}
	_, err := b.tx.ExecContext(ctx, insertOutboxSQL, receiptID, destination, messageID, now, now, now)
	return err
}

// OutboxClaim is a message the relay claimed for one attempt.
type OutboxClaim struct {
	ID           int64  `db:"id"`
	ReceiptID    int64  `db:"receipt_id"`
	MessageID    string `db:"message_id"`
	Attempts     int    `db:"attempts"` // before this attempt
	PendingSince int64  `db:"pending_since"`
	// Due is when the message was due by its own backoff, for a probe
	// (ClaimProbe); 0 from ClaimOutbox, which claims due messages only.
	Due int64 `db:"due"`
}

// ClaimOutbox claims up to limit of destination's pending messages due at
// now, oldest due first, unless the destination is paused: each gets
// next_attempt_at = leaseUntil, so no other claim takes it until the lease
// ends (the relay renews it while it works, RenewClaims), and a relay that
// dies mid-attempt leaves it due again afterwards. A claim closes an open
// Stripe push (open = 0): what the relay sends is what it carries now.
// On PostgreSQL the inner SELECT takes FOR UPDATE SKIP LOCKED, so relays of
// several receivers claim disjoint rows; SQLite's single writer needs no
// more.
func (b Batch) ClaimOutbox(ctx context.Context, destination string, now, leaseUntil int64, limit int) ([]OutboxClaim, error) {
	lock := ""
	if b.pg != nil {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var out []OutboxClaim
	b.claims.Add(1) // before it commits (Claims)
	err := b.tx.SelectContext(ctx, &out, `UPDATE outbox SET next_attempt_at = ?, open = 0 WHERE id IN (
		SELECT id FROM outbox WHERE destination = ? AND status = 'pending' AND next_attempt_at <= ?
		  AND NOT EXISTS (SELECT 1 FROM forward_destinations WHERE name = ? AND paused = 1)
		ORDER BY next_attempt_at, id LIMIT ?`+lock+`)
		RETURNING id, COALESCE(receipt_id, 0) AS receipt_id, message_id, attempts, pending_since`, leaseUntil, destination, now, destination, limit)
	return out, err
}

// ClaimProbe claims the pending message of destination that is due first,
// even if its own backoff has not run out, as the probe of a destination
// that is failing (failures > 0) and whose backoff ended at or before now:
// the destination's backoff_until moves to leaseUntil in the same write, so
// of several relays (PostgreSQL) one probes at a time, and another probes
// after the lease if that one died. It returns nothing when the destination
// is paused, healthy, still backed off, or has no pending message. The
// claim's Due is the message's own next attempt time, which a failed probe
// gives back (RecordOutboxResults, OutboxResult.Probe).
func (b Batch) ClaimProbe(ctx context.Context, destination string, now, leaseUntil int64) ([]OutboxClaim, error) {
	lock := ""
	if b.pg != nil {
		lock = " FOR UPDATE SKIP LOCKED"
	}
	var out []OutboxClaim
	if err := b.tx.SelectContext(ctx, &out, `SELECT id, COALESCE(receipt_id, 0) AS receipt_id, message_id, attempts, pending_since, next_attempt_at AS due
		FROM outbox WHERE destination = ? AND status = 'pending' ORDER BY next_attempt_at, id LIMIT 1`+lock, destination); err != nil || len(out) == 0 {
		return nil, err
	}
	res, err := b.tx.ExecContext(ctx, `UPDATE forward_destinations SET backoff_until = ?
		WHERE name = ? AND paused = 0 AND failures > 0 AND backoff_until <= ?`, leaseUntil, destination, now)
	if err != nil {
		return nil, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return nil, err
	}
	b.claims.Add(1) // before it commits (Claims)
	if _, err := b.tx.ExecContext(ctx, `UPDATE outbox SET next_attempt_at = ?, open = 0 WHERE id = ?`, leaseUntil, out[0].ID); err != nil {
		return nil, err
	}
	return out, nil
}

// ResumeOutbox makes destination's pending messages due at now when they
// would wait past notBefore (unix ms): a destination that came back after
// an outage drains the backlog its outage built, instead of each message
// waiting out the backoff it was given while the destination was down.
// Messages due sooner (a claim's lease, which never reaches past
// notBefore) are left as they are.
func (b Batch) ResumeOutbox(ctx context.Context, destination string, now, notBefore int64) (int64, error) {
	res, err := b.tx.ExecContext(ctx, `UPDATE outbox SET next_attempt_at = ? WHERE destination = ? AND status = 'pending' AND next_attempt_at > ?`,
		now, destination, notBefore)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// RenewClaims moves the lease of claimed messages ids from until to
// leaseUntil (unix ms), for those still pending under that lease: a message
// whose lease ran out and that another relay claimed since has that
// relay's lease, and is left alone. It returns how many it renewed.
func (b Batch) RenewClaims(ctx context.Context, ids []int64, until, leaseUntil int64) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	q, args, err := sqlx.In(`UPDATE outbox SET next_attempt_at = ? WHERE id IN (?) AND status = 'pending' AND next_attempt_at = ?`,
		leaseUntil, ids, until)
	if err != nil {
		return 0, err
	}
	res, err := b.tx.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// OutboxBody is what the relay sends for a message: its receipt's event.
type OutboxBody struct {
	ID        int64  `db:"id"`
	Provider  string `db:"provider"`
	EventID   string `db:"event_id"`
	EventType string `db:"event_type"`
	Body      []byte `db:"body"`
	Pruned    bool   `db:"pruned"`
}

// OutboxBodies reads the events of outbox messages ids (from the read pool:
// a receipt never changes its body except to prune it, and prune keeps the
// receipts of pending messages).
func (db *DB) OutboxBodies(ctx context.Context, ids []int64) (map[int64]OutboxBody, error) {
	out := make(map[int64]OutboxBody, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	q, args, err := sqlx.In(`SELECT o.id, r.provider, r.event_id, r.event_type, r.body, r.body IS NULL AS pruned
		FROM outbox o JOIN receipts r ON r.id = o.receipt_id WHERE o.id IN (?)`, ids)
	if err != nil {
		return nil, err
	}
	var rows []OutboxBody
	if err := db.Read.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.ID] = r
	}
	return out, nil
}

// OutboxResult is one attempt's outcome, as the relay records it.
type OutboxResult struct {
	ID            int64
	Status        string // pending (retry at NextAttemptAt), delivered or dead
	AttemptedAt   int64
	NextAttemptAt int64
	StatusCode    int // 0: no response
	LatencyMS     int64
	Response      []byte // the first KiB of the response body
	Error         string
	// Probe is a failed probe of a message that was not due yet: the
	// attempt is recorded, and the message keeps its attempt count (it
	// does not count towards max_attempts) and its own next attempt time.
	Probe bool
}

// RecordOutboxResults stores each attempt and what it made of its message.
// A message that is no longer pending (retried, or delivered by another
// relay's attempt after a lease ran out) keeps its status; the attempt is
// recorded all the same. The relay records a whole batch at a time: on
// SQLite both statements run prepared (the writer's stmtCache), as parsing
// them per message cost as much CPU as a webhook's own writes.
func (b Batch) RecordOutboxResults(ctx context.Context, rs []OutboxResult) error {
	for _, r := range rs {
		var delivered any
		if r.Status == OutboxDelivered {
			delivered = r.AttemptedAt
		}
		counted := 1
		if r.Probe {
			counted = 0
		}
		if _, err := b.tx.ExecContext(ctx, recordOutboxResultSQL, r.Status, counted, r.NextAttemptAt, r.AttemptedAt, delivered, r.StatusCode, r.Error, r.ID); err != nil {
			return fmt.Errorf("update outbox %d: %w", r.ID, err)
		}
		if r.Response == nil {
			r.Response = []byte{}
		}
		if _, err := b.tx.ExecContext(ctx, insertOutboxAttemptSQL, r.ID, r.AttemptedAt, r.StatusCode, r.LatencyMS, r.Response, r.Error); err != nil {
			return fmt.Errorf("insert outbox attempt %d: %w", r.ID, err)
		}
	}
	return nil
}

const (
	recordOutboxResultSQL = `UPDATE outbox SET status = ?, attempts = attempts + ?, next_attempt_at = ?,
		last_attempt_at = ?, delivered_at = ?, last_status = ?, last_error = ? WHERE id = ? AND status = 'pending'`
	insertOutboxAttemptSQL = `INSERT INTO outbox_attempts (outbox_id, attempted_at, status_code, latency_ms, response, error)
		VALUES (?, ?, ?, ?, ?, ?)`
)

// NextDue is the earliest next_attempt_at of destination's pending messages;
// ok is false when it has none.
func (db *DB) NextDue(ctx context.Context, destination string) (at int64, ok bool, err error) {
	var v sql.NullInt64
	err = db.Read.GetContext(ctx, &v, `SELECT MIN(next_attempt_at) FROM outbox WHERE destination = ? AND status = 'pending'`, destination)
	return v.Int64, v.Valid, err
}

// OutboxRetry selects the messages `forward retry` makes due again: one
// message (MessageID), or a destination's dead messages (with Since, only
// those that became pending at or after it, unix ms).
type OutboxRetry struct {
	MessageID   string
	Destination string
	Since       int64
}

// RetryOutbox makes the messages r selects pending and due at now, with a
// fresh allowance of attempts and age, and ends the backoff of their
// destinations. One message may be dead or pending; a delivered one is left
// alone (ErrDelivered). It returns how many messages it changed; a
// MessageID that does not exist is ErrNotFound.
func (b Batch) RetryOutbox(ctx context.Context, r OutboxRetry, now int64) (int64, error) {
	where, args := `status = 'dead' AND destination = ? AND pending_since >= ?`, []any{r.Destination, r.Since}
	if r.MessageID != "" {
		var status string
		err := b.tx.GetContext(ctx, &status, `SELECT status FROM outbox WHERE message_id = ?`, r.MessageID)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, ErrNotFound
		} else if err != nil {
			return 0, err
		}
		if status == OutboxDelivered {
			return 0, ErrDelivered
		}
		where, args = `message_id = ?`, []any{r.MessageID}
	}
	var dests []string
	if err := b.tx.SelectContext(ctx, &dests, `UPDATE outbox SET status = 'pending', attempts = 0, pending_since = ?, next_attempt_at = ?
		WHERE `+where+` RETURNING destination`, append([]any{now, now}, args...)...); err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, d := range dests {
		if seen[d] {
			continue
		}
		seen[d] = true
		if _, err := b.tx.ExecContext(ctx, `UPDATE forward_destinations SET failures = 0, backoff_until = 0, updated_at = ? WHERE name = ?`,
			now, d); err != nil {
			return 0, err
		}
	}
	return int64(len(dests)), nil
}

// ErrDelivered is a retry of a message that was delivered.
var ErrDelivered = errors.New("the message was delivered")

// PruneDelivered deletes up to limit messages delivered before (unix ms),
// with their attempts (forwarded events only: a push's message is what
// stripe status counts as acknowledged, and stays with the push), and returns how many it deleted. A delivered
// message's next_attempt_at is its delivery time, so the due index walks
// them in delivery order, destination by destination (every destination a
// relay delivered for has a forward_destinations row).
func (b Batch) PruneDelivered(ctx context.Context, before int64, limit int) (int64, error) {
	res, err := b.tx.ExecContext(ctx, `DELETE FROM outbox WHERE id IN (
		SELECT o.id FROM forward_destinations d JOIN outbox o ON o.destination = d.name
		WHERE o.status = 'delivered' AND o.next_attempt_at < ? AND o.receipt_id IS NOT NULL LIMIT ?)`, before, limit)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// CountDelivered counts the messages delivered before (unix ms).
func (db *DB) CountDelivered(ctx context.Context, before int64) (int64, error) {
	var n int64
	err := db.Read.GetContext(ctx, &n, `SELECT COUNT(*) FROM forward_destinations d JOIN outbox o ON o.destination = d.name
		WHERE o.status = 'delivered' AND o.next_attempt_at < ? AND o.receipt_id IS NOT NULL`, before)
	if err != nil && predates(ctx, db.Read, versionOutbox) {
		return 0, nil
	}
	return n, err
}

// DestinationSummary is a destination's outbox by status, as `forward
// status` shows it.
type DestinationSummary struct {
	Name          string
	Pending       int64
	Delivered     int64
	Dead          int64
	OldestPending sql.NullInt64 // pending_since of the oldest pending message
	LastError     string        // the last failed attempt's error, of a message still pending or dead
	State         DestinationState
}

// OutboxSummary summarises the outbox of each destination in names and of
// any other destination that has messages or state (one removed from the
// config), in one snapshot, sorted by name. A database older than the
// outbox has none.
func (db *DB) OutboxSummary(ctx context.Context, names []string) ([]DestinationSummary, error) {
	var out []DestinationSummary
	err := db.View(ctx, func(rt *ReadTx) error {
		tx := rt.tx
		var known []string
		// The outbox's destinations by a skip scan of its index: one probe per
		// destination, not a read of every message (10,000,000 of them take
		// seconds).
		if err := tx.SelectContext(ctx, &known, `WITH RECURSIVE d(name) AS (
				SELECT MIN(destination) FROM outbox
				UNION ALL SELECT (SELECT MIN(destination) FROM outbox WHERE destination > d.name) FROM d WHERE d.name IS NOT NULL)
			SELECT name FROM forward_destinations UNION SELECT name FROM d WHERE name IS NOT NULL`); err != nil {
			if predates(ctx, tx, versionOutbox) {
				known = nil
			} else {
				return err
			}
		}
		all := map[string]bool{}
		for _, n := range append(append([]string{}, names...), known...) {
			all[n] = true
		}
		// The delivered messages are counted as they are delivered (migration 0035).
		counted := !predates(ctx, tx, versionOutboxDelivered)
		for n := range all {
			s, err := summary(ctx, tx, n, known != nil, counted)
			if err != nil {
				return err
			}
			out = append(out, s)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// summary summarises one destination's outbox; with counted, its delivered
// messages are read from their count (migration 0035) instead of counted.
func summary(ctx context.Context, tx *sqlx.Tx, name string, migrated, counted bool) (DestinationSummary, error) {
	s := DestinationSummary{Name: name, State: DestinationState{Name: name}}
	if !migrated {
		return s, nil
	}
	for _, c := range []struct {
		status string
		n      *int64
	}{{OutboxPending, &s.Pending}, {OutboxDelivered, &s.Delivered}, {OutboxDead, &s.Dead}} {
		var err error
		if counted && c.status == OutboxDelivered {
			err = tx.GetContext(ctx, c.n, `SELECT COALESCE(SUM(messages), 0) FROM outbox_delivered WHERE destination = ?`, name)
		} else {
			err = tx.GetContext(ctx, c.n, `SELECT COUNT(*) FROM outbox WHERE destination = ? AND status = ?`, name, c.status)
		}
		if err != nil {
			return s, fmt.Errorf("count %s messages of %s: %w", c.status, name, err)
		}
	}
	if err := tx.GetContext(ctx, &s.OldestPending, `SELECT MIN(pending_since) FROM outbox WHERE destination = ? AND status = 'pending'`,
		name); err != nil {
		return s, err
	}
	var last sql.NullString
	if err := tx.GetContext(ctx, &last, `SELECT last_error FROM outbox WHERE destination = ? AND status IN ('pending', 'dead') AND last_error != ''
		ORDER BY last_attempt_at DESC LIMIT 1`, name); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return s, err
	}
	s.LastError = last.String
	if err := tx.GetContext(ctx, &s.State, `SELECT name, paused, paused_at, failures, backoff_until, last_error, updated_at
		FROM forward_destinations WHERE name = ?`, name); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return s, err
	}
	if s.LastError == "" {
		s.LastError = s.State.LastError
	}
	return s, nil
}

// OutboxGauges are the per-destination figures the metrics scrape exports.
type OutboxGauges struct {
	Pending       int64
	Dead          int64
	OldestPending sql.NullInt64
}

// OutboxGauges reads destination's gauges, over its indexes only.
func (tx *ReadTx) OutboxGauges(ctx context.Context, destination string) (OutboxGauges, error) {
	var g OutboxGauges
	if err := tx.tx.GetContext(ctx, &g.Pending, `SELECT COUNT(*) FROM outbox WHERE destination = ? AND status = 'pending'`, destination); err != nil {
		if predates(ctx, tx.tx, versionOutbox) {
			return g, nil
		}
		return g, err
	}
	if err := tx.tx.GetContext(ctx, &g.Dead, `SELECT COUNT(*) FROM outbox WHERE destination = ? AND status = 'dead'`, destination); err != nil {
		return g, err
	}
	err := tx.tx.GetContext(ctx, &g.OldestPending, `SELECT MIN(pending_since) FROM outbox WHERE destination = ? AND status = 'pending'`, destination)
	return g, err
}

// OutboxFilter selects messages for `forward list`: a destination's (all
// when empty) in a status (all when empty), in id order after AfterID, at
// most Limit (0: 100).
type OutboxFilter struct {
	Destination string
	Status      string
	MessageID   string // one message
	AfterID     int64
	Limit       int
}

// ListOutbox lists the messages f selects with their receipts' event.
func (db *DB) ListOutbox(ctx context.Context, f OutboxFilter) ([]OutboxRow, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	where, args := `o.id > ?`, []any{f.AfterID}
	if f.Destination != "" {
		where, args = where+` AND o.destination = ?`, append(args, f.Destination)
	}
	if f.Status != "" {
		where, args = where+` AND o.status = ?`, append(args, f.Status)
	}
	if f.MessageID != "" {
		where, args = where+` AND o.message_id = ?`, append(args, f.MessageID)
	}
	var out []OutboxRow
	// A push's message (Stripe) has no receipt: its event columns are empty.
	err := db.Read.SelectContext(ctx, &out, `SELECT o.id, COALESCE(o.receipt_id, 0) AS receipt_id, o.destination, o.message_id, o.status,
		o.attempts, o.created_at, o.pending_since, o.next_attempt_at, o.last_attempt_at, o.delivered_at, o.last_status, o.last_error,
		COALESCE(r.provider, '') AS provider, COALESCE(r.event_id, '') AS event_id, COALESCE(r.event_type, '') AS event_type, r.received_at
		FROM outbox o LEFT JOIN receipts r ON r.id = o.receipt_id WHERE `+where+` ORDER BY o.id LIMIT ?`, append(args, f.Limit)...)
	if err != nil && predates(ctx, db.Read, versionOutbox) {
		return nil, nil
	}
	return out, err
}

// OutboxAttempt is one recorded attempt of a message.
type OutboxAttempt struct {
	OutboxID    int64  `db:"outbox_id"`
	AttemptedAt int64  `db:"attempted_at"`
	StatusCode  int    `db:"status_code"`
	LatencyMS   int64  `db:"latency_ms"`
	Response    []byte `db:"response"`
	Error       string `db:"error"`
}

// MessageAttempts lists the attempts of message messageID, oldest first.
func (db *DB) MessageAttempts(ctx context.Context, messageID string) ([]OutboxAttempt, error) {
	var out []OutboxAttempt
	err := db.Read.SelectContext(ctx, &out, `SELECT a.outbox_id, a.attempted_at, a.status_code, a.latency_ms, a.response, a.error
		FROM outbox_attempts a JOIN outbox o ON o.id = a.outbox_id WHERE o.message_id = ? ORDER BY a.id`, messageID)
	return out, err
}

// ReleaseOutbox makes claimed messages ids due at now again without counting
// an attempt: the relay stopped before it knew their outcome.
func (b Batch) ReleaseOutbox(ctx context.Context, ids []int64, now int64) error {
	if len(ids) == 0 {
		return nil
	}
	q, args, err := sqlx.In(`UPDATE outbox SET next_attempt_at = ? WHERE id IN (?) AND status = 'pending'`, now, ids)
	if err != nil {
		return err
	}
	_, err = b.tx.ExecContext(ctx, q, args...)
	return err
}

// ReleaseClaims makes every pending message of destination due at now: the
// claims of a relay that stopped without recording their outcome (killed
// mid-attempt) are among them. Retries scheduled later come forward too,
// which is harmless: the destination's own backoff (forward_destinations)
// still holds a failing destination to one probe at a time. Only a relay
// that knows it is the only one may call it: serve on SQLite, which holds the
// data directory's lock. With several relays (PostgreSQL) a claim's lease
// runs out instead.
func (b Batch) ReleaseClaims(ctx context.Context, destination string, now int64) (int64, error) {
	res, err := b.tx.ExecContext(ctx, `UPDATE outbox SET next_attempt_at = ? WHERE destination = ? AND status = 'pending' AND next_attempt_at > ?`,
		now, destination, now)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// PurgeDead deletes destination's dead messages that became pending before
// (unix ms), with their attempts, and returns how many: an operator's
// decision that they will never be delivered. Their receipts stay (and
// become prunable by retention).
func (b Batch) PurgeDead(ctx context.Context, destination string, before int64) (int64, error) {
	res, err := b.tx.ExecContext(ctx, `DELETE FROM outbox WHERE destination = ? AND status = 'dead' AND pending_since < ?`, destination, before)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
