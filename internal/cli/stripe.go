package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

func stripeCommand() *cli.Command {
	return &cli.Command{
		Name:  "stripe",
		Usage: "billing sync to Stripe: compare the ledger with what was pushed and acknowledged, retry dead pushes",
		Description: "Meters with stripe: settings are pushed to Stripe as meter events through the outbox (docs/stripe.md):\n" +
			"stream meters with every ledger row, close meters with every invoice line. The pushes are an outbox\n" +
			"destination named stripe: forward status, list, attempts, pause and resume work on it too.",
		Subcommands: []*cli.Command{stripeStatusCommand(), stripeInvoicesCommand(), stripeRetryCommand()},
	}
}

func stripeStatusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "per customer and meter: the ledger's total, pushed, acknowledged, pending and dead (exit 3 when they differ)",
		Description: "LEDGER is the period's ledger total in Stripe's units (× multiplier, rounded once); PUSHED the whole\n" +
			"numbers sent to Stripe for it (a push dead before any request is not), ACKED those Stripe acknowledged;\n" +
			"CARRIED what of them Stripe counts in a later period: a push whose own time was outside Stripe's\n" +
			"window (more than 35 days old: a credit to a closed month, late usage) is sent stamped when it is\n" +
			"sent, and counts in Stripe's period of that day (--format json also has carried_in, what earlier\n" +
			"periods carried into this one). REPORTED the pushes Stripe reported errors\n" +
			"for after taking them (its v1.billing.meter.error_report_triggered and no_meter_found events, received\n" +
			"by a provider with the stripe scheme). A line agrees when ACKED is LEDGER and nothing is pending, dead\n" +
			"or reported; any other line differs, and the command exits 3, as it does when a report of the period\n" +
			"names no push of this ledger (listed on stderr). With --remote, STRIPE is what Stripe's event\n" +
			"summaries say for the period, compared too. A close meter's period is open until its invoice is closed.\n" +
			"With stripe.invoices, the table is followed by the period's invoices sent to Stripe (stripe invoices),\n" +
			"and an invoice that differs exits 3 too; --format json and csv hold the meters' lines only (the\n" +
			"invoices' are stripe invoices --format json).",
		Flags: append(configFlags(),
			closingPeriodFlag(),
			&cli.StringFlag{Name: "customer", Usage: "only this customer"},
			&cli.BoolFlag{Name: "remote", Usage: "also read Stripe's event summaries (GET /v1/billing/meters/{id}/event_summaries)"},
			formatFlag()),
		Action: stripeStatus,
	}
}

