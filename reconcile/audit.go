package reconcile

import (
	"context"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// Mismatch is an authenticated delivery that reused a stored event id with a
// different body: the original was kept, this one had no effect. Expected
// when reconcile inserted an event from the provider's API and the webhook
// came later (the API's JSON bytes differ from the webhook's); anything else
// deserves a look.
type Mismatch struct {
	Provider        string    `json:"provider"`
	EventID         string    `json:"event_id"`
	OriginalSource  string    `json:"original_source"`
	OriginalSHA256  []byte    `json:"-"`
	OriginalAt      int64     `json:"-"`
	DuplicateSHA256 []byte    `json:"-"`
	DuplicateAt     int64     `json:"-"`
	RemoteAddr      string    `json:"remote_addr"`
	RequestID       string    `json:"request_id"`
	OriginalHex     string    `json:"original_sha256"`
	DuplicateHex    string    `json:"duplicate_sha256"`
	OriginalTime    time.Time `json:"original_received_at"`
	DuplicateTime   time.Time `json:"duplicate_received_at"`
}

// MismatchFilter narrows Mismatches; zero fields match everything.
type MismatchFilter struct {
	Provider string
	Since    time.Time
	Limit    int // default 1000
}

// MismatchSource is what Mismatches reads from storage; *schema.DB
// satisfies it.
type MismatchSource interface {
	PayloadMismatches(ctx context.Context, f schema.MismatchFilter) ([]schema.Mismatch, error)
}

// Mismatches lists payload_mismatch attempts with both digests and times,
// oldest first.
func Mismatches(ctx context.Context, db MismatchSource, f MismatchFilter) ([]Mismatch, error) {
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	stored, err := db.PayloadMismatches(ctx, schema.MismatchFilter{Provider: f.Provider, Since: f.Since.UnixMilli(), Limit: f.Limit})
	if err != nil {
		return nil, fmt.Errorf("list mismatches: %w", err)
	}
	var ms []Mismatch
	for _, s := range stored {
		ms = append(ms, Mismatch{Provider: s.Provider, EventID: s.EventID, OriginalSource: s.OriginalSource,
			OriginalSHA256: s.OriginalSHA256, OriginalAt: s.OriginalAt, DuplicateSHA256: s.DuplicateSHA256, DuplicateAt: s.DuplicateAt,
			RemoteAddr: s.RemoteAddr, RequestID: s.RequestID,
			OriginalHex: fmt.Sprintf("%x", s.OriginalSHA256), DuplicateHex: fmt.Sprintf("%x", s.DuplicateSHA256),
			OriginalTime: time.UnixMilli(s.OriginalAt).UTC(), DuplicateTime: time.UnixMilli(s.DuplicateAt).UTC()})
	}
	return ms, nil
}
