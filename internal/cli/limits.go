package cli

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ledger"
)

func limitsCommand() *cli.Command {
	return &cli.Command{
		Name:  "limits",
		Usage: "list usage limits (plans' and customers' overrides), or a customer's entitlements now",
		Description: "Limits are declared per plan version under plans[].limits in hookledger.yml; a customer's override\n" +
			"(limits set) replaces the plan's limit on a meter from a date, until a later override. With\n" +
			"--customer, each limited meter's entitlement now: the limit, the usage of this month, what\n" +
			"remains and whether more is allowed, as GET /v1/entitlements answers (docs/entitlements.md).",
		Flags: append(configFlags(), formatFlag(),
			&cli.StringFlag{Name: "customer", Usage: "show this customer's entitlements now"},
		),
		Action: limitsList,
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "override a customer's limit on a meter from a date",
				ArgsUsage: "CUSTOMER METER LIMIT",
				Flags: append(configFlags(),
					&cli.StringFlag{Name: "from", Required: true, Usage: "the first day of the override, YYYY-MM-DD (in the invoices' time zone)"},
					&cli.StringFlag{Name: "kind", Usage: "hard or soft (default: the plan's kind for the meter, else hard)"},
					&cli.StringFlag{Name: "note", Usage: "why (kept with the override)"},
				),
				Action: limitsSet,
			},
		},
	}
}

func limitsSet(c *cli.Context) error {
	args := positional(c)
	if len(args) != 3 {
		return usageErrorf(c, "want three arguments, CUSTOMER, METER and LIMIT")
	}
	from, err := dateFlag(c, "from")
	if err != nil {
		return err
	}
	limit, err := ledger.ParseTotal(args[2])
	if err != nil {
		return usageErrorf(c, "LIMIT %q is not a quantity", args[2])
	}
	meters, err := loadMeters(c)
	if err != nil {
		return err
	}
	db, err := openWritable(c)
	if err != nil {
		return err
	}
	defer db.Close()
	o, err := entitle.SetOverride(c.Context, db, entitle.Override{Customer: args[0], Meter: args[1], Limit: limit,
		Kind: c.String("kind"), EffectiveFrom: from, RecordedAt: time.Now().UTC(), Note: c.String("note")}, meters)
	if errors.Is(err, entitle.ErrBadOverride) {
		return usageErrorf(c, "%v", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "customer %q: %s limited to %s from %s (override %d)\n", o.Customer, o.Meter, o.Limit, o.EffectiveFrom, o.ID)
	return nil
}

// limitRow is one line of `limits`: a plan version's limit or an override.
type limitRow struct {
	Source   string       `json:"source"` // plan name@date, or override
	Customer string       `json:"customer,omitempty"`
	Meter    string       `json:"meter"`
	Limit    ledger.Total `json:"limit"`
	Kind     string       `json:"kind"`
	Alerts   []string     `json:"alerts"`
	From     string       `json:"from"`
	Override int64        `json:"override,omitempty"`
}

func limitsList(c *cli.Context) error {
	if len(positional(c)) != 0 {
		return usageErrorf(c, "limits takes no arguments (limits set CUSTOMER METER LIMIT --from DATE sets one)")
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
	if customer := c.String("customer"); customer != "" {
		return customerEntitlements(c, &entitle.Checker{DB: db, Policy: entitle.NewPolicy(cfg.Catalog, cfg.Customers.DefaultPlan)}, customer)
	}
	var out []limitRow
	for _, name := range cfg.Catalog.Names() {
		for _, v := range cfg.Catalog.Versions(name) {
			for _, l := range v.Limits {
				q, err := ledger.ParseTotal(l.Limit.String())
				if err != nil {
					return err
				}
				out = append(out, limitRow{Source: v.Name + "@" + string(v.EffectiveFrom), Meter: l.Meter, Limit: q, Kind: l.Kind,
					Alerts: orEmpty(l.Alerts), From: string(v.EffectiveFrom)})
			}
		}
	}
	os, err := entitle.Overrides(c.Context, db, "")
	if err != nil {
		return err
	}
	for _, o := range os {
		kind := o.Kind
		if kind == "" {
			kind = "(plan's)"
		}
		out = append(out, limitRow{Source: "override", Customer: o.Customer, Meter: o.Meter, Limit: o.Limit, Kind: kind,
			Alerts: []string{}, From: string(o.EffectiveFrom), Override: o.ID})
	}
	rows := make([][]string, len(out))
	for i, r := range out {
		rows[i] = []string{r.Source, orDash(r.Customer), r.Meter, r.Limit.String(), r.Kind, orDash(strings.Join(r.Alerts, " ")), r.From}
	}
	return writeRecords(c.App.Writer, c.String("format"), []string{"source", "customer", "meter", "limit", "kind", "alerts", "from"}, rows, orEmpty(out))
}

// customerEntitlements prints the entitlement of every meter the customer's
// plan or overrides limit, now.
func customerEntitlements(c *cli.Context, ch *entitle.Checker, customer string) error {
	meters, err := limitedMeters(c, ch, customer)
	if err != nil {
		return err
	}
	es, err := ch.CheckAll(c.Context, customer, meters)
	if err != nil {
		return err
	}
	rows := make([][]string, len(es))
	for i, e := range es {
		limit, remaining := "-", "-"
		if e.Limit != nil {
			limit, remaining = e.Limit.String(), e.Remaining.String()
		}
		rows[i] = []string{e.Meter, limit, orDash(e.Kind), e.Used.String(), remaining, strconv.FormatBool(e.Allowed), e.PeriodStart, e.PeriodEnd}
	}
	return writeRecords(c.App.Writer, c.String("format"), []string{"meter", "limit", "kind", "used", "remaining", "allowed", "period_start", "period_end"}, rows, orEmpty(es))
}

// limitedMeters are the meters any plan version or the customer's overrides
// limit, sorted.
func limitedMeters(c *cli.Context, ch *entitle.Checker, customer string) ([]string, error) {
	seen := map[string]bool{}
	if cat := ch.Policy.Catalog; cat != nil {
		for _, name := range cat.Names() {
			for _, v := range cat.Versions(name) {
				for _, l := range v.Limits {
					seen[l.Meter] = true
				}
			}
		}
	}
	os, err := ch.DB.LimitOverrides(c.Context, customer, "")
	if err != nil {
		return nil, err
	}
	for _, o := range os {
		seen[o.Meter] = true
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
