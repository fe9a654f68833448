package cli

import (
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/reconcile"
)

// msTime prints stored unix-millisecond times in full.
const msTime = "2006-01-02T15:04:05.000Z07:00"

func auditCommand() *cli.Command {
	return &cli.Command{
		Name:  "audit",
		Usage: "custody checks",
		Subcommands: []*cli.Command{{
			Name:  "mismatches",
			Usage: "duplicates whose body differed from the stored original, with both digests and times",
			Description: "An authenticated delivery that reuses a stored event id with different bytes has no effect (the\n" +
				"original wins) and is recorded as payload_mismatch. Expected after reconcile inserted an event from\n" +
				"the provider's API (original_source reconcile: the API's JSON bytes differ from the webhook's);\n" +
				"anything else deserves a look.",
			Flags: append(configFlags(),
				&cli.StringFlag{Name: "provider", Aliases: []string{"p"}, EnvVars: []string{"HOOKLEDGER_PROVIDER"},
					Usage: "only this provider"},
				&cli.StringFlag{Name: "since", EnvVars: []string{"HOOKLEDGER_SINCE"},
					Usage: "only mismatching deliveries received within this long (e.g. 7d)"},
				formatFlag(),
			),
			Action: func(c *cli.Context) error {
				format := c.String("format")
				f := reconcile.MismatchFilter{Provider: c.String("provider")}
				if s := c.String("since"); s != "" {
					d, err := config.ParseDuration(s)
					if err != nil || d <= 0 {
						return fmt.Errorf("--since: want a positive duration such as 72h or 7d, got %q", s)
					}
					f.Since = time.Now().Add(-d)
				}
				if f.Provider != "" {
					cfg, err := commandConfig(c)
					if err != nil {
						return err
					}
					if _, err := lookupProvider(cfg, f.Provider); err != nil {
						return err
					}
				}
				db, err := openExisting(c)
				if err != nil {
					return err
				}
				defer db.Close()
				ms, err := reconcile.Mismatches(c.Context, db, f)
				if err != nil {
					return err
				}
				if ms == nil {
					ms = []reconcile.Mismatch{}
				}
				header := []string{"provider", "event_id", "original_source", "original_received_at", "original_sha256",
					"duplicate_received_at", "duplicate_sha256", "remote_addr"}
				rows := make([][]string, len(ms))
				for i, m := range ms {
					rows[i] = []string{m.Provider, m.EventID, m.OriginalSource, m.OriginalTime.Format(msTime), m.OriginalHex,
						m.DuplicateTime.Format(msTime), m.DuplicateHex, m.RemoteAddr}
				}
				return writeRecords(c.App.Writer, format, header, rows, ms)
			},
		}},
	}
}
