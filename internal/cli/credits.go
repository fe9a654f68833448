package cli

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
)

func creditsCommand() *cli.Command {
	return &cli.Command{
		Name:  "credits",
		Usage: "prepaid credits: grant, list, show and void; closes apply them to invoices",
		Description: "A grant is money a customer may spend in one currency, from --effective until --expires.\n" +
			"Closing an invoice applies the customer's grants to its total: lower --priority first, then the\n" +
			"earliest expiry, then the oldest; what each grant gave is frozen on the invoice, which shows the\n" +
			"total, the credits applied and the amount due. Every grant, burn, void and expiry is a row of the\n" +
			"credit ledger, hash-chained and checked by verify. See docs/invoicing.md, \"Credits\".",
		Subcommands: []*cli.Command{
			{
				Name:      "grant",
				Usage:     "grant a customer credit (idempotent on --id)",
				ArgsUsage: "CUSTOMER AMOUNT",
				Description: "AMOUNT is in --currency, in whole minor units (100.00 USD, 5000 JPY). A repeat with the same\n" +
					"--id and the same grant is a duplicate and writes nothing; the same --id with another grant is\n" +
					"refused. Without --id each run is a new grant.",
				Flags: append(configFlags(), tzFlag("the zone a DATE of --effective or --expires is read in"),
					&cli.StringFlag{Name: "currency", Usage: "ISO 4217 code, e.g. USD", Required: true},
					&cli.StringFlag{Name: "category", Value: "paid", Usage: "paid or promotional"},
					&cli.Int64Flag{Name: "priority", Value: invoice.DefaultCreditPriority, Usage: "lower pays first (0 to 1000)"},
					&cli.StringFlag{Name: "effective", Usage: "when it takes effect: YYYY-MM-DD (midnight) or RFC 3339", DefaultText: "now"},
					&cli.StringFlag{Name: "expires", Usage: "when what is left is forfeited: YYYY-MM-DD (midnight) or RFC 3339", DefaultText: "never"},
					&cli.StringFlag{Name: "id", Usage: "the grant's id, its idempotency key", DefaultText: "a new one"},
					&cli.StringFlag{Name: "reason", Usage: "why the customer is granted credit", Required: true},
					&cli.StringFlag{Name: "actor", Usage: "who grants it", DefaultText: "USER@HOST"},
					formatFlag()),
				Action: creditsGrant,
			},
			{
				Name:   "list",
				Usage:  "list grants with what each has left",
				Flags:  append(configFlags(), &cli.StringFlag{Name: "customer", Usage: "one customer's grants"}, formatFlag()),
				Action: creditsList,
			},
			{
				Name:      "show",
				Usage:     "show a customer's grants, what each has left and the invoices each paid",
				ArgsUsage: "CUSTOMER",
				Flags:     append(configFlags(), formatFlag()),
				Action:    creditsShow,
			},
			{
				Name:      "void",
				Usage:     "end a grant now: what it has left is forfeited (a row of the credit ledger says so)",
				ArgsUsage: "GRANT",
				Flags: append(configFlags(),
					&cli.StringFlag{Name: "reason", Usage: "why it is voided", Required: true},
					&cli.StringFlag{Name: "actor", Usage: "who voids it", DefaultText: "USER@HOST"},
					formatFlag()),
				Action: creditsVoid,
			},
		},
	}
}

// timeFlag reads --name as RFC 3339 or a date (midnight in loc); 0 when unset.
func timeFlag(c *cli.Context, name string, loc *time.Location) (int64, error) {
	s := c.String(name)
	if s == "" {
		return 0, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UnixMilli(), nil
	}
	t, err := time.ParseInLocation(time.DateOnly, s, loc)
	if err != nil {
		return 0, usageErrorf(c, "--%s %q: want YYYY-MM-DD or an RFC 3339 time (2026-12-01T00:00:00Z)", name, s)
	}
	return t.UnixMilli(), nil
}

func actorFlag(c *cli.Context) string {
	if a := c.String("actor"); a != "" {
		return a
	}
	return defaultActor()
}

