package schema

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"
)

// versionStripe is the migration that created stripe_pushes;
// versionStripeSends the one that created stripe_sends.
const (
	versionStripe      = 18
	versionStripeSends = 27
	versionOpenPushes  = 37
)

// StripePush is one meter event sent to Stripe (docs/stripe.md): what it
// covers in the ledger, the running totals of its customer, meter and
// period after it, and (reads only) its outbox message's state. Quantities
// and values are exact decimals as text. A stream push covers the rows of
// its customer, meter and period from LedgerID to LastLedgerID that were
// written while its message was open (migration 0037).
type StripePush struct {
	ID             int64  `db:"id"`
	Identifier     string `db:"identifier"`
	Source         string `db:"source"`     // usage, adjustment or line
	LedgerID       int64  `db:"ledger_id"`  // 0: none (a close's line)
	InvoiceID      int64  `db:"invoice_id"` // 0: none (a ledger row's)
	LineNo         int64  `db:"line_no"`
	CustomerID     string `db:"customer_id"`
	Meter          string `db:"meter"`
	EventName      string `db:"event_name"`
	StripeCustomer string `db:"stripe_customer"`
	PeriodStart    int64  `db:"period_start"`
	Quantity       string `db:"quantity"`
	Total          string `db:"total"`
	Value          string `db:"value"`
	Pushed         string `db:"pushed"`
	Timestamp      int64  `db:"timestamp"` // unix seconds
	CreatedAt      int64  `db:"created_at"`
	Rows           int64  `db:"row_count"`      // the ledger rows it covers
	LastLedgerID   int64  `db:"last_ledger_id"` // the last of them (stored once a second row joins); 0: none (a close's line)
	// Open means it still takes the rows its customer's meter appends in
	// its period: its message was never claimed. A push is written open
	// when Open is set (a stream push), and closed by the relay's claim.
	Open bool `db:"open"`
	// Cancels is the identifier of the push whose meter event this one
	// cancels (a void within Stripe's 24 hours; migration 0023), "" for a
	// meter event. Value is then what the cancel takes off Stripe's sum.
	Cancels string `db:"cancels"`

	OutboxID    int64  `db:"outbox_id"`
	Status      string `db:"status"`
	Attempts    int    `db:"attempts"`
	LastStatus  int    `db:"last_status"` // the last attempt's HTTP status; 0: no answer, or no request
	LastError   string `db:"last_error"`
	DeliveredAt int64  `db:"delivered_at"` // unix ms; 0 until Stripe acknowledged it

	// Send is the meter event that carries the push (reads only; its
	// Identifier "" until the relay first sends it).
	Send StripeSend `db:"send"`
}

// StripeSend is one meter event the relay sends (migration 0027): one push
// under the push's own identifier, or the sum of several pushes of one
// customer, meter and period. It is stored, one row per push it carries,
// before its request, so every resend is the same event.
type StripeSend struct {
	Identifier string `db:"identifier"`
	Value      string `db:"value"`
	Count      int    `db:"pushes"`    // how many pushes it carries
	Timestamp  int64  `db:"timestamp"` // unix seconds
	// Carried is 1 when the pushes' own time was outside Stripe's window:
	// Timestamp is then the time the send was first made.
	Carried int `db:"carried"`
}

