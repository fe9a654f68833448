package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
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
			"rows of sum and count meters can be voided; correct others with adjust.",
		Flags:  append(configFlags(), correctionFlags()...),
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
			"per customer, meter and month.",
		Flags: append(configFlags(), append(correctionFlags(),
			&cli.StringSliceFlag{Name: "set", Usage: "PATH=VALUE: set a field of the stored body (a gjson path, e.g. data.customer=cus_9); repeatable"},
			&cli.StringFlag{Name: "body", Usage: "file holding the whole corrected body"},
			&cli.BoolFlag{Name: "dry-run", Usage: "show the change per customer, meter and month; write nothing"},
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
	v, err := correction(c)
	if err != nil {
		return err
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
	op := &custody.VoidEvent{Void: v, Meters: ledger.NewMeters(cfg.Meters)}
	if err := w.Submit(c.Context, op); err != nil {
		return err
	}
	return writeLedgerRows(c, op.Rows)
}

func amendAction(c *cli.Context) error {
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
		loc, err := ledger.LoadZone(c.String("tz"))
		if err != nil {
			return fmt.Errorf("--tz: %w", err)
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
	return writeLedgerRows(c, append(op.Voids, rowPointers(ledger.StoredRows(rows))...))
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

func writeChanges(c *cli.Context, changes []ledger.Change) error {
	header := []string{"customer", "meter", "period", "before", "after", "change"}
	var recs [][]string
	for _, ch := range changes {
		recs = append(recs, []string{ch.Customer, ch.Meter, ch.Period, ch.Before.String(), ch.After.String(), ch.Change.String()})
	}
	if changes == nil {
		changes = []ledger.Change{}
	}
	return writeRecords(c.App.Writer, c.String("format"), header, recs, changes)
}
