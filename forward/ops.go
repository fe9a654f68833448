package forward

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/redact"
	"github.com/hookledger/hookledger/schema"
)

// What operators do with the outbox, shared by `hookledger forward` and the
// admin API so both say the same thing.

// ReadStore is what the operator views read (*schema.DB).
type ReadStore interface {
	OutboxSummary(ctx context.Context, names []string) ([]schema.DestinationSummary, error)
	ListOutbox(ctx context.Context, f schema.OutboxFilter) ([]schema.OutboxRow, error)
	// A push's message has no receipt: List reads what it bills.
	StripePushesOf(ctx context.Context, ids []int64) (map[int64]schema.StripePush, error)
	StripeInvoicePushesOf(ctx context.Context, ids []int64) (map[int64]schema.StripeInvoicePush, error)
	GetLedgerRow(ctx context.Context, id int64) (*schema.LedgerRow, error)
	ReceiptsByEventID(ctx context.Context, providers []string, eventID string) ([]schema.ReceiptSummary, error)
}

// Errors a caller branches on (a CLI usage error, an HTTP 404 or 409).
var (
	ErrUnknownDestination = errors.New("unknown destination")
	ErrUnknownMessage     = errors.New("unknown message")
	ErrDelivered          = schema.ErrDelivered
	ErrBadStatus          = errors.New("status must be pending, delivered or dead")
)

// DestinationStatus is one destination's line of `forward status`.
type DestinationStatus struct {
	Destination string `json:"destination"`
	// Configured is false for a destination removed from the config that
	// still has messages: they are kept, and delivered again if it returns.
	Configured       bool       `json:"configured"`
	Paused           bool       `json:"paused"`
	Pending          int64      `json:"pending"`
	OldestPendingAge float64    `json:"oldest_pending_age_seconds"`
	Delivered        int64      `json:"delivered"`
	Dead             int64      `json:"dead"`
	Failures         int        `json:"failures_in_a_row"`
	BackoffUntil     *time.Time `json:"backoff_until,omitempty"`
	LastError        string     `json:"last_error"`
}

// The views below (Status, List, Attempts) show what the relay stored
// scrubbed with shown (Secrets of the config; nil: the credential shapes
// only), so a row an older version stored with a secret in it is not shown
// in clear either.

// Status summarises every destination: the configured ones and any other
// that still has messages.
func Status(ctx context.Context, db ReadStore, configured []string, shown *redact.Secrets, now time.Time) ([]DestinationStatus, error) {
	sums, err := db.OutboxSummary(ctx, configured)
	if err != nil {
		return nil, err
	}
	out := make([]DestinationStatus, 0, len(sums))
	for _, s := range sums {
		st := DestinationStatus{Destination: s.Name, Configured: slices.Contains(configured, s.Name), Paused: s.State.Paused,
			Pending: s.Pending, Delivered: s.Delivered, Dead: s.Dead, Failures: s.State.Failures, LastError: shown.String(s.LastError)}
		if s.OldestPending.Valid {
			st.OldestPendingAge = max(0, now.Sub(time.UnixMilli(s.OldestPending.Int64)).Seconds())
		}
		if t := time.UnixMilli(s.State.BackoffUntil); s.State.BackoffUntil > 0 && t.After(now) {
			t = t.UTC()
			st.BackoffUntil = &t
		}
		out = append(out, st)
	}
	return out, nil
}

// CheckDestination returns ErrUnknownDestination (naming the ones there are)
// unless name is configured or known to the outbox.
func CheckDestination(ctx context.Context, db ReadStore, configured []string, name string) error {
	sums, err := db.OutboxSummary(ctx, configured)
	if err != nil {
		return err
	}
	var names []string
	for _, s := range sums {
		if s.Name == name {
			return nil
		}
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return fmt.Errorf("%w %q: no destinations are configured (destinations: in the config)", ErrUnknownDestination, name)
	}
	return fmt.Errorf("%w %q (known: %s)", ErrUnknownDestination, name, strings.Join(names, ", "))
}

// Message is one outbox message as `forward list` shows it: a forwarded
// event's (Provider, EventID, EventType: its receipt), or a Stripe push's
// (Push: the ledger row or invoice line it bills; Provider and EventID are
// the row's event, for a usage row).
type Message struct {
	MessageID     string     `json:"message_id"`
	Destination   string     `json:"destination"`
	Status        string     `json:"status"`
	Provider      string     `json:"provider"`
	EventID       string     `json:"event_id"`
	EventType     string     `json:"event_type"`
	Push          *Push      `json:"push,omitempty"`
	Attempts      int        `json:"attempts"`
	CreatedAt     time.Time  `json:"created_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"` // pending only
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	LastStatus    int        `json:"last_status_code"`
	LastError     string     `json:"last_error"`
	ID            int64      `json:"-"`
}

