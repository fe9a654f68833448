// Package dispute traces a charge back to its evidence: from an invoice line
// to the ledger rows it covers, to each event's receipt and delivery attempts,
// and to the raw bytes the provider signed, re-verified against the secrets
// configured now. It renders the trace for people (a table), for programs
// (JSON) and as an evidence bundle anyone holding the secret can check.
package dispute

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Target kinds.
const (
	KindInvoice  = "invoice"      // invoice:ID
	KindLine     = "invoice_line" // invoice:ID/LINE
	KindRow      = "row"          // row:ID
	KindEvent    = "event"        // PROVIDER:EVENT_ID or event:PROVIDER/EVENT_ID
	KindCustomer = "customer"     // dispute customer C --period P
)

// ErrNotFound means the target names nothing in the database.
var ErrNotFound = errors.New("not found")

// ErrBadTarget means the target is not written in one of the accepted forms.
var ErrBadTarget = errors.New("not a dispute target")

// TargetForms is the help text listing the accepted forms.
const TargetForms = "invoice:ID (a whole invoice), invoice:ID/LINE (one line), row:ID (a ledger row) or " +
	"PROVIDER:EVENT_ID (an event; event:PROVIDER/EVENT_ID for a provider named invoice, row or event, " +
	"and for an ingest API event: event:api:KEYNAME/SOURCE#ID)"

// Target is a parsed dispute target.
type Target struct {
	Kind     string
	Invoice  int64  // invoice and invoice_line
	Line     int64  // invoice_line
	Row      int64  // row
	Provider string // event
	EventID  string // event
}

// String writes the target in its canonical form.
func (t Target) String() string {
	switch t.Kind {
	case KindInvoice:
		return fmt.Sprintf("invoice:%d", t.Invoice)
	case KindLine:
		return fmt.Sprintf("invoice:%d/%d", t.Invoice, t.Line)
	case KindRow:
		return fmt.Sprintf("row:%d", t.Row)
	case KindEvent:
		// An ingest API scope (api:NAME) has a ':' of its own.
		if t.Provider == "invoice" || t.Provider == "row" || t.Provider == "event" || strings.Contains(t.Provider, ":") {
			return "event:" + t.Provider + "/" + t.EventID
		}
		return t.Provider + ":" + t.EventID
	}
	return ""
}

// ParseTarget reads one of the forms in TargetForms. The keywords invoice,
// row and event come first, so a provider with one of those names is named
// through event:PROVIDER/EVENT_ID.
func ParseTarget(s string) (Target, error) {
	bad := func(why string) (Target, error) {
		return Target{}, fmt.Errorf("%w: %q %s; want %s", ErrBadTarget, s, why, TargetForms)
	}
	kind, rest, ok := strings.Cut(s, ":")
	if !ok || kind == "" || rest == "" {
		return bad("has no PREFIX:VALUE")
	}
	switch kind {
	case "invoice":
		inv, line, hasLine := strings.Cut(rest, "/")
		id, ok := positive(inv)
		if !ok {
			return bad("does not name an invoice id (a positive number)")
		}
		if !hasLine {
			return Target{Kind: KindInvoice, Invoice: id}, nil
		}
		n, ok := positive(line)
		if !ok {
			return bad("does not name a line number (a positive number) after the /")
		}
		return Target{Kind: KindLine, Invoice: id, Line: n}, nil
	case "row":
		id, ok := positive(rest)
		if !ok {
			return bad("does not name a ledger row id (a positive number)")
		}
		return Target{Kind: KindRow, Row: id}, nil
	case "event":
		p, e, ok := strings.Cut(rest, "/")
		if !ok || p == "" || e == "" {
			return bad("is not event:PROVIDER/EVENT_ID")
		}
		return Target{Kind: KindEvent, Provider: p, EventID: e}, nil
	}
	// Provider names cannot contain ':', event ids can: split at the first.
	return Target{Kind: KindEvent, Provider: kind, EventID: rest}, nil
}

func positive(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// Suggest finds the configured providers that hold a receipt for eventID,
// for a target given without its provider ("evt_1" instead of "stripe:evt_1").
func (t *Tracer) Suggest(ctx context.Context, eventID string) []string {
	var out []string
	for _, p := range t.Verifier.Providers() {
		if found, err := t.DB.HasReceipt(ctx, p, eventID); err == nil && found {
			out = append(out, Target{Kind: KindEvent, Provider: p, EventID: eventID}.String())
		}
	}
	return out
}
