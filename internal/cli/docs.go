package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
)

// CLIReferenceFile is the generated CLI reference; TestCLIReferenceIsCurrent
// fails when it differs from what `hookledger docs cli` writes.
const CLIReferenceFile = "docs/cli.md"

// docsCommand is hidden: it exists for the repository, not for operators. It
// lives in package main because the reference is rendered from the *cli.App
// that newApp builds, and only package main can build it; a separate
// generator program would need the commands moved into a package first.
func docsCommand() *cli.Command {
	return &cli.Command{
		Name:   "docs",
		Usage:  "generate documentation from the commands themselves",
		Hidden: true,
		Subcommands: []*cli.Command{{
			Name:  "cli",
			Usage: "write the CLI reference (every command's --help) to " + CLIReferenceFile,
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "out", Value: CLIReferenceFile, Usage: "file to write, - for stdout"},
			},
			Action: func(c *cli.Context) error {
				ref, err := cliReference()
				if err != nil {
					return err
				}
				if c.String("out") == "-" {
					_, err = c.App.Writer.Write(ref)
					return err
				}
				return os.WriteFile(c.String("out"), ref, 0o644)
			},
		}},
	}
}

// cliReference renders docs/cli.md: the top-level help, then every visible
// command and subcommand's --help exactly as the binary prints it. Each help
// text comes from a fresh app run with HOOKLEDGER_* unset, so neither an
// earlier run nor the caller's environment can change a default shown.
func cliReference() ([]byte, error) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "HOOKLEDGER_") {
			defer os.Setenv(k, os.Getenv(k))
			os.Unsetenv(k)
		}
	}
	var paths [][]string
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			if cmd.Hidden || cmd.Name == "help" {
				continue
			}
			p := append(append([]string(nil), prefix...), cmd.Name)
			paths = append(paths, p)
			walk(p, cmd.Subcommands)
		}
	}
	walk(nil, newApp().Commands)

	var b bytes.Buffer
	b.WriteString("# CLI reference\n\n" +
		"Generated from the binary's own `--help` by `go run . docs cli` (hidden command, `internal/cli/docs.go`);\n" +
		"`go test ./internal/cli/` (TestCLIReferenceIsCurrent) fails when this file is stale. Do not edit it by hand.\n\n" +
		"Flags can also be set from the environment variable shown in `[$…]`.\n\n" +
		"Exit status: 0 success; 1 an error, with one line saying why; 2 a usage error (an unknown\n" +
		"command, flag or argument); 3 a check that ran and found a problem (`verify`, `dispute`,\n" +
		"`replica status`); 130 interrupted (Ctrl-C), after saying what was and was not done.\n\n")
	for _, p := range paths {
		fmt.Fprintf(&b, "- [`hookledger %s`](#%s)\n", strings.Join(p, " "), strings.Join(append([]string{"hookledger"}, p...), "-"))
	}
	help, err := helpText(nil)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(&b, "\n## hookledger\n\n```text\n%s```\n", help)
	for _, p := range paths {
		help, err := helpText(p)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\n## hookledger %s\n\n```text\n%s```\n", strings.Join(p, " "), help)
	}
	return b.Bytes(), nil
}

// helpText is what `hookledger PATH... --help` prints.
func helpText(path []string) (string, error) {
	app := newApp()
	var out bytes.Buffer
	app.Writer, app.ErrWriter = &out, io.Discard
	app.ExitErrHandler = func(*cli.Context, error) {}
	args := append(append([]string{"hookledger"}, path...), "--help")
	if err := app.Run(args); err != nil {
		return "", fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	lines := strings.Split(out.String(), "\n")
	for i := range lines {
		lines[i] = strings.TrimRight(lines[i], " \t")
	}
	return strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n", nil
}
