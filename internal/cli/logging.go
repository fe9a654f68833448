package cli

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// logFlags are serve's logging flags.
func logFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", Value: "info", EnvVars: []string{"HOOKLEDGER_LOG_LEVEL"},
			Usage: "minimum log level: debug, info, warn or error (debug adds one line per delivery attempt; info sums them up every --log-summary)"},
		&cli.DurationFlag{Name: "log-summary", Value: time.Minute, EnvVars: []string{"HOOKLEDGER_LOG_SUMMARY"},
			Usage: "how often to log the deliveries, one line per provider (requests, outcomes, failed receipts, refusals by reason, p99 and slowest reply); 0: never"},
		&cli.StringFlag{Name: "log-format", Value: "auto", EnvVars: []string{"HOOKLEDGER_LOG_FORMAT"},
			Usage: "log format: json, text, or auto (text when stderr is a terminal, else JSON for journald and log shippers)"},
	}
}

// newLogger builds the process logger writing to w. Secrets never reach it:
// the receiver logs ids, outcomes and timings, never a body or a key.
func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch strings.ToLower(format) {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "auto", "":
		if isTerminal(w) {
			return slog.New(slog.NewTextHandler(w, opts)), nil
		}
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json, text or auto", format)
}

// isTerminal reports whether w is an interactive terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}
