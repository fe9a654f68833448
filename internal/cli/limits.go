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
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

func limitsCommand() *cli.Command {
	return &cli.Command{
		Name:  "limits",
		Usage: "list usage and spend limits (plans' and customers' overrides), or a customer's entitlements now",
		Description: "Limits are declared per plan version under plans[].limits in hookledger.yml, a spend limit under\n" +
			"plans[].spend; a customer's override (limits set) replaces the plan's limit on a meter, or on\n" +
			"spend, from a date, until a later override. With --customer, each limited meter's entitlement now:\n" +
			"the limit, the usage of this month, what remains and whether more is allowed, as\n" +
			"GET /v1/entitlements answers, and the row (spend) when the customer's plan keeps spend, as\n" +
			"GET /v1/spend answers (in the table and CSV; docs/entitlements.md).",
		Flags: append(configFlags(), formatFlag(),
			&cli.StringFlag{Name: "customer", Usage: "show this customer's entitlements and spend now (with --format json, the object GET /v1/entitlements/CUSTOMER?meter=…&spend=true answers)"},
		),
		Action: limitsList,
		Subcommands: []*cli.Command{
			{
				Name:      "set",
				Usage:     "override a customer's limit on a meter, or on its spend (--spend), from a date",
				ArgsUsage: "CUSTOMER METER LIMIT | CUSTOMER --spend AMOUNT",
				Flags: append(configFlags(),
					&cli.StringFlag{Name: "spend", Usage: "limit the customer's spend per month to this amount, in its plan's currency (no finer than its minor unit, e.g. cents)"},
					&cli.StringFlag{Name: "from", Required: true, Usage: "the first day of the override, YYYY-MM-DD (in the invoices' time zone)"},
					&cli.StringFlag{Name: "kind", Usage: "hard or soft (default: the plan's kind for the meter, or for spend with --spend, else hard)"},
					&cli.StringFlag{Name: "note", Usage: "why (kept with the override)"},
				),
				Action: limitsSet,
			},
		},
	}
}

