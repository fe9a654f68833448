package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// Adjustment is a correction: a new ledger row with a signed quantity and a
// reason. The rows it corrects stay as they were; period totals include both.
type Adjustment struct {
	Customer string
	Meter    string
	Quantity Total // at most what one row holds (RowParts)
	Reason   string
	// Ref names what is corrected: event:PROVIDER/EVENT_ID, row:ID or invoice:ID.
	Ref string
	// OccurredAt places the adjustment in a period. Zero: the referenced
	// row's event time, the referenced invoice's period start, else now, so
	// a correction lands in the period it corrects (and, if that period is
	// closed, on the next invoice as a late line naming it).
	OccurredAt time.Time
}

// ErrBadAdjustment wraps every validation failure of an adjustment.
var ErrBadAdjustment = errors.New("invalid adjustment")

// Validate checks the adjustment on its own (meters: declared meters, if any).
func (a *Adjustment) Validate(meters Meters) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadAdjustment, fmt.Sprintf(format, args...))
	}
	a.Reason = strings.TrimSpace(a.Reason)
	switch {
	case a.Customer == "":
		return bad("customer is required")
	case a.Meter == "":
		return bad("meter is required")
	case a.Quantity.Sign() == 0:
		return bad("quantity must not be zero")
	case a.Reason == "":
		return bad("a reason is required: say why the ledger is corrected")
	}
	if _, _, ok := a.Quantity.RowParts(); !ok {
		return bad("quantity %s: %v", a.Quantity, errRowRange)
	}
	// The rule of every identifier that reaches the ledger (CheckIdentifier).
	if err := CheckIdentifier(a.Customer); err != nil {
		return bad("customer: %v", err)
	}
	if err := CheckIdentifier(a.Meter); err != nil {
		return bad("meter: %v", err)
	}
	if err := CheckTexts(Text{"reason", a.Reason}, Text{"ref", a.Ref}); err != nil {
		return bad("%v", err)
	}
	if len(meters) > 0 {
		if _, ok := meters[a.Meter]; !ok {
			return bad("meter %q is not declared under meters", a.Meter)
		}
	}
	if a.Ref != "" {
		if _, _, err := parseRef(a.Ref); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// parseRef splits "kind:value" and checks the value's shape.
func parseRef(ref string) (kind, value string, err error) {
	kind, value, ok := strings.Cut(ref, ":")
	if !ok || value == "" {
		return "", "", fmt.Errorf("ref %q: want event:PROVIDER/EVENT_ID, row:ID or invoice:ID", ref)
	}
	switch kind {
	case "event":
		if p, e, ok := strings.Cut(value, "/"); !ok || p == "" || e == "" {
			return "", "", fmt.Errorf("ref %q: want event:PROVIDER/EVENT_ID", ref)
		}
	case "row", "invoice":
		if n, err := strconv.ParseInt(value, 10, 64); err != nil || n <= 0 {
			return "", "", fmt.Errorf("ref %q: %s takes a positive number", ref, kind)
		}
	default:
		return "", "", fmt.Errorf("ref %q: want event:PROVIDER/EVENT_ID, row:ID or invoice:ID", ref)
	}
	return kind, value, nil
}

// Row resolves the reference inside the write transaction (it must exist and
// belong to the same customer) and returns the ledger row to append.
// recordedAt is the writer's batch time.
func (a *Adjustment) Row(ctx context.Context, refs RefResolver, recordedAt int64) (*Row, error) {
	occurred := a.OccurredAt
	if a.Ref != "" {
		kind, value, err := parseRef(a.Ref)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadAdjustment, err)
		}
		var customer string
		var at int64
		switch kind {
		case "row":
			id, _ := strconv.ParseInt(value, 10, 64) // parseRef checked it
			customer, at, err = refs.LedgerRowOwner(ctx, id)
		case "invoice":
			id, _ := strconv.ParseInt(value, 10, 64)
			customer, at, err = refs.InvoiceOwner(ctx, id)
		case "event":
			provider, eventID, _ := strings.Cut(value, "/")
			customer, at, err = refs.EventOwner(ctx, provider, eventID, a.Meter)
		}
		if errors.Is(err, schema.ErrNotFound) {
			return nil, fmt.Errorf("%w: ref %s: not found", ErrBadAdjustment, a.Ref)
		}
		if err != nil {
			return nil, fmt.Errorf("resolve ref %s: %w", a.Ref, err)
		}
		if customer != a.Customer {
			return nil, fmt.Errorf("%w: ref %s belongs to customer %q, not %q", ErrBadAdjustment, a.Ref, customer, a.Customer)
		}
		if occurred.IsZero() {
			occurred = time.UnixMilli(at)
		}
	}
	if occurred.IsZero() {
		occurred = time.UnixMilli(recordedAt)
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	return &Row{
		Kind:       KindAdjustment,
		Provider:   "",
		EventID:    "adj_" + hex.EncodeToString(b[:]),
		Customer:   a.Customer,
		Meter:      a.Meter,
		Quantity:   a.Quantity,
		Properties: "{}",
		Reason:     a.Reason,
		Ref:        a.Ref,
		OccurredAt: occurred.UnixMilli(),
		RecordedAt: recordedAt,
	}, nil
}