// stripeStatus is stripe status: the meters' lines, then the invoices'
// (stripe.invoices), exit 3 when anything differs.
func stripeStatus(c *cli.Context) error {
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	if cfg.Stripe == nil {
		return errors.New("no stripe: in the config: nothing is pushed to Stripe")
	}
	var remote *stripe.Client
	if c.Bool("remote") {
		if cfg.Stripe.APIKey.Value == "" {
			return errors.New("--remote needs stripe.api_key")
		}
		remote = &stripe.Client{Base: cfg.Stripe.APIBase, Key: cfg.Stripe.APIKey.Value, HTTP: forward.DefaultClient()}
	}
	db, period, err := openPeriod(c, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	lines, err := stripe.Status(c.Context, db, cfg.Meters, period, c.String("customer"), remote)
	if err != nil {
		return err
	}
	// Invoices alone (no meter pushed): their table only.
	metersPushed := len(cfg.StripeMeters()) > 0
	if metersPushed || c.String("format") != "table" {
		if err := writeStatusLines(c, lines, remote != nil); err != nil {
			return err
		}
	}
	if len(lines) == 0 && metersPushed && c.String("format") == "table" {
		// An empty table names no month: say which one is empty.
		fmt.Fprintf(c.App.ErrWriter, "nothing pushed or to push for %s (--period YYYY-MM for another month)\n", period.Label)
	}
	unlinked, err := stripe.Unlinked(c.Context, db, period)
	if err != nil {
		return err
	}
	for _, r := range unlinked {
		fmt.Fprintf(c.App.ErrWriter, "Stripe reported (no push of ours named): %s\n", stripe.ReportText(r))
	}
	invoicesDiffer := false
	if cfg.Stripe.InvoicesOn() {
		invs, err := stripe.InvoiceStatus(c.Context, db, period, c.String("customer"))
		if err != nil {
			return err
		}
		if c.String("format") == "table" && len(invs) > 0 {
			if metersPushed {
				fmt.Fprintln(c.App.Writer)
			}
			if err := writeInvoiceLines(c, invs); err != nil {
				return err
			}
		}
		invoicesDiffer = stripe.InvoicesDiffer(invs)
	}
	if stripe.Differs(lines) || len(unlinked) > 0 {
		explainStatus(c, lines)
		return problem(errors.New("the ledger and Stripe differ (pending, dead or reported pushes: hookledger forward list --destination stripe)"))
	}
	if invoicesDiffer {
		return problem(errors.New("an invoice in Stripe differs from hookledger's (pending, dead, or another amount due: hookledger stripe invoices)"))
	}
	return nil
}

// writeStatusLines writes the meters' status lines as --format asks.
func writeStatusLines(c *cli.Context, lines []stripe.StatusLine, remote bool) error {
	header := []string{"customer", "meter", "period", "mode", "ledger", "pushed", "acked", "pending", "dead", "carried", "reported"}
	if remote {
		header = append(header, "stripe")
	}
	header = append(header, "state")
	rows := make([][]string, 0, len(lines))
	for _, l := range lines {
		row := []string{l.Customer, l.Meter, l.Period, l.Mode, l.Ledger, l.Pushed, l.Acknowledged, fmt.Sprint(l.Pending), fmt.Sprint(l.Dead), l.Carried, fmt.Sprint(l.Reported)}
		if remote {
			row = append(row, l.Remote)
		}
		rows = append(rows, append(row, l.State))
	}
	return writeRecords(c.App.Writer, c.String("format"), header, rows, lines)
}

// explainStatus says on stderr why the lines that differ do.
func explainStatus(c *cli.Context, lines []stripe.StatusLine) {
	for _, l := range lines {
		if l.State == stripe.StateDiffers && l.LastError != "" {
			fmt.Fprintf(c.App.ErrWriter, "%s %s: %d dead, last: %s\n", l.Customer, l.Meter, l.Dead, l.LastError)
		}
		if l.Reported > 0 {
			fmt.Fprintf(c.App.ErrWriter, "%s %s: Stripe reported errors for %d pushes, last: %s\n", l.Customer, l.Meter, l.Reported, l.ReportError)
		}
	}
}

// closingPeriodFlag is --period of the views about a month's closing.
func closingPeriodFlag() cli.Flag {
	return &cli.StringFlag{Name: "period", Usage: "the month, YYYY-MM in invoicing.tz (default: the last month while it holds usage and is not closed for all customers, else this month)"}
}

// openPeriod opens the database read-only and reads --period, a month in
// invoicing.tz, or without one the month that just ended until it is
// closed (saying so on stderr), else this month: the rule of every view
// about closing (invoice.ClosingMonth; the console's too).
func openPeriod(c *cli.Context, cfg *config.Config) (*schema.DB, ledger.Period, error) {
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return nil, ledger.Period{}, err
	}
	var period ledger.Period
	if month := c.String("period"); month != "" {
		if period, err = ledger.MonthPeriod(month, loc); err != nil {
			return nil, period, usageErrorf(c, "--period: %v", err)
		}
	}
	db, err := openDB(c.Context, cfg.DBPath(), schema.Options{ReadOnly: true, MustExist: true})
	if err != nil || period.Label != "" {
		return db, period, err
	}
	period, previous, err := invoice.ClosingMonth(c.Context, db, time.Now(), loc)
	if err != nil {
		db.Close()
		return nil, period, err
	}
	if previous {
		fmt.Fprintf(c.App.ErrWriter, "%s, the last month, until it is closed (--period %s for this month)\n",
			period.Label, period.End.Format("2006-01"))
	}
	return db, period, nil
}

