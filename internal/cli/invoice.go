package cli

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/stripe"
)

func invoiceCommand() *cli.Command {
	return &cli.Command{
		Name:  "invoice",
		Usage: "close, list and show invoices frozen from the ledger",
		Description: "An invoice is one customer's usage for one period, frozen when the period is closed: per meter\n" +
			"the quantity, the row count, the highest ledger id covered and a SHA-256 digest of the covered rows.\n" +
			"Usage recorded for a closed period afterwards is late (see `usage late`) and is billed by the\n" +
			"customer's next invoice for a period starting at or after that period's end, as lines that name\n" +
			"the period it belongs to. Closing an earlier month (a backfill) never bills a later month's late\n" +
			"usage: it waits for the next invoice of a later month.",
		Subcommands: []*cli.Command{
			{
				Name:  "close",
				Usage: "close a month: freeze its invoices (closing again returns the same invoices)",
				Flags: append(configFlags(),
					&cli.StringFlag{Name: "period", Required: true, EnvVars: []string{"HOOKLEDGER_PERIOD"}, Usage: "the month to close, YYYY-MM"},
					tzFlag("IANA time zone whose month is closed, e.g. Europe/Berlin"),
					&cli.StringFlag{Name: "customer", EnvVars: []string{"HOOKLEDGER_CUSTOMER"}, Usage: "close for this customer only"},
					&cli.BoolFlag{Name: "all", EnvVars: []string{"HOOKLEDGER_ALL"}, Usage: "close for every customer"},
					&cli.DurationFlag{Name: "grace", Value: time.Hour, EnvVars: []string{"HOOKLEDGER_GRACE"},
						Usage: "refuse to close until this long after the period's end, so in-flight deliveries land"},
					&cli.BoolFlag{Name: "dry-run", EnvVars: []string{"HOOKLEDGER_DRY_RUN"}, Usage: "compute and show the invoices, store nothing"},
					formatFlag(),
				),
				Action: invoiceClose,
			},
			{
				Name:      "preview",
				Usage:     "show what a customer's invoice would be if its period closed now (stores nothing)",
				ArgsUsage: "CUSTOMER",
				Description: "The draft invoice, from the same code as close: the period's usage so far, priced with the\n" +
					"customer's plan, with the late usage the next close would bill. The period defaults to the\n" +
					"current month in --tz.",
				Flags: append(configFlags(),
					&cli.StringFlag{Name: "period", EnvVars: []string{"HOOKLEDGER_PERIOD"}, Usage: "the month, YYYY-MM", DefaultText: "the current month"},
					tzFlag("IANA time zone whose month is previewed, e.g. Europe/Berlin"),
					formatFlag(),
				),
				Action: invoicePreview,
			},
			{
				Name:  "list",
				Usage: "list closed invoices (with their state in Stripe when billing sync pushed them in close mode)",
				Description: "The stripe column (shown when an invoice has one) is pushed, invoiced, paid or payment_failed:\n" +
					"Stripe's latest invoice event for it by Stripe's time (docs/stripe.md). Every Stripe invoice event that\n" +
					"bills no invoice of this ledger, of any period, is named on stderr (without --customer).",
				Flags: append(configFlags(),
					&cli.StringFlag{Name: "customer", EnvVars: []string{"HOOKLEDGER_CUSTOMER"}, Usage: "only this customer"},
					&cli.StringFlag{Name: "period", EnvVars: []string{"HOOKLEDGER_PERIOD"}, Usage: "only this period, YYYY-MM"},
					formatFlag(),
				),
				Action: invoiceList,
			},
			{
				Name:      "show",
				Usage:     "show one invoice and its lines (and its state in Stripe, with every Stripe invoice event that billed it)",
				ArgsUsage: "ID",
				Flags:     append(configFlags(), formatFlag()),
				Action:    invoiceShow,
			},
		},
	}
}

