package cli

import (
	"encoding/json"
	"slices"
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
			"usage.threshold_crossed, forwarded to the destinations that route it (docs/entitlements.md).\n" +
			"A spend threshold (plans[].spend.alerts) fires the same way when a row takes the month's spend\n" +
			"to it, as type spend.threshold_crossed; it is listed with meter (spend) and amounts in the\n" +
			"plan's currency.",
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
	ss, err := entitle.SpendCrossings(c.Context, db, c.String("customer"), c.Int("limit"))
	if err != nil {
		return err
	}
	// Both lists are newest first; merged by when they fired (a usage
	// crossing first on a tie: the writer records it first in the row's
	// transaction), cut at --limit.
	out := make([]alertJSON, 0, len(cs)+len(ss))
	for _, x := range cs {
		out = append(out, alertJSON{Kind: "usage", usage: x, at: x.CrossedAt,
			row: []string{x.CrossedAt.Format(time.RFC3339), x.Customer, x.Meter, x.Period, x.Threshold, x.Value.String(),
				orDash(x.Limit), x.Used.String(), strconv.FormatInt(x.RowID, 10), x.EventID}})
	}
	for _, x := range ss {
		limit := "-"
		if x.Limit != "" {
			limit = x.Limit + " " + x.Currency
		}
		out = append(out, alertJSON{Kind: "spend", spend: x, at: x.CrossedAt,
			row: []string{x.CrossedAt.Format(time.RFC3339), x.Customer, spendMeter, x.Period, x.Threshold, x.Amount + " " + x.Currency,
				limit, x.Spent + " " + x.Currency, strconv.FormatInt(x.RowID, 10), x.EventID}})
	}
	slices.SortStableFunc(out, func(a, b alertJSON) int { return b.at.Compare(a.at) })
	out = out[:min(len(out), c.Int("limit"))]
	rows := make([][]string, len(out))
	for i, a := range out {
		rows[i] = a.row
	}
	return writeRecords(c.App.Writer, c.String("format"),
		[]string{"crossed_at", "customer", "meter", "period", "threshold", "value", "limit", "used", "row", "alert_event"}, rows, out)
}

// alertJSON is one crossing in `alerts list --format json`: a usage
// crossing's fields, or a spend crossing's, with kind usage or spend.
type alertJSON struct {
	Kind  string
	usage entitle.CrossingView
	spend entitle.SpendCrossingView
	at    time.Time
	row   []string
}

func (a alertJSON) MarshalJSON() ([]byte, error) {
	if a.Kind == "spend" {
		return json.Marshal(struct {
			Kind string `json:"kind"`
			entitle.SpendCrossingView
		}{a.Kind, a.spend})
	}
	return json.Marshal(struct {
		Kind string `json:"kind"`
		entitle.CrossingView
	}{a.Kind, a.usage})
}
