package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe"
)

// Corrections: void and amend. Both go through a writer of this process, as
// adjust does, so their rows join the hash chain exactly as webhook rows do.

func correctionFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "reason", EnvVars: []string{"HOOKLEDGER_REASON"}, Usage: "why the event is corrected (required; kept in the ledger)"},
		&cli.StringFlag{Name: "actor", EnvVars: []string{"HOOKLEDGER_ACTOR"},
			Usage: "who corrects it, kept in the ledger with the reason (default: USER@HOST)"},
		formatFlag(),
	}
}

// bulkFlags select the events of a bulk correction.
func bulkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "provider", EnvVars: []string{"HOOKLEDGER_PROVIDER"}, Usage: "bulk: the provider whose events are selected"},
		&cli.StringFlag{Name: "from", Usage: "bulk: event time from (inclusive), as usage --from"},
		&cli.StringFlag{Name: "to", Usage: "bulk: event time to (exclusive), as usage --to"},
		&cli.StringFlag{Name: "where", Usage: "bulk: customer=ID and/or meter=NAME, comma-separated"},
		&cli.BoolFlag{Name: "yes", Usage: "bulk: apply without asking for confirmation"},
	}
}

func voidCommand() *cli.Command {
	return &cli.Command{
		Name:      "void",
		Usage:     "void an applied event: compensating rows in the ledger, with who and why",
		ArgsUsage: "PROVIDER EVENT_ID",
		Description: "Appends one row of kind void per usage row of the event, in one transaction, to the hash chain:\n" +
			"each names the row it voids (ref row:ID) and carries its quantity negated, with the reason and the\n" +
			"actor; the event's own rows stay. An open period nets out; a closed one bills the void as a late\n" +
			"line on the next invoice, priced at the margin. An event is voided once (a second void is refused),\n" +
			"and its receipt stays, so a redelivery is a duplicate and the event is never applied again. Only\n" +
			"rows of sum and count meters can be voided; correct others with adjust.\n\n" +
			"Bulk: without PROVIDER EVENT_ID, --provider with --from/--to and --where selects every applied event\n" +
			"not yet voided with a usage row in the window; --dry-run shows the change (and its money, priced at\n" +
			"the margin, when a plan prices it), otherwise it asks once\n" +
			"(or --yes) and voids each event in its own op. A run stopped halfway is resumed by running it again.",
		Flags: append(configFlags(), append(correctionFlags(), append(bulkFlags(),
			&cli.BoolFlag{Name: "dry-run", Usage: "show the change per customer, meter and month, with its money when a plan prices it; write nothing"},
			tzFlag("IANA time zone of --from/--to and of the months --dry-run shows"))...)...),
		Action: voidAction,
	}
}

func amendCommand() *cli.Command {
	return &cli.Command{
		Name:      "amend",
		Usage:     "correct an applied event: void it and apply a corrected body under a derived id",
		ArgsUsage: "PROVIDER EVENT_ID",
		Description: "Voids the event (see void) and, in the same transaction, applies a corrected body with the current\n" +
			"mappings as event EVENT_ID~amend (source amend, the original's type and received time); its usage\n" +
			"rows name the original (ref event:PROVIDER/EVENT_ID). The body is the stored one with each --set\n" +
			"PATH=VALUE applied (VALUE is JSON if it parses as JSON, else a string: quote a numeric id, e.g.\n" +
			"data.customer='\"42\"'), or the file given with --body. --dry-run writes nothing and shows the change\n" +
			"per customer, meter and month.\n\n" +
			"Bulk: --remap (without PROVIDER EVENT_ID) re-runs the current mappings over the stored bodies of the\n" +
			"events --provider, --from/--to and --where select (e.g. after fixing a mapping) and amends each one\n" +
			"they now map differently; --dry-run shows the change, otherwise it asks once (or --yes). A run\n" +
			"stopped halfway is resumed by running it again.",
		Flags: append(configFlags(), append(append(correctionFlags(), bulkFlags()...),
			&cli.BoolFlag{Name: "remap", Usage: "bulk: amend the selected events whose stored body the current mappings map differently"},
			&cli.StringSliceFlag{Name: "set", Usage: "PATH=VALUE: set a field of the stored body (a gjson path, e.g. data.customer=cus_9); repeatable"},
			&cli.StringFlag{Name: "body", Usage: "file holding the whole corrected body"},
			&cli.BoolFlag{Name: "dry-run", Usage: "show the change per customer, meter and month, with its money when a plan prices it; write nothing"},
			tzFlag("IANA time zone of the months --dry-run shows"),
		)...),
		Action: amendAction,
	}
}

