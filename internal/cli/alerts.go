package cli

import (
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/entitle"
)

func alertsCommand() *cli.Command {
	return &cli.Command{
		Name:  "alerts",
		Usage: "list the threshold alerts that fired",
		Description: "A threshold of a limit (plans[].limits[].alerts) fires once per period, in the transaction of the\n" +
			"ledger row that took usage to it; its alert is an event of provider hookledger, type\n" +
			"usage.threshold_crossed, forwarded to the destinations that route it (docs/entitlements.md).",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "the crossings, newest first, each with the ledger row that crossed it",
				Flags: append(configFlags(), formatFlag(),
					&cli.StringFlag{Name: "customer", Usage: "only this customer's"},
					&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most this many"},
				),
				Action: alertsList,
			},
		},
	}
}

func alertsList(c *cli.Context) error {
	if len(positional(c)) != 0 {
		return usageErrorf(c, "alerts list takes no arguments")
	}
	if c.Int("limit") <= 0 {
		return usageErrorf(c, "--limit must be positive")
	}
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	cs, err := entitle.Crossings(c.Context, db, c.String("customer"), c.Int("limit"))
	if err != nil {
		return err
	}
	rows := make([][]string, len(cs))
	for i, x := range cs {
		rows[i] = []string{x.CrossedAt.Format(time.RFC3339), x.Customer, x.Meter, x.Period, x.Threshold, x.Value.String(),
			orDash(x.Limit), x.Used.String(), strconv.FormatInt(x.RowID, 10), x.EventID}
	}
	return writeRecords(c.App.Writer, c.String("format"),
		[]string{"crossed_at", "customer", "meter", "period", "threshold", "value", "limit", "used", "row", "alert_event"}, rows, orEmpty(cs))
}
