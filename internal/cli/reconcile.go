package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/reconcile"
)

func reconcileCommand() *cli.Command {
	return &cli.Command{
		Name:  "reconcile",
		Usage: "list a provider's events and insert the ones its webhooks missed",
		Description: "Lists the provider's events over a bounded window (its reconcile settings in the config: the Stripe\n" +
			"events API, GitHub webhook deliveries, or a JSONL file) and compares them with the stored receipts.\n" +
			"A missing event is inserted through the same idempotent path as a webhook (receipt source=reconcile);\n" +
			"a missing GitHub delivery is redelivered by GitHub on request, asked once per event. After each complete\n" +
			"page the checkpoint moves; a run that fails resumes there. Without --since a run starts where the last\n" +
			"complete one ended, minus the configured overlap, and looks back at most the configured window.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "provider", Aliases: []string{"p"}, Required: true, EnvVars: []string{"HOOKLEDGER_PROVIDER"},
				Usage: "the provider to reconcile (a name under providers in the config)"},
			&cli.StringFlag{Name: "since", EnvVars: []string{"HOOKLEDGER_SINCE"},
				Usage: "look back this far from now (e.g. 72h, 3d) instead of continuing from the checkpoint"},
			&cli.BoolFlag{Name: "dry-run", EnvVars: []string{"HOOKLEDGER_DRY_RUN"},
				Usage: "list and compare only: insert nothing, ask for no redelivery, leave the checkpoint"},
			&cli.StringFlag{Name: "file", EnvVars: []string{"HOOKLEDGER_RECONCILE_FILE"},
				Usage: "read events from this JSONL file (one raw event per line) instead of the provider's configured source"},
			formatFlag(),
		),
		Action: reconcileAction,
	}
}

func reconcileAction(c *cli.Context) error {
	format := c.String("format")
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	p, err := lookupProvider(cfg, c.String("provider"))
	if err != nil {
		return err
	}
	if rc := p.Reconcile; c.String("file") == "" && rc != nil && rc.APIKey.Value == "" && len(cfg.Unresolved) > 0 {
		return fmt.Errorf("provider %q: reconcile.api_key is not resolved: %s", p.Name, strings.Join(cfg.Unresolved, "; "))
	}
	since, err := sinceFlag(c, cfg)
	if err != nil {
		return err
	}
	var src reconcile.Source
	if f := c.String("file"); f != "" {
		fs := &reconcile.FileSource{Path: f, MaxDepth: p.MaxDepth}
		if rc := p.Reconcile; rc != nil && rc.Source == "file" {
			fs.IDPath, fs.TypePath, fs.TimePath, fs.Types = rc.IDPath, rc.TypePath, rc.TimePath, rc.Types
		}
		src = fs
	} else if p.Reconcile == nil {
		return fmt.Errorf("provider %q has no reconcile settings: add providers[].reconcile to the config "+
			"(source stripe, github or file), or pass --file with a JSONL export", p.Name)
	}
	dryRun := c.Bool("dry-run")
	db, w, err := openCustody(c.Context, cfg, dryRun)
	if err != nil {
		return err
	}
	defer closeCustody(db, w)
	mapper := ledger.NewMapper(cfg.Usage, cfg.MeterNames())
	r, err := reconcile.ForProvider(*p, src, reconcile.Reconciler{DB: db, Writer: w, Mapper: mapper, HandlerVersion: handlerVersion(mapper)})
	if err != nil {
		return err
	}
	ctx, stop := signalContext(c)
	defer stop()
	rep, runErr := r.Run(ctx, reconcile.Options{Since: since, DryRun: dryRun})
	if ctx.Err() != nil {
		runErr = interrupted(fmt.Sprintf("%d events seen, %d inserted, %d redeliveries requested before the stop; "+
			"the checkpoint holds the last complete page, so the next run resumes there (the counts below are what was done)",
			rep.Seen, rep.Inserted, rep.RedeliveryRequested))
	}
	header := []string{"provider", "from", "to", "pages", "seen", "already_present", "inserted", "redelivery_requested",
		"redelivery_pending", "failed"}
	row := []string{rep.Provider, rep.WindowFrom.Format(time.RFC3339), rep.WindowTo.Format(time.RFC3339), itoa(rep.Pages),
		itoa(rep.Seen), itoa(rep.AlreadyPresent), itoa(rep.Inserted), itoa(rep.RedeliveryRequested), itoa(rep.RedeliveryPending), itoa(rep.Failed)}
	if err := writeRecords(c.App.Writer, format, header, [][]string{row}, rep); err != nil {
		return err
	}
	if format == "table" {
		out := c.App.Writer
		if rep.Resumed {
			fmt.Fprintln(out, "resumed an interrupted run from its checkpoint")
		}
		if dryRun {
			fmt.Fprintln(out, "dry run: nothing was written or requested; inserted and redelivery_requested are what a run would do")
		}
		if rep.MappingFailed > 0 {
			fmt.Fprintf(out, "%d inserted events did not fit the mapping (status failed): fix it, then hookledger replay --provider %s --status failed\n",
				rep.MappingFailed, rep.Provider)
		}
	}
	return runErr
}

// handlerVersion is recorded on every receipt this binary applies.
func handlerVersion(m *ledger.Mapper) string { return custody.HandlerVersion(build.Version, m) }
