package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/redact"
	"github.com/hookledger/hookledger/schema"
)

func forwardCommand() *cli.Command {
	return &cli.Command{
		Name:  "forward",
		Usage: "inspect and steer forwarding to destinations: status, list, retry, pause, resume",
		Description: "Every accepted event that matches a destination (destinations: in the config) gets an outbox message\n" +
			"in its custody transaction; serve's relay delivers it at least once, signed the Standard Webhooks way,\n" +
			"or marks it dead after max_attempts or max_age. Nothing is deleted: dead messages wait for `forward\n" +
			"retry`. These commands work beside a running serve (the same views are on the admin API).",
		Subcommands: []*cli.Command{
			forwardStatusCommand(),
			forwardListCommand(),
			forwardAttemptsCommand(),
			forwardRetryCommand(),
			forwardPauseCommand(true),
			forwardPauseCommand(false),
			forwardPurgeCommand(),
		},
	}
}

func forwardStatusCommand() *cli.Command {
	return &cli.Command{
		Name:  "status",
		Usage: "per destination: pending, oldest pending age, delivered, dead, last error",
		Flags: append(configFlags(), formatFlag()),
		Action: func(c *cli.Context) error {
			names, shown, db, w, err := openForward(c, true, "")
			if err != nil {
				return err
			}
			defer closeCustody(db, w)
			st, err := forward.Status(c.Context, db, names, shown, time.Now())
			if err != nil {
				return err
			}
			if len(st) == 0 && c.String("format") == "table" {
				fmt.Fprintln(c.App.Writer, "no destinations are configured (destinations: in the config) and the outbox is empty")
				return nil
			}
			header := []string{"destination", "state", "pending", "oldest_pending", "delivered", "dead", "last_error"}
			var rows [][]string
			for _, s := range st {
				state := "active"
				switch {
				case !s.Configured:
					state = "removed"
				case s.Paused:
					state = "paused"
				case s.Failures > 0: // probed one message at a time until one is delivered
					state = "backoff"
				}
				oldest := "-"
				if s.Pending > 0 {
					oldest = (time.Duration(s.OldestPendingAge) * time.Second).String()
				}
				rows = append(rows, []string{s.Destination, state, fmt.Sprint(s.Pending), oldest, fmt.Sprint(s.Delivered), fmt.Sprint(s.Dead), s.LastError})
			}
			return writeRecords(c.App.Writer, c.String("format"), header, rows, st)
		},
	}
}

func forwardListCommand() *cli.Command {
	return &cli.Command{
		Name:  "list",
		Usage: "list outbox messages of a destination, by status",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "destination", Aliases: []string{"d"}, EnvVars: []string{"HOOKLEDGER_DESTINATION"},
				Usage: "only this destination's messages"},
			&cli.StringFlag{Name: "status", EnvVars: []string{"HOOKLEDGER_STATUS"},
				Usage: "only messages in this status: pending, dead or delivered"},
			&cli.IntFlag{Name: "limit", Value: 100, Usage: "at most this many messages, oldest first"},
			formatFlag(),
		),
		Action: func(c *cli.Context) error {
			f := schema.OutboxFilter{Destination: c.String("destination"), Status: c.String("status"), Limit: c.Int("limit")}
			switch f.Status {
			case "", schema.OutboxPending, schema.OutboxDead, schema.OutboxDelivered:
			default:
				return usageErrorf(c, "--status: %q is not one of pending, dead, delivered", f.Status)
			}
			if f.Limit < 1 {
				return usageErrorf(c, "--limit: must be at least 1")
			}
			_, shown, db, w, err := openForward(c, true, f.Destination)
			if err != nil {
				return err
			}
			defer closeCustody(db, w)
			ms, err := forward.List(c.Context, db, f, shown)
			if err != nil {
				return err
			}
			// A push (Stripe) bills a ledger row or an invoice line: whose it
			// is, customer and meter, and the row with its reason.
			header := []string{"message_id", "destination", "status", "provider", "event_id", "event_type", "customer", "meter", "ledger",
				"attempts", "created_at", "last_status", "last_error"}
			rows := make([][]string, 0, len(ms))
			for _, m := range ms {
				last := ""
				if m.LastStatus != 0 {
					last = strconv.Itoa(m.LastStatus)
				}
				var customer, meter string
				if m.Push != nil {
					customer, meter = m.Push.Customer, m.Push.Meter
				}
				rows = append(rows, []string{m.MessageID, m.Destination, m.Status, m.Provider, m.EventID, m.EventType, customer, meter, m.Push.Whose(),
					strconv.Itoa(m.Attempts), m.CreatedAt.Format(time.RFC3339), last, m.LastError})
			}
			if ms == nil {
				ms = []forward.Message{}
			}
			return writeRecords(c.App.Writer, c.String("format"), header, rows, ms)
		},
	}
}