func limitsSet(c *cli.Context) error {
	args := positional(c)
	if c.IsSet("spend") {
		return spendSet(c, args)
	}
	if len(args) != 3 {
		return usageErrorf(c, "want three arguments, CUSTOMER, METER and LIMIT (or CUSTOMER --spend AMOUNT)")
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

// spendSet is `limits set CUSTOMER --spend AMOUNT`: the spend has a flag
// of its own, so no meter's name can be taken for it.
func spendSet(c *cli.Context, args []string) error {
	if len(args) != 1 {
		return usageErrorf(c, "with --spend, want one argument, CUSTOMER")
	}
	from, err := dateFlag(c, "from")
	if err != nil {
		return err
	}
	amount, err := pricing.ParseDecimal(c.String("spend"))
	if err != nil {
		return usageErrorf(c, "--spend: %v", err)
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
	o, err := entitle.SetSpendOverride(c.Context, db, entitle.NewPolicy(cfg.Catalog, cfg.Customers.DefaultPlan), entitle.SpendOverride{Customer: args[0], Limit: amount,
		Kind: c.String("kind"), EffectiveFrom: from, RecordedAt: time.Now().UTC(), Note: c.String("note")})
	if errors.Is(err, entitle.ErrBadOverride) {
		return usageErrorf(c, "%v", err)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "customer %q: spend limited to %s a month from %s (spend override %d)\n", o.Customer, o.Limit, o.EffectiveFrom, o.ID)
	return nil
}

// limitRow is one line of `limits`: a plan version's limit or an override,
// on a meter or on spend (meter "(spend)" in the table).
type limitRow struct {
	Source   string   `json:"source"` // plan name@date, or override
	Customer string   `json:"customer,omitempty"`
	Meter    string   `json:"meter,omitempty"`
	Spend    bool     `json:"spend,omitempty"`
	Limit    string   `json:"limit"` // a quantity, or an amount ("" for spend alerts without a limit)
	Currency string   `json:"currency,omitempty"`
	Kind     string   `json:"kind"`
	Alerts   []string `json:"alerts"`
	From     string   `json:"from"`
	Override int64    `json:"override,omitempty"`
}

// spendMeter names spend in the tables' meter column.
const spendMeter = "(spend)"

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
		return customerEntitlements(c, db, entitle.NewPolicy(cfg.Catalog, cfg.Customers.DefaultPlan), customer)
	}
	var out []limitRow
	for _, name := range cfg.Catalog.Names() {
		for _, v := range cfg.Catalog.Versions(name) {
			for _, l := range v.Limits {
				limit := "" // a credit limit has no quantity: the customer's credit balance is the limit
				if l.Kind != entitle.LimitCredit {
					q, err := ledger.ParseTotal(l.Limit.String())
					if err != nil {
						return err
					}
					limit = q.String()
				}
				out = append(out, limitRow{Source: v.Name + "@" + string(v.EffectiveFrom), Meter: l.Meter, Limit: limit, Kind: l.Kind,
					Alerts: orEmpty(l.Alerts), From: string(v.EffectiveFrom)})
			}
			if sp := v.Spend; sp != nil {
				limit := ""
				if sp.Limit != nil {
					limit = sp.Limit.String()
				}
				out = append(out, limitRow{Source: v.Name + "@" + string(v.EffectiveFrom), Spend: true, Limit: limit, Currency: v.Currency,
					Kind: sp.Kind, Alerts: orEmpty(sp.Alerts), From: string(v.EffectiveFrom)})
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
		out = append(out, limitRow{Source: "override", Customer: o.Customer, Meter: o.Meter, Limit: o.Limit.String(), Kind: kind,
			Alerts: []string{}, From: string(o.EffectiveFrom), Override: o.ID})
	}
	sos, err := entitle.SpendOverrides(c.Context, db, "")
	if err != nil {
		return err
	}
	for _, o := range sos {
		kind := o.Kind
		if kind == "" {
			kind = "(plan's)"
		}
		out = append(out, limitRow{Source: "override", Customer: o.Customer, Spend: true, Limit: o.Limit.String(), Kind: kind,
			Alerts: []string{}, From: string(o.EffectiveFrom), Override: o.ID})
	}
	rows := make([][]string, len(out))
	for i, r := range out {
		meter, limit := r.Meter, r.Limit
		if r.Spend {
			meter = spendMeter
			if limit != "" && r.Currency != "" {
				limit += " " + r.Currency
			}
		}
		rows[i] = []string{r.Source, orDash(r.Customer), meter, orDash(limit), orDash(r.Kind), orDash(strings.Join(r.Alerts, " ")), r.From}
	}
	return writeRecords(c.App.Writer, c.String("format"), []string{"source", "customer", "meter", "limit", "kind", "alerts", "from"}, rows, orEmpty(out))
}

// customerEntitlements prints the entitlement of every meter the customer's
// plan or overrides limit, now.
func customerEntitlements(c *cli.Context, db *schema.DB, p *entitle.Policy, customer string) error {
	meters, err := limitedMeters(c, db, p, customer)
	if err != nil {
		return err
	}
	reply, err := (&entitle.Checker{DB: db, Policy: p}).Reply(c.Context, customer, meters, true)
	if err != nil {
		return err
	}
	rows := make([][]string, len(reply.Entitlements), len(reply.Entitlements)+1)
	for i, e := range reply.Entitlements {
		limit, remaining := "-", "-"
		if e.Limit != nil {
			limit, remaining = e.Limit.String(), e.Remaining.String()
		}
		rows[i] = []string{e.Meter, limit, orDash(e.Kind), e.Used.String(), remaining, strconv.FormatBool(e.Allowed), e.PeriodStart, e.PeriodEnd}
	}
	if sp := reply.Spend; sp.Spent != nil { // the customer's plan version keeps spend
		limit, remaining := "-", "-"
		if sp.Limit != nil {
			limit, remaining = sp.Limit.String(), sp.Remaining.String()
		}
		rows = append(rows, []string{spendMeter, limit, orDash(sp.Kind), sp.Spent.String() + " " + sp.Currency, remaining,
			strconv.FormatBool(sp.Allowed), sp.PeriodStart, sp.PeriodEnd})
	}
	return writeRecords(c.App.Writer, c.String("format"), []string{"meter", "limit", "kind", "used", "remaining", "allowed", "period_start", "period_end"}, rows, reply)
}

// limitedMeters are the meters any plan version or the customer's overrides
// limit, sorted.
func limitedMeters(c *cli.Context, db entitle.OverrideStore, p *entitle.Policy, customer string) ([]string, error) {
	seen := map[string]bool{}
	if cat := p.Catalog; cat != nil {
		for _, name := range cat.Names() {
			for _, v := range cat.Versions(name) {
				for _, l := range v.Limits {
					seen[l.Meter] = true
				}
			}
		}
	}
	os, err := entitle.Overrides(c.Context, db, customer)
	if err != nil {
		return nil, err
	}
	for _, o := range os {
		seen[o.Meter] = true
	}
	return slices.Sorted(maps.Keys(seen)), nil
}
