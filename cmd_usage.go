package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

func usageCommand() *cli.Command {
	return &cli.Command{
		Name:  "usage",
		Usage: "total usage per customer and meter over an event-time window",
		Description: "The window is half-open on event time: --from <= occurred_at < --to. Times are RFC 3339\n" +
			"or a date (YYYY-MM-DD, midnight UTC); an omitted bound is open. Adjustments are included.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "from", Usage: "start of the window, inclusive"},
			&cli.StringFlag{Name: "to", Usage: "end of the window, exclusive"},
			&cli.StringFlag{Name: "customer", Usage: "only this customer"},
			&cli.StringFlag{Name: "meter", Usage: "only this meter"},
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, json or csv"},
		),
		Action: usage,
	}
}

func usage(c *cli.Context) error {
	format := c.String("format")
	if err := checkFormat(format); err != nil {
		return err
	}
	q := ledger.UsageQuery{Customer: c.String("customer"), Meter: c.String("meter")}
	var err error
	if q.From, err = parseTime("--from", c.String("from")); err != nil {
		return err
	}
	if q.To, err = parseTime("--to", c.String("to")); err != nil {
		return err
	}
	if !q.From.IsZero() && !q.To.IsZero() && !q.From.Before(q.To) {
		return fmt.Errorf("--from must be before --to")
	}
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	totals, err := ledger.Totals(c.Context, db.Read, q)
	if err != nil {
		return err
	}
	if totals == nil {
		totals = []ledger.UsageTotal{}
	}
	rows := make([][]string, len(totals))
	for i, t := range totals {
		rows[i] = []string{t.Customer, t.Meter, t.Quantity.String(), strconv.FormatInt(t.Events, 10)}
	}
	return writeRecords(c.App.Writer, format, []string{"customer", "meter", "quantity", "events"}, rows, totals)
}

// openExisting opens the configured database for reading; it refuses to create one.
func openExisting(c *cli.Context) (*schema.DB, error) {
	dir, err := dataDir(c)
	if err != nil {
		return nil, err
	}
	return schema.Open(c.Context, schema.Path(dir), schema.Options{ReadOnly: true})
}

func parseTime(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%s: %q is neither RFC 3339 (2026-11-01T00:00:00Z) nor a date (2026-11-01)", flag, s)
}