func forwardAttemptsCommand() *cli.Command {
	return &cli.Command{
		Name:      "attempts",
		Usage:     "every recorded attempt of one message: time, status code, latency, error, start of the response",
		ArgsUsage: "MESSAGE_ID",
		Flags:     append(configFlags(), formatFlag()),
		Action: func(c *cli.Context) error {
			args := positional(c)
			switch {
			case len(args) == 0:
				return usageErrorf(c, "give the MESSAGE_ID (from forward list)")
			case len(args) > 1:
				return usageErrorf(c, "unexpected argument %q", args[1])
			}
			_, shown, db, w, err := openForward(c, true, "")
			if err != nil {
				return err
			}
			defer closeCustody(db, w)
			as, err := forward.Attempts(c.Context, db, args[0], shown)
			if err != nil {
				return err
			}
			header := []string{"attempted_at", "status_code", "latency_ms", "error", "response"}
			rows := make([][]string, 0, len(as))
			for _, a := range as {
				resp := a.Response
				if c.String("format") == "table" { // one line per attempt; json and csv keep it whole
					resp = strings.Join(strings.Fields(resp), " ")
					if len(resp) > 60 {
						resp = resp[:60] + "…"
					}
				}
				rows = append(rows, []string{a.AttemptedAt.Format(time.RFC3339Nano), strconv.Itoa(a.StatusCode),
					strconv.FormatInt(a.LatencyMS, 10), a.Error, resp})
			}
			return writeRecords(c.App.Writer, c.String("format"), header, rows, as)
		},
	}
}

func forwardRetryCommand() *cli.Command {
	return &cli.Command{
		Name:      "retry",
		Usage:     "deliver dead messages again: one message, or a destination's dead messages",
		ArgsUsage: "[MESSAGE_ID]",
		Description: "With MESSAGE_ID, that message (dead or pending) is due at once. With --destination, every dead\n" +
			"message of the destination is (--since: only those that became pending within that long, or since\n" +
			"an RFC 3339 time). A retried message gets a fresh max_attempts and max_age, keeps its message id\n" +
			"(webhook-id), and the destination's backoff ends. serve's relay picks them up within a second.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "destination", Aliases: []string{"d"}, EnvVars: []string{"HOOKLEDGER_DESTINATION"},
				Usage: "retry this destination's dead messages"},
			&cli.StringFlag{Name: "since", EnvVars: []string{"HOOKLEDGER_SINCE"},
				Usage: "with --destination: only messages pending since this long ago (e.g. 24h, 7d) or this RFC 3339 time"},
			formatFlag(),
		),
		Action: func(c *cli.Context) error {
			args := positional(c)
			sel := schema.OutboxRetry{Destination: c.String("destination")}
			switch {
			case len(args) > 1:
				return usageErrorf(c, "unexpected argument %q", args[1])
			case len(args) == 1 && sel.Destination != "":
				return usageErrorf(c, "give MESSAGE_ID or --destination, not both")
			case len(args) == 0 && sel.Destination == "":
				return usageErrorf(c, "give MESSAGE_ID or --destination D")
			case len(args) == 1 && c.String("since") != "":
				return usageErrorf(c, "--since goes with --destination")
			case len(args) == 1:
				sel.MessageID = args[0]
			}
			return retryMessages(c, sel)
		},
	}
}

// retryMessages retries what sel selects, with --since, and prints how many
// (forward retry, stripe retry).
// retryMessages makes the dead messages sel selects due again, of
// sel.Destination and of each of more (stripe retry: the pushes and the
// invoices).
func retryMessages(c *cli.Context, sel schema.OutboxRetry, more ...string) error {
	if s := c.String("since"); s != "" {
		t, err := parseSince(s, time.Now())
		if err != nil {
			return usageErrorf(c, "--since: %v", err)
		}
		sel.Since = t.UnixMilli()
	}
	_, _, db, w, err := openForward(c, false, sel.Destination)
	if err != nil {
		return err
	}
	defer closeCustody(db, w)
	var n int64
	for _, dest := range append([]string{sel.Destination}, more...) {
		sel.Destination = dest
		m, err := forward.Retry(c.Context, w, sel, time.Now())
		if err != nil {
			return err
		}
		n += m
	}
	return writeRecords(c.App.Writer, c.String("format"), []string{"retried"}, [][]string{{fmt.Sprint(n)}},
		map[string]int64{"retried": n})
}