func creditsGrant(c *cli.Context) error {
	args := positional(c)
	if len(args) != 2 {
		return usageErrorf(c, "want CUSTOMER AMOUNT, got %d arguments", len(args))
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return err
	}
	req := invoice.GrantRequest{ID: c.String("id"), Customer: args[0], Amount: args[1], Currency: c.String("currency"),
		Category: c.String("category"), Priority: c.Int64("priority"), Reason: c.String("reason"), Actor: actorFlag(c)}
	if req.EffectiveAt, err = timeFlag(c, "effective", loc); err != nil {
		return err
	}
	if req.ExpiresAt, err = timeFlag(c, "expires", loc); err != nil {
		return err
	}
	if _, err := req.Entry(time.Now().UnixMilli()); err != nil {
		return usageErrorf(c, "%v", err)
	}
	db, w, err := openCustody(c.Context, cfg, false)
	if err != nil {
		return err
	}
	defer closeCustody(db, w)
	op := &custody.GrantCredit{Request: req}
	if err := w.Submit(c.Context, op); err != nil {
		if errors.Is(err, custody.ErrGrantConflict) || errors.Is(err, invoice.ErrBadGrant) {
			return usageErrorf(c, "%v", err)
		}
		return err
	}
	if c.String("format") != "table" {
		return writeRecords(c.App.Writer, c.String("format"), nil, nil, struct {
			Duplicate bool           `json:"duplicate"`
			Grant     *invoice.Grant `json:"grant"`
		}{op.Duplicate, invoice.GrantView(op.Entry, time.Now().UnixMilli())})
	}
	e := op.Entry
	verb := "granted"
	if op.Duplicate {
		verb = "was granted before (a duplicate: nothing written)"
	}
	fmt.Fprintf(c.App.Writer, "grant %s %s: %s %s to %s (%s, priority %d, effective %s, %s)\n", e.GrantID, verb, e.Amount, e.Currency,
		e.Customer, e.Category, e.Priority, ledgerTime(e.EffectiveAt, "UTC"), expiresText(e.ExpiresAt))
	return nil
}

func expiresText(ms int64) string {
	if ms == 0 {
		return "never expires"
	}
	return "expires " + ledgerTime(ms, "UTC")
}

func creditsList(c *cli.Context) error {
	if len(positional(c)) != 0 {
		return usageErrorf(c, "credits list takes no arguments (one customer: --customer)")
	}
	return listGrants(c, c.String("customer"), false)
}

func creditsShow(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the CUSTOMER id")
	}
	return listGrants(c, args[0], true)
}

func listGrants(c *cli.Context, customer string, burns bool) error {
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	gs, err := invoice.Grants(c.Context, db, customer, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	if gs == nil {
		gs = []*invoice.Grant{}
	}
	header := []string{"grant", "customer", "currency", "amount", "balance", "status", "category", "priority", "effective", "expires"}
	var rows [][]string
	for _, g := range gs {
		expires := "never"
		if g.ExpiresAt != 0 {
			expires = ledgerTime(g.ExpiresAt, "UTC")
		}
		rows = append(rows, []string{g.ID, g.Customer, g.Currency, g.Amount, g.Balance, g.Status, g.Category,
			fmt.Sprint(g.Priority), ledgerTime(g.EffectiveAt, "UTC"), expires})
	}
	if err := writeRecords(c.App.Writer, c.String("format"), header, rows, gs); err != nil || !burns || c.String("format") != "table" {
		return err
	}
	for _, g := range gs {
		if len(g.Burns) == 0 {
			continue
		}
		var paid []string
		for _, b := range g.Burns {
			paid = append(paid, fmt.Sprintf("invoice %d %s", b.Invoice, b.Amount))
		}
		fmt.Fprintf(c.App.Writer, "%s paid: %s\n", g.ID, strings.Join(paid, ", "))
	}
	return nil
}

func creditsVoid(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the GRANT id")
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	db, w, err := openCustody(c.Context, cfg, false)
	if err != nil {
		return err
	}
	defer closeCustody(db, w)
	op := &custody.VoidCredit{GrantID: args[0], Reason: c.String("reason"), Actor: actorFlag(c)}
	if err := w.Submit(c.Context, op); err != nil {
		if errors.Is(err, invoice.ErrBadGrant) {
			return usageErrorf(c, "%v", err)
		}
		return err
	}
	if c.String("format") != "table" {
		return writeRecords(c.App.Writer, c.String("format"), []string{"grant", "forfeited", "currency"},
			[][]string{{op.Entry.GrantID, op.Entry.Amount, op.Entry.Currency}}, op.Entry)
	}
	fmt.Fprintf(c.App.Writer, "grant %s voided: %s %s forfeited\n", op.Entry.GrantID, op.Entry.Amount, op.Entry.Currency)
	return nil
}