func invoiceClose(c *cli.Context) error {
	format := c.String("format")
	switch all, one := c.Bool("all"), c.String("customer") != ""; {
	case all && one:
		return usageErrorf(c, "give --customer C or --all, not both")
	case !all && !one:
		return usageErrorf(c, "--customer C or --all is required")
	}
	if c.Duration("grace") < 0 {
		return errors.New("--grace: must not be negative")
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return err
	}
	period, err := ledger.MonthPeriod(c.String("period"), loc)
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	pr, registered, err := invoice.LoadPricing(c.Context, db, cfg.Catalog, cfg.Customers.DefaultPlan)
	if err != nil {
		return err
	}
	res, err := invoice.Close(c.Context, db, invoice.CloseRequest{
		Period: period, Customer: c.String("customer"), All: c.Bool("all"), Grace: c.Duration("grace"),
		Meters: ledger.NewMeters(cfg.Meters), DryRun: c.Bool("dry-run"), Pricing: pr, Registered: registered,
		OnClose: stripe.NewSync(cfg).OnClose(nil), // close-mode meters push their lines (docs/stripe.md)
	})
	if err != nil {
		return err
	}
	warnUnpriced(c, res)
	if format == "json" {
		return writeRecords(c.App.Writer, format, nil, nil, res)
	}
	if format == "table" {
		scope := "all customers"
		if !c.Bool("all") {
			scope = "customer " + c.String("customer")
		}
		what := "closed"
		switch {
		case res.Existing:
			what = "already closed"
		case c.Bool("dry-run"):
			what = "dry run (nothing stored):"
		}
		fmt.Fprintf(c.App.Writer, "%s %s for %s: cutoff %s, ledger head %d, %d invoice(s)\n\n", what, period, scope,
			time.UnixMilli(res.Cutoff).UTC().Format(time.RFC3339Nano), res.Head, len(res.Invoices))
	}
	if err := writeLines(c.App.Writer, format, res.Invoices); err != nil {
		return err
	}
	if len(res.Excluded) > 0 {
		return problem(fmt.Errorf("%d customer(s) not invoiced (the reasons are above): every other invoice was made", len(res.Excluded)))
	}
	return nil
}

func invoicePreview(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the CUSTOMER")
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return err
	}
	label := c.String("period")
	if label == "" {
		label = time.Now().In(loc).Format("2006-01")
	}
	period, err := ledger.MonthPeriod(label, loc)
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	db, err := openExisting(c) // the preview reads one snapshot: it writes nothing and takes no write lock
	if err != nil {
		return err
	}
	defer db.Close()
	pr, _, err := invoice.LoadPricing(c.Context, db, cfg.Catalog, cfg.Customers.DefaultPlan)
	if err != nil {
		return err
	}
	res, err := invoice.Preview(c.Context, db, invoice.CloseRequest{Period: period, Customer: args[0], Meters: ledger.NewMeters(cfg.Meters),
		Pricing: pr})
	if err != nil {
		return err
	}
	warnUnpriced(c, res)
	format := c.String("format")
	if format == "json" {
		return writeRecords(c.App.Writer, format, nil, nil, res)
	}
	if format == "table" {
		state := "open: usage may still arrive"
		if res.Existing {
			state = "already closed: this is the closed invoice"
		} else if time.Now().After(period.End) {
			state = "ended, not yet closed"
		}
		fmt.Fprintf(c.App.Writer, "preview of %s for customer %s (%s), as of %s: %d invoice(s)\n\n", period, args[0], state,
			time.UnixMilli(res.Cutoff).UTC().Format(time.RFC3339), len(res.Invoices))
	}
	return writeLines(c.App.Writer, format, res.Invoices)
}