func forwardPurgeCommand() *cli.Command {
	return &cli.Command{
		Name:  "purge",
		Usage: "delete a destination's dead messages for good (they are never delivered)",
		Description: "Dead messages are kept until an operator acts: `forward retry` delivers them again, purge gives\n" +
			"them up. With --before, only those that became pending before that long ago (e.g. 30d) or that\n" +
			"RFC 3339 time. The receipts stay, and retention may prune them once nothing else holds them.",
		Flags: append(configFlags(),
			&cli.StringFlag{Name: "destination", Aliases: []string{"d"}, Required: true, EnvVars: []string{"HOOKLEDGER_DESTINATION"},
				Usage: "purge this destination's dead messages"},
			&cli.StringFlag{Name: "before", Usage: "only messages pending since before this long ago (e.g. 30d) or this RFC 3339 time"},
			formatFlag(),
		),
		Action: func(c *cli.Context) error {
			before := time.Now()
			if s := c.String("before"); s != "" {
				t, err := parseSince(s, before)
				if err != nil {
					return usageErrorf(c, "--before: %v", err)
				}
				before = t
			}
			_, _, db, w, err := openForward(c, false, c.String("destination"))
			if err != nil {
				return err
			}
			defer closeCustody(db, w)
			n, err := forward.Purge(c.Context, w, c.String("destination"), before)
			if err != nil {
				return err
			}
			return writeRecords(c.App.Writer, c.String("format"), []string{"purged"}, [][]string{{fmt.Sprint(n)}},
				map[string]int64{"purged": n})
		},
	}
}

// parseSince reads a duration back from now (24h, 7d) or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := config.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("want a positive duration such as 24h or 7d, or an RFC 3339 time, got %q", s)
	}
	return now.Add(-d), nil
}

func forwardPauseCommand(pause bool) *cli.Command {
	name, usage := "pause", "stop delivering to a destination; its messages are kept and it goes on receiving new ones"
	if !pause {
		name, usage = "resume", "deliver to a paused destination again, at once (its backoff ends)"
	}
	return &cli.Command{
		Name:      name,
		Usage:     usage,
		ArgsUsage: "DESTINATION",
		Flags:     configFlags(),
		Action: func(c *cli.Context) error {
			args := positional(c)
			switch {
			case len(args) == 0:
				return usageErrorf(c, "give the DESTINATION to %s", name)
			case len(args) > 1:
				return usageErrorf(c, "unexpected argument %q", args[1])
			}
			dest := args[0]
			_, _, db, w, err := openForward(c, false, dest)
			if err != nil {
				return err
			}
			defer closeCustody(db, w)
			if err := forward.SetPaused(c.Context, w, dest, pause, time.Now()); err != nil {
				return err
			}
			if pause {
				fmt.Fprintf(c.App.Writer, "paused %s: its messages are kept; `hookledger forward resume %s` delivers them\n", dest, dest)
			} else {
				fmt.Fprintf(c.App.Writer, "resumed %s\n", dest)
			}
			return nil
		},
	}
}

// openForward opens the database (with a writer unless readOnly) for a
// forward command and returns the configured destinations and the secrets
// the views scrub (forward.Secrets); when dest is set it must be a
// destination the config or the outbox knows.
func openForward(c *cli.Context, readOnly bool, dest string) (names []string, shown *redact.Secrets, db *schema.DB, w *custody.Writer, err error) {
	cfg, err := commandConfig(c)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if db, w, err = openCustody(c.Context, cfg, readOnly); err != nil {
		return nil, nil, nil, nil, err
	}
	names = forward.Names(cfg.OutboxDestinations())
	if dest != "" {
		if err := forward.CheckDestination(c.Context, db, names, dest); err != nil {
			closeCustody(db, w)
			if c.IsSet("destination") {
				err = fmt.Errorf("--destination: %w", err)
			}
			return nil, nil, nil, nil, err
		}
	}
	return names, forward.Secrets(cfg), db, w, nil
}
