package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
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
	a, err := ledger.AssignPlan(c.Context, db, ledger.PlanAssignment{Customer: args[0], Plan: args[1], EffectiveFrom: from,
		RecordedAt: time.Now().UTC(), Note: c.String("note")}, cfg.Catalog)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "customer %q is on plan %q from %s (assignment %d)\n", a.Customer, a.Plan, a.EffectiveFrom, a.ID)
	return noteMidPeriod(c, cfg, a)
}

// noteMidPeriod says on stderr what an assignment from a day inside a
// month does to that month: its invoice is priced by the plan in force on
// its first day, so the new plan prices usage from the next month, while
// limits switch on the day (docs/invoicing.md, "Which version").
func noteMidPeriod(c *cli.Context, cfg *config.Config, a ledger.PlanAssignment) error {
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return err
	}
	day, err := time.ParseInLocation(time.DateOnly, string(a.EffectiveFrom), loc)
	if err != nil || day.Day() == 1 {
		return nil
	}
	first := time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, loc)
	fmt.Fprintf(c.App.ErrWriter, "note: %s is inside the month %s (%s): its invoice is priced by the plan in force on %s, so %q prices usage from %s; its limits apply from %s\n",
		a.EffectiveFrom, first.Format("2006-01"), loc, first.Format(time.DateOnly), a.Plan, first.AddDate(0, 1, 0).Format(time.DateOnly), a.EffectiveFrom)
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
