package cli

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/stripe"
)

func customersCommand() *cli.Command {
	customerFlags := []cli.Flag{
		&cli.StringFlag{Name: "name", Usage: "the customer's name"},
		&cli.StringFlag{Name: "email", Usage: "where invoices go"},
		&cli.StringSliceFlag{Name: "external-id", Usage: "SYSTEM=ID, the customer's id elsewhere (e.g. stripe=cus_…); repeat for several"},
		&cli.StringFlag{Name: "note", Usage: "why (kept with the change)"},
	}
	return &cli.Command{
		Name:  "customers",
		Usage: "register customers: name, email, ids in other systems, plan (with history)",
		Description: "Registering is optional: the ledger bills any customer id its events name. The registry adds\n" +
			"a name, an email and ids in other systems, and keeps every change as a new row (show lists them).\n" +
			"A plan is assigned with --plan here or with hookledger plan assign.",
		Subcommands: []*cli.Command{
			{
				Name:      "add",
				Usage:     "register a customer",
				ArgsUsage: "CUSTOMER",
				Flags: append(append(configFlags(), customerFlags...),
					&cli.StringFlag{Name: "plan", Usage: "assign this plan (needs --from)"},
					&cli.StringFlag{Name: "from", Usage: "the plan's first day, YYYY-MM-DD"},
				),
				Action: customersAdd,
			},
			{
				Name:      "update",
				Usage:     "change a registered customer (a new row; the old one stays as history)",
				ArgsUsage: "CUSTOMER",
				Flags:     append(configFlags(), customerFlags...),
				Action:    customersUpdate,
			},
			{
				Name:      "link",
				Usage:     "link a customer to its Stripe customer (a new row; earlier links stay as history)",
				ArgsUsage: "CUSTOMER",
				Description: "With stripe.customers: link, pushes name the Stripe customer the latest link gives when they\n" +
					"are sent. A customer not registered yet is registered with the link. customers show lists the history.",
				Flags: append(configFlags(),
					&cli.StringFlag{Name: "stripe", Usage: "the Stripe customer id, cus_…", Required: true},
					&cli.StringFlag{Name: "note", Usage: "why (kept with the change)"}),
				Action: customersLink,
			},
			{
				Name:   "list",
				Usage:  "list registered customers as they are now, with their plan today",
				Flags:  append(configFlags(), formatFlag()),
				Action: customersList,
			},
			{
				Name:      "show",
				Usage:     "show one customer's registry history and plan assignments",
				ArgsUsage: "CUSTOMER",
				Flags:     append(configFlags(), formatFlag()),
				Action:    customersShow,
			},
		},
	}
}

func externalIDs(c *cli.Context) (map[string]string, error) {
	ids := map[string]string{}
	for _, kv := range c.StringSlice("external-id") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, usageErrorf(c, "--external-id %q: want SYSTEM=ID, e.g. stripe=cus_123", kv)
		}
		ids[k] = v
	}
	return ids, nil
}

func dateFlag(c *cli.Context, name string) (pricing.Date, error) {
	d := pricing.Date(c.String(name))
	if err := d.Check(); err != nil {
		return "", usageErrorf(c, "--%s: %v", name, err)
	}
	return d, nil
}

func customersAdd(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the CUSTOMER id")
	}
	ext, err := externalIDs(c)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	cust := customer.Customer{ID: args[0], Name: c.String("name"), Email: c.String("email"), ExternalIDs: ext, RecordedAt: now, Note: c.String("note")}
	var plan *customer.PlanAssignment
	switch {
	case c.IsSet("plan") && !c.IsSet("from"):
		return usageErrorf(c, "--plan needs --from, the plan's first day (YYYY-MM-DD)")
	case c.IsSet("from") && !c.IsSet("plan"):
		return usageErrorf(c, "--from goes with --plan")
	case c.IsSet("plan"):
		from, err := dateFlag(c, "from")
		if err != nil {
			return err
		}
		plan = &customer.PlanAssignment{Plan: c.String("plan"), EffectiveFrom: from, RecordedAt: now, Note: c.String("note")}
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
	if err := customer.AddCustomer(c.Context, db, cust, plan, cfg.Catalog); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "customer %q registered", cust.ID)
	if plan != nil {
		fmt.Fprintf(c.App.Writer, ", on plan %q from %s", plan.Plan, plan.EffectiveFrom)
	}
	fmt.Fprintln(c.App.Writer)
	return nil
}

