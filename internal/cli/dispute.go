package cli

import (
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/dispute"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

func disputeFormatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Value: "table", EnvVars: []string{"HOOKLEDGER_FORMAT"},
		Usage: "output as table (fits 100 columns) or json (everything, untruncated)"}
}

func disputePeriodFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "period", EnvVars: []string{"HOOKLEDGER_PERIOD"}, Usage: "the month of event time to explain, YYYY-MM"},
		&cli.StringFlag{Name: "tz", EnvVars: []string{"HOOKLEDGER_TZ"},
			Usage: "IANA zone of the month (default: the zone the customer's invoice for it was closed in, else invoicing.tz in the configuration, else UTC)"},
	}
}

func disputeCommand() *cli.Command {
	traceFlags := append(configFlags(), disputeFormatFlag())
	customerFlags := append(append(configFlags(), disputePeriodFlags()...), disputeFormatFlag())
	exportFlags := append(append(configFlags(),
		&cli.StringFlag{Name: "out", Aliases: []string{"o"}, EnvVars: []string{"HOOKLEDGER_DISPUTE_OUT"},
			Usage: "the zip file to write, e.g. dispute-invoice-12.zip"},
		&cli.BoolFlag{Name: "force", EnvVars: []string{"HOOKLEDGER_DISPUTE_FORCE"}, Usage: "replace --out if it exists"},
		&cli.StringFlag{Name: "customer", EnvVars: []string{"HOOKLEDGER_CUSTOMER"},
			Usage: "export a customer's period (with --period) instead of a TARGET"},
	), disputePeriodFlags()...)
	return &cli.Command{
		Name:      "dispute",
		Usage:     "trace a charge to its events, raw bodies and delivery attempts, and re-verify the signatures",
		ArgsUsage: "TARGET",
		Description: "TARGET is one of\n" +
			"  invoice:ID          a whole invoice\n" +
			"  invoice:ID/LINE     one invoice line (line numbers as in `hookledger invoice show ID`)\n" +
			"  row:ID              one ledger row\n" +
			"  PROVIDER:EVENT_ID   one event (event:PROVIDER/EVENT_ID when the provider is named invoice, row or event)\n\n" +
			"Shows the invoice line (period, cutoffs, quantity, digest recomputed and compared), the ledger rows it\n" +
			"covers (with their hash-chain links checked), each event's receipt and every delivery attempt, and\n" +
			"re-verifies each stored raw body against the provider's secrets in the current configuration:\n" +
			"valid; invalid (the body no longer hashes to the digest recorded on arrival); not verifiable (the\n" +
			"body is intact but no current secret verifies it, e.g. after a rotation); or body pruned by\n" +
			"retention. Reads only; safe while `serve` runs. Flags may follow TARGET.",
		Flags:  traceFlags,
		Action: disputeTrace,
		Subcommands: []*cli.Command{
			{
				Name:      "customer",
				Usage:     "every event behind a customer's charges for a month, with duplicates and adjustments",
				ArgsUsage: "CUSTOMER --period YYYY-MM",
				Description: "Lists the customer's invoice for the month (and any late lines it bills), late lines of later\n" +
					"invoices billing the month, and every ledger row of the month, billed or not, down to each\n" +
					"event's deliveries: the answer to \"why was I charged N\".",
				Flags:  customerFlags,
				Action: disputeCustomer,
			},
			{
				Name:      "export",
				Usage:     "write an evidence bundle (zip) anyone holding the webhook secret can check with openssl",
				ArgsUsage: "TARGET --out FILE.zip",
				Description: "The bundle holds manifest.json (the whole trace), each raw body and its signature headers exactly\n" +
					"as received, every attempt's headers, SHA256SUMS, and a README.txt with per-event openssl\n" +
					"commands that recompute the provider's signature. Exporting the same data twice gives\n" +
					"byte-identical files.",
				Flags:  exportFlags,
				Action: disputeExport,
			},
		},
	}
}

