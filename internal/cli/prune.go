package cli

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/reconcile"
)

func pruneCommand() *cli.Command {
	return &cli.Command{
		Name:  "prune",
		Usage: "apply retention: delete raw bodies after retention.payload, receipts after retention.keys",
		Description: "A pruned receipt keeps a tombstone (provider, event id, body digest, received_at, status), so a late\n" +
			"redelivery is still a duplicate; after retention.keys the tombstone goes too. Ledger rows are never\n" +
			"pruned, and failed receipts are kept whole until replayed. serve prunes every retention.interval.",
		Flags: append(configFlags(),
			&cli.BoolFlag{Name: "dry-run", EnvVars: []string{"HOOKLEDGER_DRY_RUN"},
				Usage: "count what would be pruned; change nothing"},
			formatFlag(),
		),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			cfg, err := commandConfig(c)
			if err != nil {
				return err
			}
			ret := cfg.Retention
			if !ret.Enabled() {
				fmt.Fprintln(c.App.Writer, "retention is not configured (retention.payload, retention.keys, retention.delivered): everything is kept")
				return nil
			}
			dryRun := c.Bool("dry-run")
			db, w, err := openCustody(c.Context, cfg, dryRun)
			if err != nil {
				return err
			}
			defer closeCustody(db, w)
			rep, runErr := reconcile.Prune(c.Context, db, w, reconcile.Retention{Payload: ret.Payload.Duration, Keys: ret.Keys.Duration, Delivered: ret.Delivered.Duration},
				time.Now(), dryRun)
			cut := func(t *time.Time) string {
				if t == nil {
					return "never"
				}
				return t.Format(time.RFC3339)
			}
			header := []string{"payload_before", "bodies_pruned", "keys_before", "keys_deleted", "redelivery_requests_deleted", "failed_kept"}
			row := []string{cut(rep.PayloadBefore), fmt.Sprint(rep.BodiesPruned), cut(rep.KeysBefore), fmt.Sprint(rep.KeysDeleted),
				fmt.Sprint(rep.RedeliveryRequestsDeleted), fmt.Sprint(rep.FailedKept)}
			if ret.Delivered.Duration > 0 { // columns only when forwarding retention is set, so existing output stays as it was
				header = append(header, "delivered_before", "delivered_pruned")
				row = append(row, cut(rep.DeliveredBefore), fmt.Sprint(rep.DeliveredPruned))
			}
			if err := writeRecords(c.App.Writer, format, header, [][]string{row}, rep); err != nil {
				return err
			}
			if format == "table" && dryRun {
				fmt.Fprintln(c.App.Writer, "dry run: nothing was changed")
			}
			if runErr == nil && rep.TamperedKept > 0 {
				return problem(fmt.Errorf("kept %d receipts whole although due: their stored body no longer hashes to the "+
					"digest taken on arrival, and pruning would erase that evidence; run hookledger verify", rep.TamperedKept))
			}
			return runErr
		},
	}
}
