package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"
	"github.com/xrash/smetrics"
)

// Exit codes, the same for every command.
const (
	exitOK          = 0
	exitFailed      = 1   // the command failed (storage, network, bad config, missing database, ...)
	exitUsage       = 2   // the command line is wrong: unknown command or flag, unexpected or missing argument
	exitProblem     = 3   // the command ran and reports a problem: verify/dispute found a broken row or body, the replica is missing or behind
	exitInterrupted = 130 // Ctrl-C or SIGTERM stopped the command (128 + SIGINT)
)

// usageError is a wrong command line. Main prints it with the command's
// usage line and exits 2.
type usageError struct {
	err   error
	usage string // "hookledger invoice show [options] ID"
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usageErrorf is a usage error of the command c is running.
func usageErrorf(c *cli.Context, format string, args ...any) error {
	if len(c.Lineage()) <= 1 { // the app itself
		return &usageError{err: fmt.Errorf(format, args...), usage: c.App.Name + " COMMAND [options]"}
	}
	return &usageError{err: fmt.Errorf(format, args...), usage: usageLine(c.Command)}
}

// groups are the commands that only hold subcommands (invoice, dev, ...).
var groups = map[*cli.Command]bool{}

func usageLine(cmd *cli.Command) string {
	if cmd == nil {
		return ""
	}
	line := cmd.HelpName
	if line == "" {
		line = cmd.Name
	}
	switch {
	case groups[cmd]:
		line += " COMMAND [options]"
	case len(cmd.VisibleFlags()) > 0:
		line += " [options]"
	}
	if cmd.ArgsUsage != "" {
		line += " " + cmd.ArgsUsage
	}
	return line
}

// exitError carries an exit code other than 1: a problem found (3) or an
// interruption (130).
type exitError struct {
	err  error
	code int
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// problem marks err as a finding (a broken chain link, an invalid body, a
// replica behind): the command worked, and what it found exits 3.
func problem(err error) error { return &exitError{err: err, code: exitProblem} }

// interrupted is the error of a long command stopped by a signal: done says
// what was and was not done, and the command exits 130.
func interrupted(done string) error {
	return &exitError{err: errors.New("interrupted: " + done), code: exitInterrupted}
}

// signalContext is c's context, ended by SIGINT or SIGTERM: a long command
// stops, says what was and was not done (interrupted), and exits 130.
func signalContext(c *cli.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
}

// exitStatus is the process exit code for a command's error.
func exitStatus(err error) int {
	var ue *usageError
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	}
	return exitFailed
}

// printError writes err the way Main reports it: one line, and for a usage
// error the command's usage line.
func printError(w io.Writer, err error) {
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(w, "hookledger:", msg)
	}
	var ue *usageError
	if errors.As(err, &ue) && ue.usage != "" {
		fmt.Fprintf(w, "usage: %s (see --help)\n", ue.usage)
	}
}

// argsKey holds a command's positional arguments in its context.
type argsKey struct{}

// positional returns the positional arguments of a command that declares
// ArgsUsage, with any flags among them already applied (see strictArgs).
func positional(c *cli.Context) []string {
	args, _ := c.Context.Value(argsKey{}).([]string)
	return args
}

// strictArgs makes every command in the tree honest about its command line,
// in one place:
//   - a command without ArgsUsage takes no positional arguments: a stray one
//     is a usage error, and one close to a subcommand's name suggests it
//     ("usage lat": did you mean "late"?);
//   - a command with ArgsUsage lets flags follow its arguments (`invoice show 4
//     --format json`); its Action reads them with positional(c);
//   - a command that only groups subcommands refuses an unknown one, with a
//     suggestion, and shows its help when given none;
//   - a flag the parser refuses, or a Required flag left unset, is a usage
//     error of one line instead of the whole help screen.
//
// Required flags are checked here rather than by urfave/cli, whose check
// prints the full help before the error.
func strictArgs(cmds []*cli.Command) {
	for _, cmd := range cmds {
		strictArgs(cmd.Subcommands)
		cmd.OnUsageError = onUsageError
		required := takeRequired(cmd.Flags)
		action, hasAction, hasSubs := cmd.Action, cmd.Action != nil, len(cmd.Subcommands) > 0
		takesArgs := cmd.ArgsUsage != ""
		groups[cmd] = !hasAction
		cmd.Action = func(c *cli.Context) error {
			args := c.Args().Slice()
			switch {
			case !hasAction && len(args) == 0:
				return cli.ShowSubcommandHelp(c)
			case !hasAction:
				return unknownCommand(c, "unknown command", args[0])
			case takesArgs:
				var err error
				if args, err = interspersed(c, c.Command.Flags); err != nil {
					return err
				}
				c.Context = context.WithValue(c.Context, argsKey{}, args)
			case len(args) > 0 && hasSubs:
				return unknownCommand(c, "unexpected argument", args[0]) // `usage lat`: did you mean late?
			case len(args) > 0:
				return usageErrorf(c, "unexpected argument %q", args[0])
			}
			for _, name := range required {
				if !c.IsSet(name) {
					return usageErrorf(c, "--%s is required", name)
				}
			}
			return action(c)
		}
	}
}