// InsertStripeSend stores s as the send of pushes (their ids), before the
// relay makes its request.
func (b Batch) InsertStripeSend(ctx context.Context, s StripeSend, pushes []int64, now int64) error {
	for _, id := range pushes {
		if _, err := b.tx.ExecContext(ctx, `INSERT INTO stripe_sends (push_id, identifier, value, pushes, timestamp, carried, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, id, s.Identifier, s.Value, s.Count, s.Timestamp, s.Carried, now); err != nil {
			return fmt.Errorf("insert send %s of push %d: %w", s.Identifier, id, err)
		}
	}
	return nil
}

// RestampStripeSend moves the time of send identifier to timestamp and
// marks it carried: Stripe's window passed it before it was delivered.
func (b Batch) RestampStripeSend(ctx context.Context, identifier string, timestamp int64) error {
	if _, err := b.tx.ExecContext(ctx, `UPDATE stripe_sends SET timestamp = ?, carried = 1 WHERE identifier = ?`, timestamp, identifier); err != nil {
		return fmt.Errorf("restamp send %s: %w", identifier, err)
	}
	return nil
}

// DeliveredSends says which of the sends identifiers Stripe took already:
// one of their pushes was delivered (the relay, before sending a stored
// send again for pushes retried apart from the rest of their sum).
func (db *DB) DeliveredSends(ctx context.Context, identifiers []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(identifiers) == 0 {
		return out, nil
	}
	q, args, err := sqlx.In(`SELECT DISTINCT s.identifier FROM stripe_sends s JOIN outbox o ON o.push_id = s.push_id
		WHERE s.identifier IN (?) AND o.status = 'delivered'`, identifiers)
	if err != nil {
		return nil, err
	}
	var ids []string
	if err := db.Read.SelectContext(ctx, &ids, q, args...); err != nil {
		return nil, err
	}
	for _, id := range ids {
		out[id] = true
	}
	return out, nil
}

// StripeSendOf is the send that carried the push with identifier (ok
// false: none yet), read when a void would cancel that push's meter event:
// only a push sent alone can be cancelled.
func (db *DB) StripeSendOf(ctx context.Context, identifier string) (StripeSend, bool, error) {
	var s StripeSend
	err := db.Read.GetContext(ctx, &s, `SELECT s.identifier, s.value, s.pushes, s.timestamp, s.carried
		FROM stripe_pushes p JOIN stripe_sends s ON s.push_id = p.id WHERE p.identifier = ?`, identifier)
	if err == sql.ErrNoRows {
		return s, false, nil
	}
	return s, err == nil, err
}

// pushTx is what both a writer batch and a close's transaction offer.
type pushTx interface {
	QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
}

// InsertStripePush appends p and its pending outbox message for destination
// (message_id: the push's identifier), due at once, in the batch that
// writes the ledger row it covers, and returns the push's id.
func (b Batch) InsertStripePush(ctx context.Context, p StripePush, destination string, now int64) (int64, error) {
	return insertStripePush(ctx, b.tx, p, destination, now)
}

// InsertStripePush appends p and its outbox message in the close's
// transaction (close mode: one per invoice line).
func (t *CloseTx) InsertStripePush(ctx context.Context, p StripePush, destination string, now int64) (int64, error) {
	return insertStripePush(ctx, t.tx, p, destination, now)
}

func insertStripePush(ctx context.Context, tx pushTx, p StripePush, destination string, now int64) (int64, error) {
	var id int64
	err := tx.QueryRowContext(ctx, `INSERT INTO stripe_pushes (identifier, source, ledger_id, invoice_id, line_no, customer_id, meter,
		event_name, stripe_customer, period_start, quantity, total, value, pushed, timestamp, created_at, cancels)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		p.Identifier, p.Source, nullID(p.LedgerID), nullID(p.InvoiceID), nullID(p.LineNo), p.CustomerID, p.Meter,
		p.EventName, p.StripeCustomer, p.PeriodStart, p.Quantity, p.Total, p.Value, p.Pushed, p.Timestamp, now, p.Cancels).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("insert push %s: %w", p.Identifier, err)
	}
	open := 0
	if p.Open {
		open = 1
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (push_id, destination, message_id, status, created_at, pending_since, next_attempt_at, open)
		VALUES (?, ?, ?, 'pending', ?, ?, ?, ?)`, id, destination, p.Identifier, now, now, now, open); err != nil {
		return 0, fmt.Errorf("insert outbox for push %s: %w", p.Identifier, err)
	}
	return id, nil
}

// LastStripePush reads the latest push of customer's meter in the period
// starting at periodStart (ID 0: none yet): the running totals it
// carries, what it covers, and whether it is still open. No claim can close
// it before the batch ends: claims are the writer's batches too, and on
// PostgreSQL every batch of every receiver first locks the chain head
// (Writer.Begin).
func (b Batch) LastStripePush(ctx context.Context, customer, meter string, periodStart int64) (StripePush, error) {
	return lastStripePush(ctx, b.tx, customer, meter, periodStart)
}

// LastStripePush is Batch.LastStripePush in a close's transaction.
func (t *CloseTx) LastStripePush(ctx context.Context, customer, meter string, periodStart int64) (StripePush, error) {
	return lastStripePush(ctx, t.tx, customer, meter, periodStart)
}

func lastStripePush(ctx context.Context, tx pushTx, customer, meter string, periodStart int64) (StripePush, error) {
	var p StripePush
	err := tx.QueryRowContext(ctx, `SELECT p.id, p.source, p.total, p.pushed, p.quantity, p.value, p.timestamp, p.row_count,
		p.stripe_customer, p.event_name, p.cancels, o.open = 1
		FROM stripe_pushes p JOIN outbox o ON o.push_id = p.id WHERE p.customer_id = ? AND p.meter = ? AND p.period_start = ?
		ORDER BY p.id DESC LIMIT 1`, customer, meter, periodStart).Scan(&p.ID, &p.Source, &p.Total, &p.Pushed, &p.Quantity, &p.Value, &p.Timestamp,
		&p.Rows, &p.StripeCustomer, &p.EventName, &p.Cancels, &p.Open)
	if err == sql.ErrNoRows {
		return StripePush{}, nil
	}
	if err != nil {
		return StripePush{}, fmt.Errorf("read the latest push of %s/%s: %w", customer, meter, err)
	}
	return p, nil
}

// AddToStripePush stores what open push p.ID carries after the batch
// added a ledger row to it: its quantity, value, running totals, time,
// rows and last row (the trigger of migration 0037 refuses it once the
// relay has claimed the push).
func (b Batch) AddToStripePush(ctx context.Context, p StripePush) error {
	if _, err := b.tx.ExecContext(ctx, `UPDATE stripe_pushes SET quantity = ?, total = ?, value = ?, pushed = ?, timestamp = ?,
		row_count = ?, last_ledger_id = ? WHERE id = ?`,
		p.Quantity, p.Total, p.Value, p.Pushed, p.Timestamp, p.Rows, p.LastLedgerID, p.ID); err != nil {
		return fmt.Errorf("add row %d to push %d: %w", p.LastLedgerID, p.ID, err)
	}
	return nil
}

// LastStripeCustomer is the Stripe customer the latest push of customer
// named (""; none), for a correction under a customer mapping that reads
// the event: an adjustment has no event of its own.
func (b Batch) LastStripeCustomer(ctx context.Context, customer string) (string, error) {
	var s string
	err := b.tx.QueryRowContext(ctx, `SELECT stripe_customer FROM stripe_pushes WHERE customer_id = ? AND stripe_customer != ''
		ORDER BY id DESC LIMIT 1`, customer).Scan(&s)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return s, err
}

// pushFrom reads a push with its message and its send from the tables of
// a database at schema version v: one older than migration 0027 has no
// sends, one older than 0023 no cancels (a read-only open of one).
func pushFrom(v int) string {
	cols := `p.id, p.identifier, p.source, COALESCE(p.ledger_id, 0) AS ledger_id, COALESCE(p.invoice_id, 0) AS invoice_id,
	COALESCE(p.line_no, 0) AS line_no, p.customer_id, p.meter, p.event_name,
	p.stripe_customer, p.period_start, p.quantity, p.total, p.value, p.pushed, p.timestamp, p.created_at, p.cancels,
	o.id AS outbox_id, o.status, o.attempts, o.last_status, o.last_error, COALESCE(o.delivered_at, 0) AS delivered_at,
	p.row_count, COALESCE(p.last_ledger_id, p.ledger_id, 0) AS last_ledger_id, o.open = 1 AS open`
	from := ` FROM stripe_pushes p JOIN outbox o ON o.push_id = p.id`
	if v < versionOpenPushes {
		cols = strings.Replace(cols, `p.row_count, COALESCE(p.last_ledger_id, p.ledger_id, 0) AS last_ledger_id, o.open = 1 AS open`,
			`1 AS row_count, COALESCE(p.ledger_id, 0) AS last_ledger_id, 0 = 1 AS open`, 1)
	}
	if v < versionStripeInvoiceStates {
		cols = strings.Replace(cols, "p.cancels,", "'' AS cancels,", 1)
	}
	if v < versionStripeSends {
		return `SELECT ` + cols + `, '' AS "send.identifier", '' AS "send.value", 0 AS "send.pushes", 0 AS "send.timestamp", 0 AS "send.carried"` + from
	}
	return `SELECT ` + cols + `, COALESCE(s.identifier, '') AS "send.identifier", COALESCE(s.value, '') AS "send.value",
	COALESCE(s.pushes, 0) AS "send.pushes", COALESCE(s.timestamp, 0) AS "send.timestamp", COALESCE(s.carried, 0) AS "send.carried"` +
		from + ` LEFT JOIN stripe_sends s ON s.push_id = p.id`
}

// StripePushesOf reads the pushes of outbox messages ids, by outbox id
// (pushes never change: the read pool serves them): the relay, and
// forward list, on a database of any version.
func (db *DB) StripePushesOf(ctx context.Context, ids []int64) (map[int64]StripePush, error) {
	out := make(map[int64]StripePush, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	read := func(v int) ([]StripePush, error) {
		q, args, err := sqlx.In(pushFrom(v)+` WHERE o.id IN (?)`, ids)
		if err != nil {
			return nil, err
		}
		var rows []StripePush
		err = db.Read.SelectContext(ctx, &rows, q, args...)
		return rows, err
	}
	// The current schema first: the relay reads every batch so, and asks
	// the version only of a database that refuses the query (forward
	// list on an older one, read-only).
	rows, err := read(versionOpenPushes)
	if err != nil && predates(ctx, db.Read, versionOpenPushes) {
		var v int
		if v, err = schemaVersion(ctx, db.Read); err == nil {
			rows, err = read(v)
		}
	}
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		out[r.OutboxID] = r
	}
	return out, nil
}

// StripePushFilter selects pushes: of the periods starting in [From, To)
// (unix ms; To 0: no end), of one customer ("": all).
type StripePushFilter struct {
	From, To int64
	Customer string
	Status   string // pending, delivered or dead; "": all
}

// StripePushes lists the pushes f selects with their messages' state, in
// push order.
func (db *DB) StripePushes(ctx context.Context, f StripePushFilter) ([]StripePush, error) {
	where := []string{"p.period_start >= ?"}
	args := []any{f.From}
	if f.To != 0 {
		where, args = append(where, "p.period_start < ?"), append(args, f.To)
	}
	if f.Customer != "" {
		where, args = append(where, "p.customer_id = ?"), append(args, f.Customer)
	}
	if f.Status != "" {
		where, args = append(where, "o.status = ?"), append(args, f.Status)
	}
	v, err := schemaVersion(ctx, db.Read)
	if err != nil || v < versionStripe {
		return nil, err
	}
	var out []StripePush
	err = db.Read.SelectContext(ctx, &out, pushFrom(v)+` WHERE `+strings.Join(where, " AND ")+` ORDER BY p.id`, args...)
	return out, err
}

// StripeCarriedInto lists the pushes of customer ("": all) that were
// carried into [from, to) (unix seconds): sent stamped in it because their
// own time was outside Stripe's window, so Stripe counts them in that
// period rather than their own.
func (db *DB) StripeCarriedInto(ctx context.Context, from, to int64, customer string) ([]StripePush, error) {
	v, err := schemaVersion(ctx, db.Read)
	if err != nil || v < versionStripeSends {
		return nil, err
	}
	where, args := `s.carried = 1 AND s.timestamp >= ? AND s.timestamp < ?`, []any{from, to}
	if customer != "" {
		where, args = where+` AND p.customer_id = ?`, append(args, customer)
	}
	var out []StripePush
	err = db.Read.SelectContext(ctx, &out, pushFrom(v)+` WHERE `+where+` ORDER BY p.id`, args...)
	return out, err
}

// LatestExternalIDs is the external_ids (a JSON object) of customer's latest
// registry row; "" when the registry has no such customer.
func (db *DB) LatestExternalIDs(ctx context.Context, customer string) (string, error) {
	var s string
	err := db.Read.GetContext(ctx, &s, `SELECT external_ids FROM customers WHERE customer_id = ? ORDER BY id DESC LIMIT 1`, customer)
	if err == sql.ErrNoRows {
		return "", nil
	}
	return s, err
}

// nullID stores an id of 0 as NULL.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// PushOfRow is the usage push whose first row is ledger row id of a stream
// meter (ok false: none), with how many rows it covers and whether it is
// still open, read in the batch that voids the row: a void within Stripe's
// 24 hours cancels a closed push of that one row.
func (b Batch) PushOfRow(ctx context.Context, ledgerID int64) (StripePush, bool, error) {
	var p StripePush
	err := b.tx.QueryRowContext(ctx, `SELECT p.id, p.identifier, p.value, p.created_at, p.row_count, o.open = 1
		FROM stripe_pushes p JOIN outbox o ON o.push_id = p.id
		WHERE p.ledger_id IS NOT NULL AND p.ledger_id = ? AND p.source = 'usage' ORDER BY p.id LIMIT 1`, ledgerID).Scan(
		&p.ID, &p.Identifier, &p.Value, &p.CreatedAt, &p.Rows, &p.Open)
	if err == sql.ErrNoRows {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("read the push of row %d: %w", ledgerID, err)
	}
	return p, true, nil
}

// AllExternalIDs is the external_ids of every registered customer's latest
// registry row, by customer: one read where a status of many customers
// would otherwise ask once per customer.
func (db *DB) AllExternalIDs(ctx context.Context) (map[string]string, error) {
	rows, err := db.Read.QueryxContext(ctx, `SELECT customer_id, external_ids FROM customers ORDER BY id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var c, ext string
		if err := rows.Scan(&c, &ext); err != nil {
			return nil, err
		}
		out[c] = ext // the latest row wins
	}
	return out, rows.Err()
}
