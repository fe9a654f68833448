package cli

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/ledger"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "prove nobody edited the ledger: hash chains, receipts, invoices and closes, SQLite integrity",
		Description: "Runs SQLite's integrity_check, recomputes the hash chain over every ledger row, checks that every\n" +
			"applied receipt has its usage rows and every usage row its receipt, and recomputes every closed\n" +
			"invoice's digests and quantities from the ledger; checks every close against its seal (the count\n" +
			"and digest of the invoices it wrote, chained close after close) and that every usage row of a\n" +
			"closed period is on an invoice of its close or late, never between closed periods where no close\n" +
			"can bill it. Recomputes the receipts' hash chain, checks\n" +
			"that both chains end where the chain head says, that every stored body matches its body_sha256\n" +
			"and every replayed receipt's status its replays, and that every anchor (from `ledger head` or\n" +
			"serve's \"chain head\" log lines) still names a row with that hash. On PostgreSQL the integrity\n" +
			"check is amcheck's page and index checks; when amcheck is not installed or not granted to the\n" +
			"role, that check is listed as skipped with the reason, every other check runs, and the exit\n" +
			"status does not change. Exits 3 naming the first broken row (1 when it cannot check, 130 when\n" +
			"interrupted). What is not a failure but worth knowing is a note (exit 0): e.g. a late line an\n" +
			"older version put on an earlier month's invoice.\n" +
			"Reads only; safe while `serve` runs.",
		Flags: append(configFlags(), formatFlag(),
			&cli.StringSliceFlag{Name: "anchor", EnvVars: []string{"HOOKLEDGER_ANCHOR"},
				Usage: "an `ANCHOR` that must still hold: chain:id:hash (ledger:ID:HASH, receipts:ID:HASH, closes:ID:HASH or credits:ID:HASH) from hookledger ledger head; repeatable"},
			&cli.StringFlag{Name: "anchors", EnvVars: []string{"HOOKLEDGER_ANCHORS"},
				Usage: "a `FILE` of anchors: every chain:id:hash in it, e.g. kept serve log lines or hookledger ledger head output"},
		),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			anchors, err := readAnchors(c)
			if err != nil {
				return err
			}
			db, err := openExisting(c)
			if err != nil {
				return err
			}
			defer db.Close()
			ctx, stop := signalContext(c)
			defer stop()
			rep, err := ledger.Verify(ctx, db, anchors...)
			if ctx.Err() != nil {
				return interrupted("the ledger was not fully verified; nothing was changed (verify only reads)")
			}
			if err != nil {
				return err
			}
			header := []string{"check", "checked", "status", "table", "id", "problem"}
			var rows [][]string
			for _, ch := range rep.Checks {
				n := strconv.FormatInt(ch.Checked, 10)
				if ch.Skipped != "" {
					rows = append(rows, []string{ch.Name, n, "skipped", "", "", ch.Skipped})
				} else if ch.OK() {
					rows = append(rows, []string{ch.Name, n, "ok", "", "", ""})
				}
				for _, p := range ch.Problems {
					rows = append(rows, []string{ch.Name, n, "BROKEN", p.Table, strconv.FormatInt(p.ID, 10), p.Msg})
				}
				for _, note := range ch.Notes {
					rows = append(rows, []string{ch.Name, n, "note", "", "", note})
				}
			}
			if err := writeRecords(c.App.Writer, format, header, rows, rep); err != nil {
				return err
			}
			if p := rep.First(); p != nil {
				return problem(fmt.Errorf("verify failed: %w", *p))
			}
			return nil
		},
	}
}