// correction reads the arguments and flags void and amend share.
func correction(c *cli.Context) (ledger.Void, error) {
	args := positional(c)
	if len(args) != 2 {
		return ledger.Void{}, usageErrorf(c, "want PROVIDER EVENT_ID, got %d arguments", len(args))
	}
	if strings.TrimSpace(c.String("reason")) == "" {
		return ledger.Void{}, usageErrorf(c, "--reason is required: say why the event is corrected")
	}
	actor := c.String("actor")
	if actor == "" {
		actor = defaultActor()
	}
	v := ledger.Void{Provider: args[0], EventID: args[1], Reason: c.String("reason"), Actor: actor}
	return v, v.Validate()
}

// defaultActor is USER@HOST: the operator at the terminal.
func defaultActor() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); name == "" && err == nil {
		name = u.Username
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return name
	}
	return name + "@" + host
}

func voidAction(c *cli.Context) error {
	if len(positional(c)) == 0 && c.String("provider") != "" {
		return bulkCorrect(c, false)
	}
	v, err := correction(c)
	if err != nil {
		return err
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	if c.Bool("dry-run") {
		return voidPreview(c, cfg, v)
	}
	db, w, err := openCustody(c.Context, cfg, false)
	if err != nil {
		return err
	}
	defer closeCustody(db, w)
	op := &custody.VoidEvent{Void: v, Meters: ledger.NewMeters(cfg.Meters)}
	if err := w.Submit(c.Context, op); err != nil {
		return err
	}
	noteStripe(c, cfg, op.Rows)
	return writeLedgerRows(c, op.Rows)
}

func amendAction(c *cli.Context) error {
	if c.Bool("remap") {
		if len(positional(c)) != 0 || len(c.StringSlice("set")) > 0 || c.String("body") != "" {
			return usageErrorf(c, "--remap selects events with --provider, --from/--to and --where: no PROVIDER EVENT_ID, --set or --body")
		}
		return bulkCorrect(c, true)
	}
	v, err := correction(c)
	if err != nil {
		return err
	}
	sets, bodyFile := c.StringSlice("set"), c.String("body")
	if (len(sets) == 0) == (bodyFile == "") {
		return usageErrorf(c, "give --set PATH=VALUE (repeatable) or --body FILE")
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	mapper := ledger.NewMapper(cfg.Usage, cfg.MeterNames())
	op := &custody.AmendEvent{Void: v, Mapper: mapper, Meters: ledger.NewMeters(cfg.Meters), HandlerVersion: handlerVersion(mapper)}
	if bodyFile != "" {
		if op.Body, err = os.ReadFile(bodyFile); err != nil {
			return fmt.Errorf("--body: %w", err)
		}
	} else if op.Edit, err = setFields(sets); err != nil {
		return usageErrorf(c, "--set: %v", err)
	}
	if c.Bool("dry-run") {
		loc, err := zoneOf(c, cfg)
		if err != nil {
			return err
		}
		db, _, err := openCustody(c.Context, cfg, true)
		if err != nil {
			return err
		}
		defer db.Close()
		changes, err := amendPreview(c.Context, db, op, loc)
		if err != nil {
			return err
		}
		if err := priceChanges(c.Context, db, cfg, changes); err != nil {
			return err
		}
		return writeChanges(c, changes)
	}
	db, w, err := openCustody(c.Context, cfg, false)
	if err != nil {
		return err
	}
	defer closeCustody(db, w)
	if err := w.Submit(c.Context, op); err != nil {
		return err
	}
	rows, err := db.EventLedgerRows(c.Context, op.Amended.Provider, op.Amended.EventID)
	if err != nil {
		return err
	}
	written := append(op.Voids, rowPointers(ledger.StoredRows(rows))...)
	noteStripe(c, cfg, written)
	return writeLedgerRows(c, written)
}

// voidPreview shows what voiding v would change, and writes nothing: the
// event's usage rows taken out, refused as the void would refuse it.
func voidPreview(c *cli.Context, cfg *config.Config, v ledger.Void) error {
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return err
	}
	db, _, err := openCustody(c.Context, cfg, true)
	if err != nil {
		return err
	}
	defer db.Close()
	meters := ledger.NewMeters(cfg.Meters)
	var changes []ledger.Change
	err = db.View(c.Context, func(tx *schema.ReadTx) error {
		// Void.Rows refuses what the void would: voided before, no usage
		// rows, a meter that cannot be voided.
		rows, err := v.Rows(c.Context, tx, meters, 0)
		if err != nil {
			return err
		}
		var before []ledger.Row
		for _, r := range rows {
			before = append(before, ledger.Row{Kind: ledger.KindUsage, Customer: r.Customer, Meter: r.Meter, Quantity: r.Quantity.Neg(),
				Properties: r.Properties, OccurredAt: r.OccurredAt})
		}
		changes = ledger.Changes(before, nil, meters, loc)
		return nil
	})
	if err != nil {
		return err
	}
	if err := priceChanges(c.Context, db, cfg, changes); err != nil {
		return err
	}
	return writeChanges(c, changes)
}

// amendPreview is what op would change, read from a snapshot: the event's
// rows against the corrected body's, refused as op would refuse it.
func amendPreview(ctx context.Context, db *schema.DB, op *custody.AmendEvent, loc *time.Location) ([]ledger.Change, error) {
	var changes []ledger.Change
	err := db.View(ctx, func(tx *schema.ReadTx) error {
		p, id := op.Void.Provider, op.Void.EventID
		rcs, err := tx.EventReceipts(ctx, p, []string{id})
		if err != nil {
			return err
		}
		if len(rcs) == 0 {
			return fmt.Errorf("%w: no event %s/%s is stored", custody.ErrBadAmendment, p, id)
		}
		if voids, err := tx.EventLedgerRows(ctx, "", ledger.VoidEventID(p, id)); err != nil {
			return err
		} else if len(voids) > 0 {
			return fmt.Errorf("%w: %s/%s was voided by row %d: %s", ledger.ErrAlreadyVoided, p, id, voids[0].ID, voids[0].Reason)
		}
		before, err := tx.EventLedgerRows(ctx, p, id)
		if err != nil {
			return err
		}
		d, err := op.Corrected(rcs[0])
		if err != nil {
			return err
		}
		changes = ledger.Changes(ledger.StoredRows(before), ledger.UsageRows(d.Rows), op.Meters, loc)
		return nil
	})
	return changes, err
}

// setFields is an edit of a JSON body that sets each PATH=VALUE, keeping the
// rest of the body byte for byte.
func setFields(sets []string) (func([]byte) ([]byte, error), error) {
	type set struct{ path, raw string }
	var parsed []set
	for _, s := range sets {
		path, value, ok := strings.Cut(s, "=")
		if !ok || path == "" {
			return nil, fmt.Errorf("%q: want PATH=VALUE, e.g. data.customer=cus_9", s)
		}
		raw := value
		if !gjson.Valid(value) {
			raw = strconv.Quote(value)
		}
		parsed = append(parsed, set{path, raw})
	}
	return func(body []byte) ([]byte, error) {
		for _, s := range parsed {
			var err error
			if body, err = sjson.SetRawBytes(body, s.path, []byte(s.raw)); err != nil {
				return nil, fmt.Errorf("set %s: %w", s.path, err)
			}
		}
		return body, nil
	}, nil
}

func rowPointers(rs []ledger.Row) []*ledger.Row {
	out := make([]*ledger.Row, len(rs))
	for i := range rs {
		out[i] = &rs[i]
	}
	return out
}

// noteStripe says on stderr where each row written reaches Stripe, for the
// rows of meters pushed there (stripe.Reach): a correction of a closed
// month lands in Stripe's current period.
func noteStripe(c *cli.Context, cfg *config.Config, rows []*ledger.Row) {
	if cfg.Stripe == nil {
		return
	}
	meters := map[string]*ledger.StripeMeter{}
	for _, m := range cfg.Meters {
		meters[m.Name] = m.Stripe
	}
	now := time.Now()
	for _, r := range rows {
		if s := stripe.Reach(meters[r.Meter], r.OccurredAt, now); s != "" {
			fmt.Fprintf(c.App.ErrWriter, "row %d: %s\n", r.ID, s)
		}
	}
}

func writeLedgerRows(c *cli.Context, rows []*ledger.Row) error {
	if len(rows) == 0 {
		return errors.New("no row was written")
	}
	header := []string{"id", "kind", "event_id", "customer", "meter", "quantity", "ref", "occurred_at", "reason"}
	var recs [][]string
	for _, r := range rows {
		recs = append(recs, []string{strconv.FormatInt(r.ID, 10), r.Kind, r.EventID, r.Customer, r.Meter, r.Quantity.String(), r.Ref,
			time.UnixMilli(r.OccurredAt).UTC().Format(time.RFC3339Nano), r.Reason})
	}
	return writeRecords(c.App.Writer, c.String("format"), header, recs, rows)
}

// priceChanges adds to a dry run's changes what each adds to the bill, when
// a plan prices it (invoice.PriceChanges).
func priceChanges(ctx context.Context, db *schema.DB, cfg *config.Config, changes []ledger.Change) error {
	pr, _, err := invoice.LoadPricing(ctx, db, cfg.Catalog, cfg.Customers.DefaultPlan)
	if err != nil {
		return err
	}
	return invoice.PriceChanges(ctx, db, pr, ledger.NewMeters(cfg.Meters), changes)
}

func writeChanges(c *cli.Context, changes []ledger.Change) error {
	header := []string{"customer", "meter", "period", "before", "after", "change"}
	// Money columns only when a plan priced a change.
	priced := slices.ContainsFunc(changes, func(ch ledger.Change) bool { return ch.Currency != "" })
	if priced {
		header = append(header, "money", "currency")
	}
	var recs [][]string
	for _, ch := range changes {
		rec := []string{ch.Customer, ch.Meter, ch.Period, ch.Before.String(), ch.After.String(), ch.Change.String()}
		if priced {
			rec = append(rec, orDash(ch.Money), orDash(ch.Currency))
		}
		recs = append(recs, rec)
	}
	if changes == nil {
		changes = []ledger.Change{}
	}
	return writeRecords(c.App.Writer, c.String("format"), header, recs, changes)
}

// bulkCorrect is void --where and amend --remap: select, show or confirm,
// then one op per event through CorrectAll.
func bulkCorrect(c *cli.Context, remap bool) error {
	provider := c.String("provider")
	if provider == "" {
		return usageErrorf(c, "--provider is required to select events")
	}
	if strings.TrimSpace(c.String("reason")) == "" {
		return usageErrorf(c, "--reason is required: say why the events are corrected")
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	meters := ledger.NewMeters(cfg.Meters)
	loc, err := zoneOf(c, cfg)
	if err != nil {
		return err
	}
	p := ledger.UsageParams{From: c.String("from"), To: c.String("to"), TZ: loc.String()}
	if w := c.String("where"); w != "" {
		for _, kv := range strings.Split(w, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			switch {
			case ok && k == "customer" && v != "":
				p.Customer = v
			case ok && k == "meter" && v != "":
				p.Meter = v
			default:
				return usageErrorf(c, "--where: %q: want customer=ID or meter=NAME", kv)
			}
		}
	}
	q, err := p.Query(meters)
	if err != nil {
		return flagError(err)
	}
	if q.From.IsZero() || q.To.IsZero() {
		return usageErrorf(c, "--from and --to are required to select events")
	}
	zone := q.Zone
	if zone == nil {
		zone = time.UTC
	}
	actor := c.String("actor")
	if actor == "" {
		actor = defaultActor()
	}
	f := schema.LedgerFilter{From: q.From.UnixMilli(), To: q.To.UnixMilli(), Customer: q.Customer, Meter: q.Meter}
	dry := c.Bool("dry-run")
	db, w, err := openCustody(c.Context, cfg, dry)
	if err != nil {
		return err
	}
	defer closeCustody(db, w)
	ids, err := ledger.SelectEvents(c.Context, db, provider, f)
	if err != nil {
		return err
	}
	var ops []custody.Op
	var changes []ledger.Change
	void := ledger.Void{Provider: provider, Reason: c.String("reason"), Actor: actor}
	if remap {
		mapper := ledger.NewMapper(cfg.Usage, cfg.MeterNames())
		plan, err := custody.PlanRemap(c.Context, db, provider, ids, custody.AmendEvent{Void: void, Mapper: mapper, Meters: meters,
			HandlerVersion: handlerVersion(mapper)}, zone)
		if err != nil {
			return err
		}
		for _, err := range plan.Refused {
			fmt.Fprintf(c.App.ErrWriter, "left alone: %v\n", err)
		}
		for i, a := range plan.Ops {
			ops, changes = append(ops, a), append(changes, plan.Changes[i]...)
		}
	} else {
		for _, id := range ids {
			v := &custody.VoidEvent{Void: void, Meters: meters}
			v.Void.EventID = id
			recs, err := db.EventLedgerRows(c.Context, provider, id)
			if err != nil {
				return err
			}
			ops, changes = append(ops, v), append(changes, ledger.Changes(ledger.StoredRows(recs), nil, meters, zone)...)
		}
	}
	changes = ledger.MergeChanges(changes)
	if err := priceChanges(c.Context, db, cfg, changes); err != nil {
		return err
	}
	if dry || len(ops) == 0 {
		fmt.Fprintf(c.App.ErrWriter, "%s selected; nothing written\n", plural(len(ops), "1 event", fmt.Sprintf("%d events", len(ops))))
		return writeChanges(c, changes)
	}
	if !c.Bool("yes") {
		if err := writeChanges(c, changes); err != nil {
			return err
		}
		fmt.Fprintf(c.App.ErrWriter, "correct %d events as shown? type yes to apply: ", len(ops))
		answer, _ := bufio.NewReader(c.App.Reader).ReadString('\n')
		if strings.TrimSpace(answer) != "yes" {
			return errors.New("not confirmed: nothing was written")
		}
	}
	res, err := custody.CorrectAll(c.Context, w, ops)
	fmt.Fprintf(c.App.Writer, "corrected %d, already voided %d, failed %d\n", res.Corrected, res.AlreadyVoided, len(res.Failed))
	for _, ferr := range res.Failed {
		fmt.Fprintf(c.App.ErrWriter, "failed (nothing written for it): %v\n", ferr)
	}
	if err == nil && len(res.Failed) > 0 {
		err = fmt.Errorf("%d events failed: run the same command again to retry them", len(res.Failed))
	}
	return err
}