func stripeInvoicesCommand() *cli.Command {
	return &cli.Command{
		Name:  "invoices",
		Usage: "per invoice sent to Stripe: hookledger's total beside Stripe's amount due (exit 3 when they differ)",
		Description: "With stripe.invoices, every closed invoice with money to charge is sent to Stripe as an invoice\n" +
			"(docs/stripe.md). TOTAL is hookledger's, TOTAL_MINOR the same in the currency's minor units, SENT the\n" +
			"push's state (pending, delivered, dead), STRIPE_INVOICE, NUMBER, STRIPE_STATUS and AMOUNT_DUE what\n" +
			"Stripe answered once the invoice was complete. An invoice agrees when it was delivered and Stripe's\n" +
			"amount_due is TOTAL_MINOR; any other differs, and the command exits 3.",
		Flags: append(configFlags(),
			closingPeriodFlag(),
			&cli.StringFlag{Name: "customer", Usage: "only this customer"},
			formatFlag()),
		Action: func(c *cli.Context) error {
			cfg, err := commandConfig(c)
			if err != nil {
				return err
			}
			if !cfg.Stripe.InvoicesOn() {
				return errors.New("stripe.invoices is not enabled in the config: no invoice is sent to Stripe")
			}
			db, period, err := openPeriod(c, cfg)
			if err != nil {
				return err
			}
			defer db.Close()
			lines, err := stripe.InvoiceStatus(c.Context, db, period, c.String("customer"))
			if err != nil {
				return err
			}
			if err := writeInvoiceLines(c, lines); err != nil {
				return err
			}
			if len(lines) == 0 && c.String("format") == "table" {
				fmt.Fprintf(c.App.ErrWriter, "no invoice of %s was sent to Stripe (--period YYYY-MM for another month)\n", period.Label)
			}
			if stripe.InvoicesDiffer(lines) {
				for _, l := range lines {
					if l.LastError != "" && l.Sent != schema.OutboxDelivered {
						fmt.Fprintf(c.App.ErrWriter, "invoice %d (%s): %s, last: %s\n", l.Invoice, l.Customer, l.Sent, l.LastError)
					}
				}
				return problem(errors.New("an invoice in Stripe differs from hookledger's (pending, dead, or another amount due)"))
			}
			return nil
		},
	}
}

// writeInvoiceLines writes the invoices sent to Stripe as the command's
// format asks.
func writeInvoiceLines(c *cli.Context, lines []stripe.InvoiceLine) error {
	header := []string{"invoice", "customer", "period", "currency", "total", "total_minor", "sent", "stripe_invoice", "number",
		"stripe_status", "amount_due", "state"}
	rows := make([][]string, 0, len(lines))
	for _, l := range lines {
		rows = append(rows, []string{fmt.Sprint(l.Invoice), l.Customer, l.Period, l.Currency, l.Total, l.TotalMinor, l.Sent,
			dash(l.Stripe.StripeInvoice), dash(l.Stripe.Number), dash(l.Stripe.Status), dash(l.Stripe.AmountDue), l.State})
	}
	return writeRecords(c.App.Writer, c.String("format"), header, rows, lines)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func stripeRetryCommand() *cli.Command {
	return &cli.Command{
		Name:  "retry",
		Usage: "push dead pushes and invoices again, under the same identifiers",
		Description: "Every dead push and invoice (--since: only those pending since that long ago or that RFC 3339 time) is\n" +
			"due at once, with a fresh max_attempts and max_age. Its identifier stays, so Stripe counts it once; one\n" +
			"whose time Stripe's 35 days have passed meanwhile is carried: stamped when it is sent (stripe status). An\n" +
			"invoice finds the Stripe invoice an earlier attempt made, by its metadata, and completes it.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "since", Usage: "only pushes pending since this long ago (e.g. 24h, 7d) or this RFC 3339 time"},
			formatFlag()),
		Action: func(c *cli.Context) error {
			cfg, err := commandConfig(c)
			if err != nil {
				return err
			}
			var more []string
			if cfg.Stripe.InvoicesOn() {
				more = append(more, config.StripeInvoicesDestination)
			}
			return retryMessages(c, schema.OutboxRetry{Destination: config.StripeDestination}, more...)
		},
	}
}
