package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:  "plan",
		Usage: "assign customers to plans and list the plans hookledger.yml declares",
		Description: "Plans and their prices are declared under plans: in hookledger.yml; a later entry with the same\n" +
			"name is the plan's next version, from its effective_from. A customer's plan comes from its latest\n" +
			"assignment in force, else customers.default_plan. Assignments are appended, never edited: to\n" +
			"change a plan, assign the new one from a date. An invoice is priced with the version in force on\n" +
			"its period's first day. A closed period keeps what priced it: an assignment that would take effect\n" +
			"inside a closed period, or on the first day of one, is refused, naming the close and the first day\n" +
			"it may take effect from; a version that priced a closed invoice is frozen (a change to it is a new\n" +
			"version, a later effective_from), and late usage of a closed period is priced as that period was.",
		Subcommands: []*cli.Command{
			{
				Name:      "assign",
				Usage:     "put a customer on a plan from a date",
				ArgsUsage: "CUSTOMER PLAN",
				Description: "An assignment is appended, never edited. From a day inside a month it splits that month's invoice\n" +
					"at the change: usage is priced by event time, each plan's fee and minimum prorated by its part.\n" +
					"Before storing such an assignment, plan assign prints the month's draft split at the change beside\n" +
					"the draft without it. An assignment into a closed period is refused. See docs/invoicing.md.",
				Flags: append(configFlags(),
					&cli.StringFlag{Name: "from", Required: true, Usage: "the first day on the plan, YYYY-MM-DD (in the invoices' time zone)"},
					&cli.StringFlag{Name: "note", Usage: "why (kept with the assignment)"},
				),
				Action: planAssign,
			},
			{
				Name:   "list",
				Usage:  "list the plan versions hookledger.yml declares",
				Flags:  append(configFlags(), formatFlag()),
				Action: planList,
			},
			{
				Name:      "show",
				Usage:     "show a customer's plan today and its assignments",
				ArgsUsage: "CUSTOMER",
				Flags:     append(configFlags(), formatFlag()),
				Action:    planShow,
			},
		},
	}
}

func planAssign(c *cli.Context) error {
	args := positional(c)
	if len(args) != 2 {
		return usageErrorf(c, "want two arguments, CUSTOMER and PLAN")
	}
	from, err := dateFlag(c, "from")
	if err != nil {
		return err
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	asked := customer.PlanAssignment{Customer: args[0], Plan: args[1], EffectiveFrom: from, RecordedAt: time.Now().UTC(), Note: c.String("note")}
	if err := previewChange(c, cfg, db, asked); err != nil {
		return err
	}
	a, err := customer.AssignPlan(c.Context, db, asked, cfg.Catalog)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "customer %q is on plan %q from %s (assignment %d)\n", a.Customer, a.Plan, a.EffectiveFrom, a.ID)
	return nil
}

// previewChange prints, before an assignment from a day inside a month is
// stored, what it does to that month: the draft invoice split at the
// change, each part's plan version and prorated fee, beside the draft
// without it. An assignment on a month's first day, or one that changes no
// price, prints nothing.
func previewChange(c *cli.Context, cfg *config.Config, db *schema.DB, a customer.PlanAssignment) error {
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return err
	}
	pr, _, err := invoice.LoadPricing(c.Context, db, cfg.Catalog, cfg.Customers.DefaultPlan)
	if err != nil {
		return err
	}
	if cfg.Catalog == nil || !cfg.Catalog.Has(a.Plan) {
		return nil // AssignPlan refuses it, naming the plans there are
	}
	// A change the month's invoice cannot take (a plan in another
	// currency inside it) is refused here, before it is stored.
	p, err := invoice.PreviewChange(c.Context, db, pr, a, ledger.NewMeters(cfg.Meters), loc, time.Now)
	if err != nil || p == nil {
		return err
	}
	w, m := c.App.Writer, p.After.Money
	fmt.Fprintf(w, "%s (%s) splits at %s: usage is priced by event time, each plan's fee and minimum prorated by its part:\n", p.Period.Label, p.Period.Zone, a.EffectiveFrom)
	for _, pt := range p.After.Parts {
		fmt.Fprintf(w, "  part %s: %s, fee %s, true-up %s %s\n", invoice.PartDays(pt, p.After.TZ), pt.Version, pt.Fee, pt.TrueUp, m.Currency)
	}
	fmt.Fprintf(w, "  the draft of %s with the change: total %s %s", p.Period.Label, m.Total, m.Currency)
	if p.Before != nil && p.Before.Money.Currency != "" {
		fmt.Fprintf(w, " (without it: %s %s)", p.Before.Money.Total, p.Before.Money.Currency)
	}
	fmt.Fprintln(w)
	return nil
}

func planList(c *cli.Context) error {
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	var versions []*pricing.Plan
	var rows [][]string
	for _, name := range cfg.Catalog.Names() {
		for _, v := range cfg.Catalog.Versions(name) {
			versions = append(versions, v)
			var meters []string
			for _, p := range v.Prices {
				if p.By != "" { // a rate card per value: tokens:by-model
					meters = append(meters, p.Meter+":by-"+p.By)
					continue
				}
				meters = append(meters, p.Meter+":"+string(p.Model))
			}
			def := ""
			if name == cfg.Customers.DefaultPlan {
				def = "default"
			}
			rows = append(rows, []string{v.Name, string(v.EffectiveFrom), v.Currency, money(v.Fee), money(v.Minimum), strings.Join(meters, " "), def})
		}
	}
	return writeRecords(c.App.Writer, c.String("format"), []string{"plan", "from", "currency", "fee", "minimum", "prices", "default"}, rows, orEmpty(versions))
}

func money(d *pricing.Decimal) string {
	if d == nil {
		return "-"
	}
	return d.String()
}

// planShow shows the same as customers show, also for a customer the
// registry does not know (its plan is then the default).
func planShow(c *cli.Context) error { return showCustomer(c, false) }
