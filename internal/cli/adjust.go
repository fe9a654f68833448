package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

func adjustCommand() *cli.Command {
	return &cli.Command{
		Name:  "adjust",
		Usage: "correct the ledger: append a signed-quantity adjustment row with a reason",
		Description: "The ledger is append-only: a correction is a new row of kind adjustment that joins the hash\n" +
			"chain; the rows it corrects stay. Period totals add adjustments to the meter's aggregate. With\n" +
			"--ref the adjustment takes the referenced row's event time (or the invoice's period start), so it\n" +
			"lands in the period it corrects; if that period is closed it is late usage and the next invoice\n" +
			"of a later period bills it naming that period.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "customer", EnvVars: []string{"HOOKLEDGER_CUSTOMER"}, Usage: "customer id (required)"},
			&cli.StringFlag{Name: "meter", EnvVars: []string{"HOOKLEDGER_METER"}, Usage: "meter name (required)"},
			&cli.StringFlag{Name: "quantity", EnvVars: []string{"HOOKLEDGER_QUANTITY"},
				Usage: "signed exact decimal (up to 6 places; its digits, decimal point aside, at most 9223372036854775807), e.g. -5 or 2.5 (required)"},
			&cli.StringFlag{Name: "reason", EnvVars: []string{"HOOKLEDGER_REASON"}, Usage: "why the ledger is corrected (required)"},
			&cli.StringFlag{Name: "ref", EnvVars: []string{"HOOKLEDGER_REF"},
				Usage: "what is corrected: event:PROVIDER/EVENT_ID, row:ID (ledger row) or invoice:ID"},
			&cli.StringFlag{Name: "occurred-at", EnvVars: []string{"HOOKLEDGER_OCCURRED_AT"},
				Usage: "event time of the adjustment (default: the ref's event time or period start, else now)"},
			tzFlag("IANA time zone for a date or local time in --occurred-at, e.g. Europe/Berlin"),
			formatFlag(),
		),
		Action: adjust,
	}
}

func adjust(c *cli.Context) error {
	format := c.String("format")
	// Not Required flags: each missing one is a usage error that says what
	// to pass, where strictArgs could only name it.
	switch {
	case c.String("customer") == "":
		return usageErrorf(c, "--customer is required: the customer whose usage is corrected")
	case c.String("meter") == "":
		return usageErrorf(c, "--meter is required: the meter whose usage is corrected")
	case c.String("quantity") == "":
		return usageErrorf(c, "--quantity is required: a signed decimal, e.g. -5")
	case strings.TrimSpace(c.String("reason")) == "":
		return usageErrorf(c, "--reason is required: say why the ledger is corrected")
	}
	qty, err := ledger.ParseRowQuantity(c.String("quantity"))
	if err != nil {
		return fmt.Errorf("--quantity: %w", err)
	}
	a := ledger.Adjustment{Customer: c.String("customer"), Meter: c.String("meter"), Quantity: qty,
		Reason: c.String("reason"), Ref: c.String("ref")}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	if s := c.String("occurred-at"); s != "" {
		loc, err := zoneOf(c, cfg)
		if err != nil {
			return err
		}
		if a.OccurredAt, err = ledger.ParseTime(s, loc); err != nil {
			return fmt.Errorf("--occurred-at: %w", err)
		}
	}
	meters := ledger.NewMeters(cfg.Meters)
	if err := a.Validate(meters); err != nil {
		return err
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	// Its writer prices spend with the plans: a configuration serve would
	// refuse (an edited version that priced a closed invoice) is refused.
	if err := invoice.CheckFrozenPrices(c.Context, db, cfg.Catalog); err != nil {
		return err
	}
	// Through a writer of our own, so the row joins the hash chain exactly as
	// webhook rows do, serialized with a running server by SQLite's lock.
	// An adjustment is usage too: one that crosses a threshold raises its
	// alert, routed to the destinations, and a stream meter's is pushed to
	// Stripe, in the adjustment's transaction.
	w := writer.New(db, cfg)
	if err := w.Open(c.Context); err != nil {
		return err
	}
	var row *ledger.Row
	err = w.Submit(c.Context, custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
		r, err := a.Row(ctx, tx.Refs(), tx.Now())
		if err != nil {
			return err
		}
		if err := tx.Append(ctx, r); err != nil {
			return err
		}
		row = r
		return nil
	}))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if row == nil {
		return errors.New("adjust: no row was written")
	}
	noteStripe(c, cfg, []*ledger.Row{row})
	header := []string{"id", "kind", "customer", "meter", "quantity", "reason", "ref", "occurred_at", "recorded_at", "event_id"}
	rec := []string{strconv.FormatInt(row.ID, 10), row.Kind, row.Customer, row.Meter, row.Quantity.String(), row.Reason, row.Ref,
		time.UnixMilli(row.OccurredAt).UTC().Format(time.RFC3339Nano), time.UnixMilli(row.RecordedAt).UTC().Format(time.RFC3339Nano), row.EventID}
	return writeRecords(c.App.Writer, format, header, [][]string{rec}, row)
}
