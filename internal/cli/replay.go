package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/ledger"
)

func replayCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "re-apply stored receipts with the current mapping (e.g. after fixing it)",
		Description: "Selects one event (--event) or every receipt with a status (--status failed|ignored, optionally\n" +
			"received within --since) and runs the current mapping on its stored body, in the writer's transaction:\n" +
			"a receipt that is already applied is never applied again. Each replay is recorded in the replays table;\n" +
			"the receipt keeps its source. Receipts whose body was pruned cannot be replayed and are counted.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "provider", Aliases: []string{"p"}, Required: true, EnvVars: []string{"HOOKLEDGER_PROVIDER"},
				Usage: "the provider whose receipts to replay (an ingest API key's events: api:KEYNAME)"},
			&cli.StringFlag{Name: "event", EnvVars: []string{"HOOKLEDGER_EVENT"},
				Usage: "replay this event id"},
			&cli.StringFlag{Name: "status", EnvVars: []string{"HOOKLEDGER_STATUS"},
				Usage: "replay every receipt with this status: failed or ignored"},
			&cli.StringFlag{Name: "since", EnvVars: []string{"HOOKLEDGER_SINCE"},
				Usage: "with --status: only receipts received within this long (e.g. 72h, 7d)"},
			formatFlag(),
		),
		Action: replayAction,
	}
}

func replayAction(c *cli.Context) error {
	format := c.String("format")
	f := custody.ReplayFilter{Provider: c.String("provider"), EventID: c.String("event"), Status: custody.Status(c.String("status"))}
	switch {
	case (f.EventID == "") == (f.Status == ""):
		return errors.New("give either --event ID or --status failed|ignored")
	case f.Status != "" && f.Status != custody.StatusFailed && f.Status != custody.StatusIgnored:
		return fmt.Errorf("--status: %q is not failed or ignored (applied receipts are never replayed)", f.Status)
	case f.EventID != "" && c.String("since") != "":
		return errors.New("--since selects by status; it does not go with --event")
	}
	if s := c.String("since"); s != "" {
		d, err := config.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("--since: want a positive duration such as 72h or 7d, got %q", s)
		}
		f.Since = time.Now().Add(-d)
	}
	cfg, err := commandConfig(c)
	if err != nil {
		return err
	}
	// An ingest API key's scope (api:NAME) is no configured provider.
	if !ingest.IsScope(f.Provider) {
		if _, err := lookupProvider(cfg, f.Provider); err != nil {
			return err
		}
	}
	db, w, err := openCustody(c.Context, cfg, false)
	if err != nil {
		return err
	}
	defer closeCustody(db, w)
	mapper := ledger.NewMapper(cfg.Usage, cfg.MeterNames())
	rep, runErr := custody.ReplayReceipts(c.Context, db, w, mapper, handlerVersion(mapper), f)
	if rep == nil {
		return runErr
	}
	header := []string{"provider", "selected", "applied", "still_failed", "ignored", "already_applied", "pruned", "not_found", "errors"}
	row := []string{rep.Provider, itoa(rep.Selected), itoa(rep.Applied), itoa(rep.StillFailed), itoa(rep.Ignored),
		itoa(rep.AlreadyApplied), itoa(rep.Pruned), itoa(rep.NotFound), itoa(rep.Errors)}
	if err := writeRecords(c.App.Writer, format, header, [][]string{row}, rep); err != nil {
		return err
	}
	if format == "table" {
		for _, fl := range rep.Failures {
			fmt.Fprintf(c.App.Writer, "still failing: %s: %s\n", fl.EventID, fl.Error)
		}
	}
	if runErr == nil && f.EventID != "" && rep.NotFound > 0 {
		runErr = fmt.Errorf("no receipt for %s/%s", f.Provider, f.EventID)
	}
	return runErr
}