func invoiceList(c *cli.Context) error {
	format := c.String("format")
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	invs, err := invoice.ListInvoices(c.Context, db, invoice.InvoiceFilter{Customer: c.String("customer"), Period: c.String("period")})
	if err != nil {
		return err
	}
	if invs == nil {
		invs = []invoice.Invoice{}
	}
	if err := stripe.WithStates(c.Context, db, invs); err != nil {
		return err
	}
	header := []string{"id", "customer", "period", "tz", "cutoff", "ledger_head", "lines", "late_lines", "digest"}
	// Total and currency only when a plan priced some invoice: a ledger
	// without plans lists as it always has.
	priced := slices.ContainsFunc(invs, func(inv invoice.Invoice) bool { return inv.Money.Currency != "" })
	if priced {
		header = slices.Insert(header, 8, "total", "currency")
	}
	// Credits and the amount due only when a grant paid some invoice.
	credited := slices.ContainsFunc(invs, func(inv invoice.Invoice) bool { return inv.Money.Credits != "" })
	if credited {
		header = slices.Insert(header, 10, "credits", "amount_due")
	}
	// The Stripe state only when billing sync pushed some invoice (close
	// mode) or Stripe billed one.
	synced := slices.ContainsFunc(invs, func(inv invoice.Invoice) bool { return inv.Stripe != nil })
	if synced {
		header = append(header, "stripe")
	}
	rows := make([][]string, len(invs))
	for i, inv := range invs {
		late := 0
		for _, l := range inv.Lines {
			if l.Late {
				late++
			}
		}
		rows[i] = []string{strconv.FormatInt(inv.ID, 10), inv.Customer, inv.Period, inv.TZ,
			time.UnixMilli(inv.Cutoff).UTC().Format(time.RFC3339Nano), strconv.FormatInt(inv.LedgerHead, 10),
			strconv.Itoa(len(inv.Lines)), strconv.Itoa(late), hex.EncodeToString(inv.Digest)}
		if priced {
			rows[i] = slices.Insert(rows[i], 8, orDash(inv.Money.Total), orDash(inv.Money.Currency))
		}
		if credited {
			due := inv.Money.AmountDue
			if due == "" {
				due = inv.Money.Total
			}
			rows[i] = slices.Insert(rows[i], 10, orDash(inv.Money.Credits), orDash(due))
		}
		if synced {
			state := "-"
			if inv.Stripe != nil {
				state = inv.Stripe.State
			}
			rows[i] = append(rows[i], state)
		}
	}
	if err := writeRecords(c.App.Writer, format, header, rows, invs); err != nil {
		return err
	}
	if c.String("customer") != "" {
		return nil
	}
	// Stripe's invoice events that bill none of these invoices are kept
	// and named, never dropped: a customer mapped to none of ours, or a
	// period no close pushed.
	unlinked, err := db.UnlinkedStripeInvoiceStates(c.Context)
	if err != nil {
		return err
	}
	for _, e := range unlinked {
		fmt.Fprintf(c.App.ErrWriter, "Stripe %s (no invoice of ours billed): %s\n", e.EventType, stripe.InvoiceEventText(e))
	}
	return nil
}

func invoiceShow(c *cli.Context) error {
	format := c.String("format")
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "give one invoice ID (see `hookledger invoice list`)")
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return usageErrorf(c, "%q is not an invoice ID (a positive number)", args[0])
	}
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	inv, err := invoice.GetInvoice(c.Context, db, id)
	if err != nil {
		return err
	}
	one := []invoice.Invoice{*inv}
	if err := stripe.WithStates(c.Context, db, one); err != nil {
		return err
	}
	inv = &one[0]
	if format == "json" {
		return writeRecords(c.App.Writer, format, nil, nil, inv)
	}
	if format == "table" {
		writeInvoiceHeader(c.App.Writer, inv)
	}
	header, rows := lineRecords([]invoice.Invoice{*inv})
	if err := writeRecords(c.App.Writer, format, header, rows, nil); err != nil {
		return err
	}
	if format == "table" {
		writeBreakdowns(c.App.Writer, inv)
		writeStripeState(c.App.Writer, inv)
	}
	return nil
}

// writeStripeState prints the invoice's state in Stripe and every Stripe
// invoice event that billed it, in Stripe's order.
func writeStripeState(w io.Writer, inv *invoice.Invoice) {
	if inv.Stripe == nil {
		return
	}
	fmt.Fprintf(w, "\nstripe: %s\n", inv.Stripe.State)
	for _, e := range inv.Stripe.Events {
		fmt.Fprintf(w, "  %s %s\n", time.Unix(e.EventCreated, 0).UTC().Format(time.RFC3339), stripe.InvoiceEventText(e))
	}
}

