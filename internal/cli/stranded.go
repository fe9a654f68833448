package cli

import (
	"strconv"

	"github.com/hookledger/hookledger/invoice"
	"github.com/urfave/cli/v2"
)

// usageStrandedCommand lists usage on no path to an invoice. It is a sibling
// of usage late rather than a state in its list: late usage is billed by
// the next invoice without anyone acting, stranded usage by nothing until
// an operator closes its month or corrects it.
func usageStrandedCommand() *cli.Command {
	return &cli.Command{
		Name:  "stranded",
		Usage: "usage dated before the first closed period: on no path to an invoice",
		Description: "Lists, per customer, meter and month, the usage (and adjustments) dated before the first period\n" +
			"closed for that customer (by a close for all customers or one of their own). Closes run forward,\n" +
			"so no scheduled close bills it, and it is not late usage: a clock at zero, a year typed wrong or a\n" +
			"backfill older than the first close. Close that month explicitly (invoice close --period) or correct\n" +
			"the rows with adjustments in the same month (a line corrected to a sum of zero is no longer listed).\n" +
			"SUM adds the rows' quantities as written, whatever the meter's aggregation. The metric\n" +
			"hookledger_usage_stranded_rows counts the rows.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "customer", EnvVars: []string{"HOOKLEDGER_CUSTOMER"}, Usage: "only this customer"},
			formatFlag(),
		),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			db, err := openExisting(c)
			if err != nil {
				return err
			}
			defer db.Close()
			lines, err := invoice.StrandedUsage(c.Context, db, c.String("customer"))
			if err != nil {
				return err
			}
			if lines == nil {
				lines = []invoice.StrandedLine{}
			}
			rows := make([][]string, len(lines))
			for i, l := range lines {
				rows[i] = []string{l.Customer, l.Meter, l.Month, l.TZ, l.Sum.String(), strconv.FormatInt(l.Rows, 10),
					strconv.FormatInt(l.Adjustments, 10), l.FirstClosed, strconv.FormatInt(l.MinID, 10), strconv.FormatInt(l.MaxID, 10)}
			}
			header := []string{"customer", "meter", "month", "tz", "sum", "events", "adjustments", "first_closed", "min_id", "max_id"}
			return writeRecords(c.App.Writer, format, header, rows, lines)
		},
	}
}
