package forward

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/redact"
	"github.com/hookledger/hookledger/schema"
)

// What operators do with the outbox, shared by `hookledger forward` and the
// admin API so both say the same thing.

// ReadStore is what the operator views read (*schema.DB).
type ReadStore interface {
	OutboxSummary(ctx context.Context, names []string) ([]schema.DestinationSummary, error)
	ListOutbox(ctx context.Context, f schema.OutboxFilter) ([]schema.OutboxRow, error)
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

// Message is one outbox message as `forward list` shows it.
type Message struct {
	MessageID     string     `json:"message_id"`
	Destination   string     `json:"destination"`
	Status        string     `json:"status"`
	Provider      string     `json:"provider"`
	EventID       string     `json:"event_id"`
	EventType     string     `json:"event_type"`
	Attempts      int        `json:"attempts"`
	CreatedAt     time.Time  `json:"created_at"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"` // pending only
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	LastStatus    int        `json:"last_status_code"`
	LastError     string     `json:"last_error"`
	ID            int64      `json:"-"`
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
	return out, nil
}

// Retry makes the messages r selects due again (schema.OutboxRetry) through
// the writer and returns how many it changed.
func Retry(ctx context.Context, w Submitter, r schema.OutboxRetry, now time.Time) (int64, error) {
	var n int64
	err := w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		var err error
		n, err = tx.Batch().RetryOutbox(ctx, r, now.UnixMilli())
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
		return tx.Batch().SetPaused(ctx, name, paused, now.UnixMilli())
	}))
}

// Purge deletes destination's dead messages that became pending before
// before, through the writer, and returns how many (schema.Batch.PurgeDead).
func Purge(ctx context.Context, w Submitter, destination string, before time.Time) (int64, error) {
	var n int64
	err := w.Submit(ctx, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		var err error
		n, err = tx.Batch().PurgeDead(ctx, destination, before.UnixMilli())
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
