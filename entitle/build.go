package entitle

import (
	"context"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// BuildStore is what Build needs inside the writer's batch (schema.Batch).
type BuildStore interface {
	ResetUsageState(ctx context.Context, z schema.StateZone) error
	SaveUsageState(ctx context.Context, s schema.UsageState) error
	ScanUsage(ctx context.Context, s schema.UsageScan, fn func(*schema.UsageRow) error) error
}

// ZoneReader reads which zone the usage state was built in (*schema.DB).
type ZoneReader interface {
	StateZone(ctx context.Context) (schema.StateZone, bool, error)
}

// NeedsBuild reports whether the usage state must be built before serve
// answers: it never was (a database from before migration 0019), or its
// months were computed in another zone than zone (invoicing.tz changed).
func NeedsBuild(ctx context.Context, db ZoneReader, zone string) (bool, error) {
	z, ok, err := db.StateZone(ctx)
	if err != nil {
		return false, err
	}
	return !ok || z.Zone != zone, nil
}

// Build recomputes the usage state from the whole ledger, with months in
// zone, inside the writer's batch: the batch holds the write lock, so the
// state it stores is exactly the ledger's up to head, and every batch after
// it keeps it current. Threshold crossings are not recomputed: what fired
// stays fired.
func Build(ctx context.Context, b BuildStore, zone string, now time.Time, head int64) error {
	loc, err := ledger.LoadZone(zone)
	if err != nil {
		return err
	}
	if err := b.ResetUsageState(ctx, schema.StateZone{Zone: loc.String(), BuiltAt: now.UnixMilli(), Through: head}); err != nil {
		return err
	}
	sums, err := ledger.SumUsageState(ctx, b, loc)
	if err != nil {
		return err
	}
	for k, s := range sums {
		if err := b.SaveUsageState(ctx, schema.UsageState{Customer: k.Customer, Meter: k.Meter, PeriodStart: k.PeriodStart,
			PeriodEnd: s.PeriodEnd, Used: s.Used.String(), LastRowID: s.LastRowID}); err != nil {
			return fmt.Errorf("build usage state: %w", err)
		}
	}
	return nil
}
