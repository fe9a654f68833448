package main

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/ledger"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "prove nobody edited the ledger: hash chain, receipts, invoices, SQLite integrity",
		Description: "Runs SQLite's integrity_check, recomputes the hash chain over every ledger row, checks that every\n" +
			"applied receipt has its usage rows and every usage row its receipt, and recomputes every closed\n" +
			"invoice's digests and quantities from the ledger. Exits 3 naming the first broken row (1 when it\n" +
			"cannot check, 130 when interrupted).\n" +
			"Reads only; safe while `serve` runs.",
		Flags: append(configFlags(), formatFlag()),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			db, err := openExisting(c)
			if err != nil {
				return err
			}
			defer db.Close()
			ctx, stop := signalContext(c)
			defer stop()
			rep, err := ledger.Verify(ctx, db.Read)
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
				if ch.OK() {
					rows = append(rows, []string{ch.Name, n, "ok", "", "", ""})
				}
				for _, p := range ch.Problems {
					rows = append(rows, []string{ch.Name, n, "BROKEN", p.Table, strconv.FormatInt(p.ID, 10), p.Msg})
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