func disputeTrace(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "give one TARGET: %s", dispute.TargetForms)
	}
	format, err := disputeFormat(c)
	if err != nil {
		return err
	}
	tracer, done, err := newTracer(c)
	if err != nil {
		return err
	}
	defer done()
	if _, err := dispute.ParseTarget(args[0]); err != nil {
		return fmt.Errorf("dispute: %w", didYouMean(c, tracer, args[0], err))
	}
	tr, err := tracer.Trace(c.Context, args[0])
	if err != nil {
		return fmt.Errorf("dispute: %w", err)
	}
	if err := writeTrace(c.App.Writer, format, tr); err != nil {
		return err
	}
	return traceProblems(tr)
}

// traceProblems exits 3 when the trace found a problem (an invalid body, a
// broken chain link, an invoice that no longer matches): the output names
// each, and a script can tell "problem found" from "could not look".
func traceProblems(tr *dispute.Trace) error {
	if ps := tr.Summary.Problems; len(ps) > 0 {
		return problem(fmt.Errorf("dispute: %d problem(s) found; the first: %s", len(ps), ps[0]))
	}
	return nil
}

func disputeCustomer(c *cli.Context) error {
	args := positional(c)
	if len(args) != 1 {
		return usageErrorf(c, "give one CUSTOMER id and --period YYYY-MM")
	}
	format, err := disputeFormat(c)
	if err != nil {
		return err
	}
	tracer, done, err := newTracer(c)
	if err != nil {
		return err
	}
	defer done()
	tr, err := customerTrace(c, tracer, args[0])
	if err != nil {
		return err
	}
	if err := writeTrace(c.App.Writer, format, tr); err != nil {
		return err
	}
	return traceProblems(tr)
}

func customerTrace(c *cli.Context, tracer *dispute.Tracer, customer string) (*dispute.Trace, error) {
	label := c.String("period")
	if label == "" {
		return nil, usageErrorf(c, "--period is required: the month to explain, YYYY-MM")
	}
	tz := c.String("tz")
	if tz == "" {
		// The zone the customer's invoice for that month was closed in, so
		// "--period 2026-11" means the month that was billed.
		var invs []invoice.Invoice
		err := tracer.DB.View(c.Context, func(s *schema.ReadTx) error {
			var err error
			invs, err = invoice.ListInvoices(c.Context, s, invoice.InvoiceFilter{Customer: customer, Period: label})
			return err
		})
		if err != nil {
			return nil, err
		}
		if len(invs) > 0 {
			tz = invs[0].TZ
		} else if cfg, err := commandConfig(c); err != nil {
			return nil, err
		} else {
			tz = cfg.Invoicing.TZ // "" is UTC
		}
	}
	loc, err := ledger.LoadZone(tz)
	if err != nil {
		return nil, fmt.Errorf("--tz: %w", err)
	}
	p, err := ledger.MonthPeriod(label, loc)
	if err != nil {
		return nil, fmt.Errorf("--%w", err)
	}
	tr, err := tracer.Customer(c.Context, customer, p)
	if err != nil {
		return nil, fmt.Errorf("dispute customer: %w", err)
	}
	return tr, nil
}