// writeBreakdowns prints how each priced line's amount was reached: its
// exact amount and the price's breakdown, tier by tier (a late line's from
// the total billed before it).
func writeBreakdowns(w io.Writer, inv *invoice.Invoice) {
	bd := invoice.Breakdowns(inv)
	if len(bd) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, l := range inv.Lines {
		if b, ok := bd[l.LineNo]; ok {
			meter := l.Meter
			if l.Dimensions != "" {
				meter += " " + invoice.DimensionLabel(l.Dimensions)
			}
			fmt.Fprintf(w, "line %d (%s %s): %s exactly: %s\n", l.LineNo, meter, l.Period, l.Money.AmountPrecise, b)
		}
	}
}

func writeInvoiceHeader(w io.Writer, inv *invoice.Invoice) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	start, end := ledgerTime(inv.PeriodStart, inv.TZ), ledgerTime(inv.PeriodEnd, inv.TZ)
	fmt.Fprintf(tw, "invoice\t%d\n", inv.ID)
	fmt.Fprintf(tw, "customer\t%s\n", inv.Customer)
	fmt.Fprintf(tw, "period\t%s (%s): %s <= event time < %s\n", inv.Period, inv.TZ, start, end)
	fmt.Fprintf(tw, "cutoff\trecorded before %s (ledger ids <= %d)\n", time.UnixMilli(inv.Cutoff).UTC().Format(time.RFC3339Nano), inv.LedgerHead)
	fmt.Fprintf(tw, "closed\t%s\n", time.UnixMilli(inv.ClosedAt).UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "digest\t%s\n", hex.EncodeToString(inv.Digest))
	if m := inv.Money; m.Currency != "" {
		fmt.Fprintf(tw, "plan\t%s (prices sha256 %s)\n", m.Plan, hex.EncodeToString(m.PriceDigest))
		if m.Fee == "" {
			fmt.Fprintf(tw, "fee\tnone: late usage only, in the currency that priced its period\n")
		} else {
			fmt.Fprintf(tw, "fee\t%s %s\n", m.Fee, m.Currency)
			fmt.Fprintf(tw, "true-up\t%s %s\n", m.TrueUp, m.Currency)
		}
		for _, pt := range inv.Parts {
			fmt.Fprintf(tw, "part\t%s: %s, fee %s, true-up %s %s\n", invoice.PartDays(pt, inv.TZ), pt.Version, pt.Fee, pt.TrueUp, m.Currency)
		}
		fmt.Fprintf(tw, "total\t%s %s\n", m.Total, m.Currency)
		if m.Credits != "" {
			fmt.Fprintf(tw, "credits\t%s %s (%s)\n", m.Credits, m.Currency, creditsText(inv.Credits))
			fmt.Fprintf(tw, "amount due\t%s %s\n", m.AmountDue, m.Currency)
		}
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func ledgerTime(ms int64, tz string) string {
	loc, err := ledger.LoadZone(tz)
	if err != nil {
		loc = time.UTC
	}
	return time.UnixMilli(ms).In(loc).Format(time.RFC3339)
}

// lineRecords flattens invoices to one record per line (late lines name
// the period their usage belongs to).
func lineRecords(invs []invoice.Invoice) ([]string, [][]string) {
	header := []string{"invoice", "customer", "line", "meter", "period", "late", "aggregation", "quantity", "unit",
		"rows", "adjustments", "max_id", "digest"}
	// Money columns only when a plan priced something: invoices without
	// plans print as they always have.
	priced := slices.ContainsFunc(invs, func(inv invoice.Invoice) bool { return inv.Money.Currency != "" })
	if priced {
		header = slices.Insert(header, 9, "amount", "currency", "plan_version")
	}
	// A dimension column only when a price by dimension split a meter into
	// a line per value (model=gpt-4o).
	dimensional := slices.ContainsFunc(invs, func(inv invoice.Invoice) bool {
		return slices.ContainsFunc(inv.Lines, func(l invoice.InvoiceLine) bool { return l.Dimensions != "" })
	})
	if dimensional {
		header = slices.Insert(header, 4, "dimension")
	}
	// A part column only when a period was split at a plan change: the
	// days of its part ("11-16 to 12-01"), "-" for a line of a whole period.
	split := slices.ContainsFunc(invs, func(inv invoice.Invoice) bool { return inv.Parts != nil })
	if split {
		header = slices.Insert(header, 5, "part")
	}
	var rows [][]string
	for _, inv := range invs {
		for _, l := range inv.Lines {
			late := "no"
			if l.Late {
				late = "yes"
			}
			row := []string{strconv.FormatInt(inv.ID, 10), inv.Customer, strconv.FormatInt(l.LineNo, 10), l.Meter,
				l.Period, late, string(l.Aggregation), l.Quantity.String(), l.Unit, strconv.FormatInt(l.Rows, 10),
				strconv.FormatInt(l.Adjustments, 10), strconv.FormatInt(l.MaxID, 10), hex.EncodeToString(l.Digest)}
			if priced {
				row = slices.Insert(row, 9, orDash(l.Money.Amount), orDash(inv.Money.Currency), orDash(l.Money.PlanVersion))
			}
			if dimensional {
				row = slices.Insert(row, 4, orDash(invoice.DimensionLabel(l.Dimensions)))
			}
			if split {
				row = slices.Insert(row, 5, orDash(invoice.PartLabel(l)))
			}
			rows = append(rows, row)
		}
	}
	return header, rows
}

// writeLines prints invoices' lines as records and, in a table, each priced
// invoice's fee, true-up and total under them.
func writeLines(w io.Writer, format string, invs []invoice.Invoice) error {
	header, rows := lineRecords(invs)
	if err := writeRecords(w, format, header, rows, nil); err != nil {
		return err
	}
	if format == "table" {
		writeMoney(w, invs)
	}
	return nil
}

// writeMoney prints each priced invoice's fee, true-up and total.
func writeMoney(w io.Writer, invs []invoice.Invoice) {
	for _, inv := range invs {
		if m := inv.Money; m.Currency != "" {
			if m.Fee == "" {
				fmt.Fprintf(w, "invoice %d (%s, plan %s): late usage only, total %s %s", inv.ID, inv.Customer, m.Plan, m.Total, m.Currency)
			} else {
				fmt.Fprintf(w, "invoice %d (%s, plan %s): fee %s, true-up %s, total %s %s", inv.ID, inv.Customer, m.Plan, m.Fee, m.TrueUp, m.Total, m.Currency)
			}
			if m.Credits != "" {
				fmt.Fprintf(w, ", credits %s (%s), amount due %s %s", m.Credits, creditsText(inv.Credits), m.AmountDue, m.Currency)
			}
			fmt.Fprintln(w)
			for _, pt := range inv.Parts {
				fmt.Fprintf(w, "  part %s: %s, fee %s, true-up %s %s\n", invoice.PartDays(pt, inv.TZ), pt.Version, pt.Fee, pt.TrueUp, m.Currency)
			}
		}
	}
}

// warnUnpriced says on stderr what usage of the invoices no price bills
// (invoice.Unpriced) and which customers a close for all could not invoice
// (invoice.Excluded); JSON carries them as "unpriced" and "excluded" too.
func warnUnpriced(c *cli.Context, res *invoice.CloseResult) {
	for _, u := range res.Unpriced {
		fmt.Fprintf(c.App.ErrWriter, "warning: %s\n", u)
	}
	for _, x := range res.Excluded {
		fmt.Fprintf(c.App.ErrWriter, "error: %s\n", x)
	}
}

// creditsText names what each grant gave: "grant topup 480.00, promo 20.00".
func creditsText(cs []invoice.InvoiceCredit) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = "grant " + c.Grant + " " + c.Amount
	}
	return strings.Join(parts, ", ")
}
