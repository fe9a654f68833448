package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/internal/seed"
	"github.com/hookledger/hookledger/ledger"
)

func devCommand() *cli.Command {
	return &cli.Command{
		Name:  "dev",
		Usage: "developer tools",
		Subcommands: []*cli.Command{
			{
				Name:  "seed",
				Usage: "fill a database with synthetic usage (for trying queries and the invoicing benchmarks)",
				Description: "Appends --rows events, one usage row each, through the normal apply path (receipt, delivery\n" +
					"attempt, hash-chained usage row) for --customers customers over --months months, on three meters:\n" +
					"api_requests (sum), storage_gb (max) and active_users (unique_count of property user); --exports\n" +
					"adds a fourth, exports (sum), taking one event in ten from api_requests; --models gives\n" +
					"api_requests the dimension model (one of four values per row). Event ids are random per\n" +
					"run, so seeding twice adds more. Never point it at a production database.",
				Flags: append(configFlags(),
					&cli.IntFlag{Name: "rows", Required: true, DefaultText: "none, required", EnvVars: []string{"HOOKLEDGER_SEED_ROWS"}, Usage: "number of usage rows to add"},
					&cli.IntFlag{Name: "customers", Value: 10_000, EnvVars: []string{"HOOKLEDGER_SEED_CUSTOMERS"}, Usage: "number of distinct customers"},
					&cli.StringFlag{Name: "from", Value: "2026-01", EnvVars: []string{"HOOKLEDGER_SEED_FROM"}, Usage: "first event time (RFC 3339, date or month, UTC)"},
					&cli.IntFlag{Name: "months", Value: 12, EnvVars: []string{"HOOKLEDGER_SEED_MONTHS"}, Usage: "spread events evenly over this many months"},
					&cli.BoolFlag{Name: "exports", EnvVars: []string{"HOOKLEDGER_SEED_EXPORTS"}, Usage: "add a fourth meter, exports (sum), for the priced-close benchmark"},
					&cli.BoolFlag{Name: "models", EnvVars: []string{"HOOKLEDGER_SEED_MODELS"}, Usage: "give api_requests the dimension model, for the dimensional benchmarks"},
					&cli.Uint64Flag{Name: "seed", Value: 1, EnvVars: []string{"HOOKLEDGER_SEED"}, Usage: "random seed (same seed, same data)"},
				),
				Action: devSeed,
			},
		},
	}
}

func devSeed(c *cli.Context) error {
	from, err := ledger.ParseTime(c.String("from"), time.UTC)
	if err != nil {
		return fmt.Errorf("--from: %w", err)
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, stop := signalContext(c)
	defer stop()
	start := time.Now()
	rows := c.Int("rows")
	// The ledger's row count before and after says what an interrupted seed
	// added: the chunk in flight at the signal may still have committed.
	before, err := db.CountLedgerRows(ctx)
	if err != nil {
		return err
	}
	err = seed.Run(ctx, db, seed.Options{
		Rows: rows, Customers: c.Int("customers"), From: from, Months: c.Int("months"), Seed: c.Uint64("seed"), Exports: c.Bool("exports"),
		Models: c.Bool("models"),
		Progress: func(done int) {
			if done%500_000 == 0 || done == rows {
				el := time.Since(start)
				fmt.Fprintf(c.App.ErrWriter, "seeded %d/%d rows in %s (%.0f rows/s)\n", done, rows, el.Round(time.Second), float64(done)/el.Seconds())
			}
		},
	})
	if ctx.Err() != nil {
		after, cerr := db.CountLedgerRows(context.Background())
		if cerr != nil {
			return interrupted(fmt.Sprintf("some of %d usage rows were added to %s (cannot count them: %v)", rows, db.Path, cerr))
		}
		added := after - before
		return interrupted(fmt.Sprintf("added %d of %d usage rows to %s (whole chunks of 20000, each with its receipts); the other %d were not added",
			added, rows, db.Path, int64(rows)-added))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "added %d usage rows for %d customers to %s in %s\n", rows, c.Int("customers"), db.Path, time.Since(start).Round(time.Millisecond))
	return nil
}
