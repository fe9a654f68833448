package invoice

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// A plan version that priced a closed invoice is frozen (DESIGN.md,
// invariant 8): the invoice stores it (its price snapshot), and late usage
// of the period it priced is priced by it again. A configuration that holds
// a version of the same name and date with other prices would bill under
// one label two prices; it is refused by every command that prices and by
// serve at startup, and the change goes in as a new version.

// SnapshotSource reads the price snapshots closed invoices store.
type SnapshotSource interface {
	PriceSnapshots(ctx context.Context) ([]schema.PriceSnapshot, error)
}

// PricingSource is what loading the pricing reads: the registry's
// assignments and customers, and the closed invoices' snapshots that freeze
// versions.
type PricingSource interface {
	customer.RegistryStore
	InvoiceSource
}

// CheckFrozenPrices refuses a catalog holding a plan version that differs
// from the version of the same name and date stored with a closed invoice
// (ErrFrozenVersion, naming the plan, its date and the first such invoice,
// and how to add a new version instead). A version no longer configured is
// not refused: closed periods keep pricing late usage with the stored one.
func CheckFrozenPrices(ctx context.Context, src SnapshotSource, catalog *pricing.Catalog) error {
	if catalog == nil || len(catalog.Names()) == 0 {
		return nil
	}
	snaps, err := src.PriceSnapshots(ctx)
	if err != nil {
		return fmt.Errorf("read the price snapshots of closed invoices: %w", err)
	}
	checked := map[string]bool{} // versionKey, once: the first invoice is named
	for _, s := range snaps {
		var raws []json.RawMessage
		if err := json.Unmarshal([]byte(s.Snapshot), &raws); err != nil {
			return fmt.Errorf("invoice %d: the stored price snapshot cannot be read: %v", s.InvoiceID, err)
		}
		for _, raw := range raws {
			stored, err := pricing.ParseSnapshot(raw)
			if err != nil {
				return fmt.Errorf("invoice %d: %w", s.InvoiceID, err)
			}
			key := versionKey(stored)
			if checked[key] {
				continue
			}
			checked[key] = true
			for _, c := range catalog.Versions(stored.Name) {
				if c.EffectiveFrom != stored.EffectiveFrom {
					continue
				}
				same, err := samePrices(c, stored)
				if err != nil {
					return err
				}
				if !same {
					return fmt.Errorf("%w (customer %q, %s)", frozenError(stored, s.InvoiceID), s.Customer, s.Period)
				}
			}
		}
	}
	return nil
}