func customersLink(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the CUSTOMER id")
	}
	id := c.String("stripe")
	if !strings.HasPrefix(id, "cus_") || strings.ContainsAny(id, " \t\n") {
		return usageErrorf(c, "--stripe %q: want a Stripe customer id, cus_…", id)
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	now := time.Now().UTC()
	ext := map[string]string{stripe.ExternalID: id}
	_, err = customer.UpdateCustomer(c.Context, db, args[0], customer.CustomerChange{ExternalIDs: ext, Note: c.String("note"), At: now})
	switch {
	case errors.Is(err, customer.ErrNoCustomer):
		err = customer.AddCustomer(c.Context, db, customer.Customer{ID: args[0], ExternalIDs: ext, RecordedAt: now, Note: c.String("note")}, nil, nil)
	case errors.Is(err, customer.ErrNothingToChange):
		err = nil // linked to it already
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "customer %q linked to Stripe customer %s\n", args[0], id)
	return nil
}

func customersUpdate(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the CUSTOMER id")
	}
	ext, err := externalIDs(c)
	if err != nil {
		return err
	}
	ch := customer.CustomerChange{ExternalIDs: ext, Note: c.String("note"), At: time.Now().UTC()}
	if c.IsSet("name") {
		v := c.String("name")
		ch.Name = &v
	}
	if c.IsSet("email") {
		v := c.String("email")
		ch.Email = &v
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	cust, err := customer.UpdateCustomer(c.Context, db, args[0], ch)
	if errors.Is(err, customer.ErrNothingToChange) {
		return usageErrorf(c, "%v: give --name, --email or --external-id with a new value", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "customer %q updated (name %q, email %q, external ids %s)\n", cust.ID, cust.Name, cust.Email, formatIDs(cust.ExternalIDs))
	return nil
}

func formatIDs(ids map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ids)) {
		parts = append(parts, k+"="+ids[k])
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ",")
}

// today is the date plans are shown for: UTC's.
func today() pricing.Date { return pricing.Date(time.Now().UTC().Format(time.DateOnly)) }

func customersList(c *cli.Context) error {
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	cs, err := customer.CustomersToday(c.Context, db, cfg.Customers.DefaultPlan, today())
	if err != nil {
		return err
	}
	var rows [][]string
	for _, cust := range cs {
		rows = append(rows, []string{cust.ID, cust.Name, cust.Email, formatIDs(cust.ExternalIDs), orDash(cust.Plan), cust.RecordedAt.Format(time.RFC3339)})
	}
	return writeRecords(c.App.Writer, c.String("format"), []string{"customer", "name", "email", "external_ids", "plan", "changed_at"}, rows, cs)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func customersShow(c *cli.Context) error { return showCustomer(c, true) }

// showCustomer prints a customer's registry history, plan assignments and
// plan today; registered refuses a customer neither registered nor assigned.
func showCustomer(c *cli.Context, registered bool) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "want one argument, the CUSTOMER id")
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	db, err := openExisting(c)
	if err != nil {
		return err
	}
	defer db.Close()
	v, err := customer.ViewCustomer(c.Context, db, cfg.Customers.DefaultPlan, args[0], today())
	if err != nil {
		return err
	}
	if registered && !v.Known {
		return fmt.Errorf("%w %q in the registry (hookledger customers list shows them)", customer.ErrNoCustomer, args[0])
	}
	if c.String("format") == "json" {
		return writeRecords(c.App.Writer, "json", nil, nil, v)
	}
	w := c.App.Writer
	fmt.Fprintf(w, "customer %s\nplan today (%s): %s — %s\n\n", v.Customer, today(), orDash(v.PlanToday), v.Source)
	var rows [][]string
	for _, h := range v.History {
		rows = append(rows, []string{h.RecordedAt.Format(time.RFC3339), h.Name, h.Email, formatIDs(h.ExternalIDs), h.Note})
	}
	if err := writeRecords(w, c.String("format"), []string{"changed_at", "name", "email", "external_ids", "note"}, rows, nil); err != nil {
		return err
	}
	fmt.Fprintln(w)
	rows = nil
	for _, a := range v.Assignments {
		rows = append(rows, []string{itoa(int(a.ID)), a.Plan, string(a.EffectiveFrom), a.RecordedAt.Format(time.RFC3339), a.Note})
	}
	return writeRecords(w, c.String("format"), []string{"assignment", "plan", "from", "recorded_at", "note"}, rows, nil)
}

func orEmpty[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
