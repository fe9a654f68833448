package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/schema"
)

// buildUsageState builds the usage state (per customer, meter and month,
// the ledger's sums: entitle, ledger/state.go) unless it is built already
// with months in invoicing.tz. It is built once, after migration 0019 or a
// change of zone; from then on every write batch keeps it current, so a
// restart finds it equal to the ledger (verify checks that) and builds
// nothing. A build reads the whole ledger inside one write transaction.
//
// The build is logged when it read rows: a new database's is not news.
func buildUsageState(ctx context.Context, log *slog.Logger, cfg *config.Config, db *schema.DB, w *custody.Writer) error {
	zone := "UTC"
	if cfg.Invoicing.Location != nil {
		zone = cfg.Invoicing.Location.String()
	}
	start := time.Now()
	built, err := w.BuildUsageState(ctx, zone)
	if err != nil {
		return fmt.Errorf("build the usage state: %w", err)
	}
	if n, err := db.LastLedgerID(ctx); built && err == nil && n > 0 {
		log.Info("usage state built from the ledger", "zone", zone, "rows", n, "duration", time.Since(start).Round(time.Millisecond).String())
	}
	return nil
}