// Push is whose a push message is: what it bills in the ledger.
type Push struct {
	Customer string `json:"customer"`
	Meter    string `json:"meter"`
	// Kind is the ledger row's: usage, adjustment or void; line for a
	// close-mode push of an invoice line; invoice for an invoice sent to
	// Stripe (stripe.invoices).
	Kind string `json:"kind"`
	// Ledger names what the push bills as `hookledger dispute` takes it:
	// row:ID, invoice:ID/LINE, or invoice:ID. A stream push names its
	// first row; Rows says how many of its customer's rows of the meter
	// and period it carries, up to LastRow.
	Ledger  string `json:"ledger"`
	Rows    int64  `json:"rows,omitempty"`
	LastRow string `json:"last_row,omitempty"`
	// Reason and Ref are an adjustment's or a void's: why, and what it
	// corrects (event:P/ID, row:ID or invoice:ID).
	Reason string `json:"reason,omitempty"`
	Ref    string `json:"ref,omitempty"`
	// Cancels is the identifier of the push whose meter event this one
	// cancels (a void within Stripe's 24 hours).
	Cancels string `json:"cancels,omitempty"`
}

// KindInvoice is the Kind of an invoice sent to Stripe.
const KindInvoice = "invoice"

// Whose is the push for people: "adjustment row:9: reason (ref invoice:3)".
func (p *Push) Whose() string {
	if p == nil {
		return ""
	}
	s := p.Kind + " " + p.Ledger
	if p.Rows > 1 {
		s += fmt.Sprintf(" (+%d rows to %s)", p.Rows-1, p.LastRow)
	}
	if p.Kind == KindInvoice {
		s = p.Ledger // invoice:ID says it all
	}
	if p.Reason != "" {
		s += ": " + p.Reason
	}
	if p.Ref != "" {
		s += " (ref " + p.Ref + ")"
	}
	if p.Cancels != "" {
		s += " (cancels " + p.Cancels + ")"
	}
	return s
}

// List lists messages (see schema.OutboxFilter).
func List(ctx context.Context, db ReadStore, f schema.OutboxFilter, shown *redact.Secrets) ([]Message, error) {
	switch f.Status {
	case "", schema.OutboxPending, schema.OutboxDelivered, schema.OutboxDead:
	default:
		return nil, fmt.Errorf("%w, not %q", ErrBadStatus, f.Status)
	}
	rows, err := db.ListOutbox(ctx, f)
	if err != nil {
		return nil, err
	}
	ms := func(v int64) *time.Time { t := time.UnixMilli(v).UTC(); return &t }
	out := make([]Message, 0, len(rows))
	for _, r := range rows {
		m := Message{ID: r.ID, MessageID: r.MessageID, Destination: r.Destination, Status: r.Status, Provider: r.Provider, EventID: r.EventID,
			EventType: r.EventType, Attempts: r.Attempts, CreatedAt: time.UnixMilli(r.CreatedAt).UTC(), LastStatus: r.LastStatus,
			LastError: shown.String(r.LastError)}
		if r.Status == schema.OutboxPending {
			m.NextAttemptAt = ms(r.NextAttemptAt)
		}
		if r.LastAttemptAt.Valid {
			m.LastAttemptAt = ms(r.LastAttemptAt.Int64)
		}
		if r.DeliveredAt.Valid {
			m.DeliveredAt = ms(r.DeliveredAt.Int64)
		}
		out = append(out, m)
	}
	if err := pushesOf(ctx, db, rows, out); err != nil {
		return nil, err
	}
	return out, nil
}

