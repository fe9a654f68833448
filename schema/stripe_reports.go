package schema

import (
	"context"
	"database/sql"
	"fmt"
)

// versionStripeReports is the migration that created stripe_reports.
const versionStripeReports = 21

// StripeReport is one sample error Stripe reported about meter events it
// had accepted (v1.billing.meter.error_report_triggered or
// v1.billing.meter.no_meter_found), linked to the push it names (PushID 0:
// none of ours, or the sample named no identifier).
type StripeReport struct {
	ID         int64  `db:"id"`
	ReceiptID  int64  `db:"receipt_id"`
	EventType  string `db:"event_type"`
	Meter      string `db:"meter"`
	Code       string `db:"code"`
	Message    string `db:"message"`
	Identifier string `db:"identifier"`
	PushID     int64  `db:"push_id"`
	CreatedAt  int64  `db:"created_at"`
}

// StripePushID is the id of the push with Stripe identifier id, or the
// first push of the send with that identifier (a meter event carrying
// several pushes), 0 when none, read in the batch that links a report to
// it.
func (b Batch) StripePushID(ctx context.Context, identifier string) (int64, error) {
	var id int64
	err := b.tx.QueryRowContext(ctx, `SELECT COALESCE((SELECT id FROM stripe_pushes WHERE identifier = ?),
		(SELECT MIN(push_id) FROM stripe_sends WHERE identifier = ?), 0)`, identifier, identifier).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("read the push %s: %w", identifier, err)
	}
	return id, nil
}

// InsertStripeReport appends r in the batch that takes its event into
// custody (r.ReceiptID is that event's receipt).
func (b Batch) InsertStripeReport(ctx context.Context, r StripeReport, now int64) error {
	if _, err := b.tx.ExecContext(ctx, `INSERT INTO stripe_reports (receipt_id, event_type, meter, code, message, identifier, push_id, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.ReceiptID, r.EventType, r.Meter, r.Code, r.Message, r.Identifier, nullID(r.PushID), now); err != nil {
		return fmt.Errorf("insert Stripe report: %w", err)
	}
	return nil
}

// StripeReportsOf reads the reports linked to the pushes of the periods
// starting in [from, to) (unix ms; to 0: no end), and those linked to no
// push received in [from, to), in report order.
func (db *DB) StripeReportsOf(ctx context.Context, from, to int64) ([]StripeReport, error) {
	if to == 0 {
		to = 1<<63 - 1
	}
	var out []StripeReport
	err := db.Read.SelectContext(ctx, &out, `SELECT r.id, r.receipt_id, r.event_type, r.meter, r.code, r.message, r.identifier,
		COALESCE(r.push_id, 0) AS push_id, r.created_at
		FROM stripe_reports r LEFT JOIN stripe_pushes p ON p.id = r.push_id
		WHERE (p.id IS NOT NULL AND p.period_start >= ? AND p.period_start < ?)
		   OR (p.id IS NULL AND r.created_at >= ? AND r.created_at < ?)
		ORDER BY r.id`, from, to, from, to)
	if err != nil && predates(ctx, db.Read, versionStripeReports) {
		return nil, nil
	}
	return out, err
}

// LatestStripePush is the id of meter's latest push (0: none): of any
// customer when customers is nil and stripeCustomer "", else of one of
// customers or naming stripeCustomer. It links a report that names the
// meter, not a meter event.
func (b Batch) LatestStripePush(ctx context.Context, meter string, customers []string, stripeCustomer string) (int64, error) {
	var best int64
	latest := func(q string, args ...any) error {
		var id int64
		err := b.tx.QueryRowContext(ctx, q, args...).Scan(&id)
		if err == sql.ErrNoRows {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the latest push of %s: %w", meter, err)
		}
		best = max(best, id)
		return nil
	}
	if customers == nil && stripeCustomer == "" {
		return best, latest(`SELECT id FROM stripe_pushes WHERE meter = ? ORDER BY id DESC LIMIT 1`, meter)
	}
	for _, c := range customers {
		if err := latest(`SELECT id FROM stripe_pushes WHERE customer_id = ? AND meter = ? ORDER BY id DESC LIMIT 1`, c, meter); err != nil {
			return 0, err
		}
	}
	if stripeCustomer != "" {
		if err := latest(`SELECT id FROM stripe_pushes WHERE stripe_customer = ? AND meter = ? ORDER BY id DESC LIMIT 1`, stripeCustomer, meter); err != nil {
			return 0, err
		}
	}
	return best, nil
}
