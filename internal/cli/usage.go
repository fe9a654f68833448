package cli

import (
	"fmt"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

func usageCommand() *cli.Command {
	return &cli.Command{
		Name:  "usage",
		Usage: "usage per customer and meter over an event-time window",
		Description: "The window is half-open on event time: --from <= occurred_at < --to. Times are RFC 3339, or a\n" +
			"month (2026-11), a date (2026-11-01) or a wall-clock time read in --tz; an omitted bound is open.\n" +
			"Each meter is aggregated as declared under meters in the config (sum when undeclared), and\n" +
			"adjustments add their signed quantity. --as-of reproduces an earlier answer: only rows recorded\n" +
			"before that time (or with ledger id <= N, for id:N) count. A meter's dimensions (meters[].dimensions)\n" +
			"group (--group-by customer,model) and filter (--where model=gpt-4o); a row without the property\n" +
			"has the empty value. The admin API answers the same query\n" +
			"at GET /v1/usage.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "from", EnvVars: []string{"HOOKLEDGER_FROM"}, Usage: "start of the window, inclusive"},
			&cli.StringFlag{Name: "to", EnvVars: []string{"HOOKLEDGER_TO"}, Usage: "end of the window, exclusive"},
			tzFlag("IANA time zone for --from/--to and for hour, day and month grouping, e.g. Europe/Berlin"),
			&cli.StringFlag{Name: "customer", EnvVars: []string{"HOOKLEDGER_CUSTOMER"}, Usage: "only this customer"},
			&cli.StringFlag{Name: "meter", EnvVars: []string{"HOOKLEDGER_METER"}, Usage: "only this meter"},
			&cli.StringFlag{Name: "group-by", Value: "customer,meter", EnvVars: []string{"HOOKLEDGER_GROUP_BY"},
				Usage: "comma-separated: customer, meter, meters' dimensions and at most one of hour, day, month (\"\" for one total)"},
			&cli.StringFlag{Name: "where", EnvVars: []string{"HOOKLEDGER_WHERE"},
				Usage: "only rows whose dimensions match: model=gpt-4o,region!=eu,tier in (a,b) (every term holds; model= is rows without it)"},
			&cli.StringFlag{Name: "as-of", EnvVars: []string{"HOOKLEDGER_AS_OF"},
				Usage: "ingestion cutoff: a time (rows recorded before it) or id:N (rows with ledger id <= N)"},
			formatFlag(),
		),
		Action:      usage,
		Subcommands: []*cli.Command{usageLateCommand(), usageStrandedCommand()},
	}
}

func usage(c *cli.Context) error {
	format := c.String("format")
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	meters := ledger.NewMeters(cfg.Meters)
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return err
	}
	p := ledger.UsageParams{From: c.String("from"), To: c.String("to"), TZ: loc.String(), Customer: c.String("customer"),
		Meter: c.String("meter"), GroupBy: c.String("group-by"), Where: c.String("where"), AsOf: c.String("as-of")}
	if !c.IsSet("group-by") {
		p.GroupBy = ""
	}
	q, err := p.Query(meters)
	if err != nil {
		return flagError(err)
	}
	if c.IsSet("group-by") && c.String("group-by") == "" {
		q.GroupBy = []string{}
	}
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	rep, err := ledger.Query(c.Context, db, q)
	if err != nil {
		return err
	}
	header, rows := rep.Records()
	// JSON is a plain array of lines, one object per customer × meter (× bucket).
	lines := rep.Lines
	if lines == nil {
		lines = []ledger.UsageLine{}
	}
	return writeRecords(c.App.Writer, format, header, rows, lines)
}

func usageLateCommand() *cli.Command {
	return &cli.Command{
		Name:  "late",
		Usage: "usage of closed periods recorded after their close and not yet billed",
		Description: "Lists, per customer, meter and closed period, the usage (and adjustments) recorded after\n" +
			"the period's invoice was closed. The customer's next invoice for a period starting at or after\n" +
			"that period's end bills it as late lines naming that period.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "customer", EnvVars: []string{"HOOKLEDGER_CUSTOMER"}, Usage: "only this customer"},
			formatFlag(),
		),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			meters, err := loadMeters(c)
			if err != nil {
				return err
			}
			db, err := openExisting(c)
			if err != nil {
				return err
			}
			defer db.Close()
			late, err := invoice.LateUsage(c.Context, db, c.String("customer"), meters)
			if err != nil {
				return err
			}
			if late == nil {
				late = []invoice.LateLine{}
			}
			rows := make([][]string, len(late))
			for i, l := range late {
				rows[i] = []string{l.Customer, l.Meter, l.Period, l.TZ, string(l.Aggregation), l.Quantity.String(), l.Unit,
					strconv.FormatInt(l.Rows, 10), strconv.FormatInt(l.Adjustments, 10), strconv.FormatInt(l.AfterID, 10), strconv.FormatInt(l.MaxID, 10)}
			}
			header := []string{"customer", "meter", "period", "tz", "aggregation", "quantity", "unit", "events", "adjustments", "after_id", "max_id"}
			return writeRecords(c.App.Writer, format, header, rows, late)
		},
	}
}

// flagError turns "from: ..." from the shared parser into "--from: ...".
func flagError(err error) error {
	return fmt.Errorf("--%w", err)
}