// rootAction is the app's own action: help without arguments, else the
// first argument is not a command.
func rootAction(c *cli.Context) error {
	if !c.Args().Present() {
		return cli.ShowAppHelp(c)
	}
	return unknownCommand(c, "unknown command", c.Args().First())
}

// takeRequired clears Required on flags and returns their names.
func takeRequired(flags []cli.Flag) []string {
	var names []string
	for _, f := range flags {
		switch f := f.(type) {
		case *cli.StringFlag:
			if f.Required {
				f.Required, names = false, append(names, f.Name)
			}
		case *cli.IntFlag:
			if f.Required {
				f.Required, names = false, append(names, f.Name)
			}
		default:
			if r, ok := f.(cli.RequiredFlag); ok && r.IsRequired() {
				panic(fmt.Sprintf("strictArgs: Required on a %T: add it to takeRequired", f))
			}
		}
	}
	return names
}

// unknownCommand refuses name as a subcommand of the running command.
func unknownCommand(c *cli.Context, what, name string) error {
	var cmds []*cli.Command
	if c.Command != nil {
		cmds = c.Command.Subcommands
	}
	if c.Command == nil || c.Command.HelpName == c.App.HelpName {
		cmds = c.App.Commands
	}
	if s := suggest(visible(cmds), name); s != "" {
		return usageErrorf(c, "%s %q: did you mean %q?", what, name, s)
	}
	return usageErrorf(c, "%s %q", what, name)
}

func visible(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	return names
}

// suggest is the name closest to typed, or "" when none is close. urfave/cli
// uses the same Jaro-Winkler measure (its SuggestCommand), but always names
// its best candidate, however far; a suggestion must be plausible.
func suggest(names []string, typed string) string {
	const minScore = 0.8
	best, score := "", minScore
	for _, n := range names {
		if s := smetrics.JaroWinkler(n, typed, 0.7, 4); s >= score {
			best, score = n, s
		}
	}
	return best
}

// onUsageError replaces urfave/cli's "Incorrect Usage" message and help
// screen with one line, naming the closest flag for a misspelt one.
func onUsageError(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimLeft(name, "-")
		if s := suggestFlag(c.Command.VisibleFlags(), name, valueAfter(c, name)); s != "" {
			msg += fmt.Sprintf(": did you mean -%s?", s)
		}
	}
	return usageErrorf(c, "%s", msg)
}

// valueAfter is the argument that followed the unknown flag --name, read
// from the parent context's arguments (the failing context has none yet);
// "" when there is none or it is a flag itself.
func valueAfter(c *cli.Context, name string) string {
	lineage := c.Lineage()
	if len(lineage) < 2 || lineage[1] == nil {
		return ""
	}
	args := lineage[1].Args().Slice()
	for i, a := range args {
		if strings.TrimLeft(a, "-") == name && strings.HasPrefix(a, "-") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			return args[i+1]
		}
	}
	return ""
}

// suggestFlag is the flag a misspelt name most likely meant: among the
// plausible names, one whose value would parse wins (`--form 2026-11` is
// --from, not --format), then the closest. value is the argument after the
// misspelt flag, "" if none (the flag parser stops right after the name it
// does not know).
func suggestFlag(flags []cli.Flag, typed, value string) string {
	var fits, all []string
	for _, f := range flags {
		for _, n := range f.Names() {
			all = append(all, n)
			if value != "" && valueFits(f, n, value) {
				fits = append(fits, n)
			}
		}
	}
	s := suggest(fits, typed)
	if s == "" {
		s = suggest(all, typed)
	}
	if s == "" {
		return ""
	}
	return "-" + s
}

// valueFits reports whether flag f, named name, would take value: its type
// parses it and, for --format, it is one of the formats.
func valueFits(f cli.Flag, name, value string) bool {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := f.Apply(fs); err != nil || fs.Parse([]string{"-" + name + "=" + value}) != nil {
		return false
	}
	return name != "format" || slices.Contains(formats, value)
}

// interspersed lets flags follow the positional arguments, as in
// `dispute export invoice:12/1 --out x.zip`: urfave/cli v2 stops parsing flags
// at the first argument, so the rest are set here, and their own checks
// (e.g. --format's) run as if the parser had set them.
func interspersed(c *cli.Context, flags []cli.Flag) ([]string, error) {
	byName := map[string]cli.Flag{}
	for _, f := range flags {
		for _, n := range f.Names() {
			byName[n] = f
		}
	}
	var positional []string
	args := c.Args().Slice()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			positional = append(positional, a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		f, ok := byName[name]
		if !ok {
			return nil, onUsageError(c, fmt.Errorf("flag provided but not defined: %s", a), true)
		}
		if _, isBool := f.(*cli.BoolFlag); isBool && !hasValue {
			value, hasValue = "true", true
		}
		if !hasValue {
			if i+1 == len(args) {
				return nil, usageErrorf(c, "flag needs an argument: %s", a)
			}
			i++
			value = args[i]
		}
		if err := c.Set(name, value); err != nil {
			return nil, usageErrorf(c, "invalid value %q for flag %s: %v", value, a, err)
		}
		if af, ok := f.(cli.ActionableFlag); ok {
			if err := af.RunAction(c); err != nil {
				return nil, err
			}
		}
	}
	return positional, nil
}
