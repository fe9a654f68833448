package cli

import (
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/schema"
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
			"plan's currency. A credit threshold (credits.alerts) fires once per grant, as type\n" +
			"credits.balance_low or credits.depleted; it is listed with meter credit:GRANT, its value,\n" +
			"the grant's balance as limit and what the month's spend draws from it as used.",
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
	cr, err := db.CreditCrossings(c.Context, c.String("customer"), c.Int("limit"))
	if err != nil {
		return err
	}
	// The lists are newest first; merged by when they fired (a usage
	// crossing first on a tie: the writer records it first in the row's
	// transaction), cut at --limit.
	out := make([]alertJSON, 0, len(cs)+len(ss)+len(cr))
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
	for _, x := range cr {
		at := time.UnixMilli(x.CrossedAt).UTC()
		period := time.UnixMilli(x.PeriodStart).UTC().Format("2006-01")
		out = append(out, alertJSON{Kind: "credit", credit: x, at: at,
			row: []string{at.Format(time.RFC3339), x.Customer, "credit:" + x.GrantID, period, x.Threshold, x.ThresholdValue + " " + x.Currency,
				x.Balance + " " + x.Currency, x.Drawn + " " + x.Currency, strconv.FormatInt(x.RowID, 10), entitle.CreditAlertEventID(x.GrantID, x.Threshold)}})
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
// crossing's fields, a spend crossing's or a credit crossing's, with kind
// usage, spend or credit.
type alertJSON struct {
	Kind   string
	usage  entitle.CrossingView
	spend  entitle.SpendCrossingView
	credit schema.CreditCrossing
	at     time.Time
	row    []string
}

func (a alertJSON) MarshalJSON() ([]byte, error) {
	if a.Kind == "credit" {
		return json.Marshal(struct {
			Kind      string `json:"kind"`
			Grant     string `json:"grant"`
			Customer  string `json:"customer"`
			Currency  string `json:"currency"`
			Threshold string `json:"threshold"`
			Value     string `json:"value"`
			Balance   string `json:"balance"`
			Drawn     string `json:"drawn"`
			Available string `json:"available"`
			Plan      string `json:"plan"`
			RowID     int64  `json:"row_id"`
			EventID   string `json:"event_id"`
			CrossedAt string `json:"crossed_at"`
		}{a.Kind, a.credit.GrantID, a.credit.Customer, a.credit.Currency, a.credit.Threshold, a.credit.ThresholdValue, a.credit.Balance,
			a.credit.Drawn, a.credit.Available, a.credit.Plan, a.credit.RowID, entitle.CreditAlertEventID(a.credit.GrantID, a.credit.Threshold),
			a.at.Format(time.RFC3339Nano)})
	}
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
