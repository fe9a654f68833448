package ledger

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookledger/hookledger/schema"
)

// Bulk corrections (void --where, amend --remap) select their events here
// and correct each in its own op: an event is voided (and amended) whole or
// not at all, and a run that stopped halfway is started again: events voided
// by the first run are no longer selected, and the op refuses a second void
// of one voided meanwhile.

// EventScanner reads ledger rows in id order (*schema.DB, *schema.ReadTx).
type EventScanner interface {
	ScanLedger(ctx context.Context, f schema.LedgerFilter, fn func(*schema.LedgerRow) error) error
}

// SelectEvents returns provider's events with a usage row among the rows f
// selects that are not voided, in the order of their first row.
func SelectEvents(ctx context.Context, src EventScanner, provider string, f schema.LedgerFilter) ([]string, error) {
	var ids []string
	seen := map[string]bool{}
	voided := map[string]bool{}
	prefix := VoidEventID(provider, "")
	err := src.ScanLedger(ctx, f, func(r *schema.LedgerRow) error {
		switch {
		case r.Kind == KindUsage && r.Provider == provider && !seen[r.EventID]:
			seen[r.EventID] = true
			ids = append(ids, r.EventID)
		case r.Kind == KindVoid && strings.HasPrefix(r.EventID, prefix):
			// A void row has its voided row's customer, meter and event
			// time, so the same filter selects it.
			voided[strings.TrimPrefix(r.EventID, prefix)] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("select events: %w", err)
	}
	out := ids[:0]
	for _, id := range ids {
		if !voided[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

// SameRows reports whether after would append exactly the usage rows before
// holds (customer, meter, quantity, event time, properties, in any order): a
// remap that changes nothing leaves the event alone.
func SameRows(before, after []Row) bool {
	key := func(r Row) string {
		return fmt.Sprintf("%q %q %s %d %q", r.Customer, r.Meter, r.Quantity, r.OccurredAt, r.Properties)
	}
	count := map[string]int{}
	n := 0
	for _, r := range before {
		if r.Kind == KindUsage {
			count[key(r)]++
			n++
		}
	}
	if n != len(after) {
		return false
	}
	for _, r := range after {
		if count[key(r)]--; count[key(r)] < 0 {
			return false
		}
	}
	return true
}