func disputeExport(c *cli.Context) error {
	args := positional(c)
	customer := c.String("customer")
	switch {
	case customer == "" && len(args) != 1:
		return usageErrorf(c, "give one TARGET (%s) or --customer C --period YYYY-MM", dispute.TargetForms)
	case customer != "" && len(args) != 0:
		return usageErrorf(c, "give a TARGET or --customer, not both")
	}
	out := c.String("out")
	if out == "" {
		return usageErrorf(c, "--out is required: the zip file to write")
	}
	if _, err := os.Stat(out); err == nil && !c.Bool("force") {
		return fmt.Errorf("--out: %s exists; choose another name or pass --force to replace it", out)
	}
	tracer, done, err := newTracer(c)
	if err != nil {
		return err
	}
	defer done()
	if len(args) == 1 {
		if _, err := dispute.ParseTarget(args[0]); err != nil {
			return fmt.Errorf("dispute export: %w", didYouMean(c, tracer, args[0], err))
		}
	}
	var tr *dispute.Trace
	if customer != "" {
		tr, err = customerTrace(c, tracer, customer)
	} else {
		tr, err = tracer.Trace(c.Context, args[0])
		if err != nil {
			err = fmt.Errorf("dispute export: %w", err)
		}
	}
	if err != nil {
		return err
	}
	sum, size, err := writeFileAtomic(out, func(w io.Writer) error { return tracer.Verifier.WriteBundle(w, tr) })
	if err != nil {
		return fmt.Errorf("dispute export: %w", err)
	}
	s := tr.Summary
	fmt.Fprintf(c.App.Writer, "wrote %s (%d bytes, sha256 %x): %s, %d events, %d delivery attempts; bodies %s\n",
		out, size, sum, tr.Target, s.Events, s.Attempts, s.Bodies)
	return traceProblems(tr)
}

// writeFileAtomic writes through a temporary file in the same directory and
// renames it into place, so a failed export never leaves half a bundle.
func writeFileAtomic(path string, write func(io.Writer) error) (sum []byte, size int64, err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".hookledger-export-*")
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	if err = write(cw); err != nil {
		return nil, 0, err
	}
	if err = f.Sync(); err != nil {
		return nil, 0, err
	}
	// The bundle holds raw bodies: private, like the database it came from.
	// (CreateTemp makes it 0600 already; the Chmod states it, whatever umask.)
	if err = f.Chmod(0o600); err != nil {
		return nil, 0, err
	}
	if err = f.Close(); err != nil {
		return nil, 0, err
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return nil, 0, err
	}
	return h.Sum(nil), cw.n, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// didYouMean turns a bad target that is an event id without its provider
// into a question naming the targets it may mean; other errors stay as they are.
func didYouMean(c *cli.Context, tracer *dispute.Tracer, arg string, err error) error {
	if strings.Contains(arg, ":") {
		return err
	}
	if s := tracer.Suggest(c.Context, arg); len(s) > 0 {
		return fmt.Errorf("%w: %q names no provider: did you mean %s?", dispute.ErrBadTarget, arg, strings.Join(s, " or "))
	}
	return err
}

func disputeFormat(c *cli.Context) (string, error) {
	f := c.String("format")
	if f != "table" && f != "json" {
		return "", usageErrorf(c, "--format: %q is not one of table, json", f)
	}
	return f, nil
}

func writeTrace(w io.Writer, format string, tr *dispute.Trace) error {
	if format == "json" {
		return dispute.WriteJSON(w, tr)
	}
	return dispute.WriteTable(w, tr)
}

// newTracer opens the database read-only and builds the verifier from the
// providers' current secrets. It never generates a default secret: a
// dispute only reads. A secret it cannot resolve is named on stderr, and the
// bodies it would verify are reported not verifiable.
func newTracer(c *cli.Context) (*dispute.Tracer, func(), error) {
	cfg, err := commandConfig(c)
	if err != nil {
		return nil, nil, err
	}
	db, err := openExisting(c)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case cfg.Source == "" && len(cfg.Unresolved) > 0:
		fmt.Fprintln(c.App.ErrWriter, "hookledger: no configuration and no default secret found: signatures are reported not verifiable")
	default:
		for _, u := range cfg.Unresolved {
			// Only a provider's secret verifies a signature: an admin token
			// or a destination's secret the dispute does not use.
			if _, path, _ := strings.Cut(u, ": "); strings.HasPrefix(path, "providers[") {
				fmt.Fprintf(c.App.ErrWriter, "hookledger: %s:%s: signatures it would verify are reported not verifiable\n", cfg.Source, u)
			}
		}
	}
	v, err := dispute.NewVerifier(cfg.Providers)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return &dispute.Tracer{DB: db, Verifier: v, Meters: ledger.NewMeters(cfg.Meters)}, func() { db.Close() }, nil
}