// pushesOf fills in whose each push message of rows is (out[i] is rows[i]'s).
func pushesOf(ctx context.Context, db ReadStore, rows []schema.OutboxRow, out []Message) error {
	var ids []int64
	for _, r := range rows {
		if r.ReceiptID == 0 {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	pushes, err := db.StripePushesOf(ctx, ids)
	if err != nil {
		return fmt.Errorf("read the pushes of the messages: %w", err)
	}
	invoices, err := db.StripeInvoicePushesOf(ctx, ids)
	if err != nil {
		return fmt.Errorf("read the invoice pushes of the messages: %w", err)
	}
	for i, r := range rows {
		if inv, ok := invoices[r.ID]; ok && r.ReceiptID == 0 {
			out[i].Push = &Push{Customer: inv.CustomerID, Kind: KindInvoice, Ledger: fmt.Sprintf("invoice:%d", inv.InvoiceID)}
			continue
		}
		p, ok := pushes[r.ID]
		if r.ReceiptID != 0 || !ok {
			continue
		}
		m := &out[i]
		m.Push = &Push{Customer: p.CustomerID, Meter: p.Meter, Kind: p.Source, Cancels: p.Cancels}
		if p.LedgerID == 0 {
			m.Push.Ledger = fmt.Sprintf("invoice:%d/%d", p.InvoiceID, p.LineNo)
			continue
		}
		m.Push.Ledger, m.Push.Rows, m.Push.LastRow = fmt.Sprintf("row:%d", p.LedgerID), p.Rows, fmt.Sprintf("row:%d", p.LastLedgerID)
		row, err := db.GetLedgerRow(ctx, p.LedgerID)
		if err != nil {
			return fmt.Errorf("read ledger row %d of push %s: %w", p.LedgerID, p.Identifier, err)
		}
		m.Push.Kind, m.Push.Reason, m.Push.Ref = row.Kind, row.Reason, row.Ref
		if row.Kind != ledger.KindUsage {
			continue
		}
		m.Provider, m.EventID = row.Provider, row.EventID
		rcs, err := db.ReceiptsByEventID(ctx, []string{row.Provider}, row.EventID)
		if err != nil {
			return fmt.Errorf("read the receipt of ledger row %d: %w", p.LedgerID, err)
		}
		if len(rcs) > 0 { // retention may have deleted it
			m.EventType = rcs[0].EventType
		}
	}
	return nil
}

// Retry makes the messages r selects due again (schema.OutboxRetry) through
// the writer and returns how many it changed.
func Retry(ctx context.Context, w Submitter, r schema.OutboxRetry, now time.Time) (int64, error) {
	var n int64
	err := w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		var err error
		n, err = tx.Outbox().RetryOutbox(ctx, r, now.UnixMilli())
		return err
	}))
	if errors.Is(err, schema.ErrNotFound) {
		return 0, fmt.Errorf("%w %q", ErrUnknownMessage, r.MessageID)
	}
	if errors.Is(err, schema.ErrDelivered) {
		return 0, fmt.Errorf("message %s: %w", r.MessageID, ErrDelivered)
	}
	return n, err
}

// SetPaused pauses (or resumes) a destination through the writer. A paused
// destination keeps receiving messages; none is attempted until it resumes.
func SetPaused(ctx context.Context, w Submitter, name string, paused bool, now time.Time) error {
	return w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		return tx.Outbox().SetPaused(ctx, name, paused, now.UnixMilli())
	}))
}

// Purge deletes destination's dead messages that became pending before
// before, through the writer, and returns how many (schema.Batch.PurgeDead).
func Purge(ctx context.Context, w Submitter, destination string, before time.Time) (int64, error) {
	var n int64
	err := w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		var err error
		n, err = tx.Outbox().PurgeDead(ctx, destination, before.UnixMilli())
		return err
	}))
	return n, err
}

// AttemptStore reads a message's attempts (*schema.DB).
type AttemptStore interface {
	MessageAttempts(ctx context.Context, messageID string) ([]schema.OutboxAttempt, error)
	ListOutbox(ctx context.Context, f schema.OutboxFilter) ([]schema.OutboxRow, error)
}

// AttemptView is one recorded attempt as `forward attempts` shows it.
type AttemptView struct {
	AttemptedAt time.Time `json:"attempted_at"`
	StatusCode  int       `json:"status_code"` // 0: no response
	LatencyMS   int64     `json:"latency_ms"`
	Error       string    `json:"error"`
	Response    string    `json:"response"` // the first KiB of the body, secrets redacted
}

// Attempts lists message messageID's attempts, oldest first;
// ErrUnknownMessage when there is no such message.
func Attempts(ctx context.Context, db AttemptStore, messageID string, shown *redact.Secrets) ([]AttemptView, error) {
	as, err := db.MessageAttempts(ctx, messageID)
	if err != nil {
		return nil, err
	}
	if len(as) == 0 {
		// No attempt yet, or no message: tell them apart.
		rows, err := db.ListOutbox(ctx, schema.OutboxFilter{MessageID: messageID, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("%w %q", ErrUnknownMessage, messageID)
		}
	}
	out := make([]AttemptView, 0, len(as))
	for _, a := range as {
		out = append(out, AttemptView{AttemptedAt: time.UnixMilli(a.AttemptedAt).UTC(), StatusCode: a.StatusCode, LatencyMS: a.LatencyMS,
			Error: shown.String(a.Error), Response: strings.ToValidUTF8(shown.String(string(a.Response)), "\uFFFD")})
	}
	return out, nil
}
