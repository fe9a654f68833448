// Package cli is hookledger's command line: one file per command, and the
// helpers every command shares in files named after them (config.go resolves
// --config, --data, --provider and --since; database.go opens the database;
// output.go prints records; args.go parses arguments and picks exit codes).
// serve's runtime is internal/server; this package parses its flags.
package cli

import (
	"fmt"
	"io"
	"runtime"

	"github.com/urfave/cli/v2"
)

// Build identifies the binary: main sets it from its -ldflags -X values.
type Build struct {
	Version string
	Commit  string
}

// build is the running binary's; tests that run the app in process keep the defaults.
var build = Build{Version: "dev", Commit: "unknown"}

// Main runs the command line args (os.Args) and returns the exit code.
func Main(b Build, args []string, stderr io.Writer) int {
	build = b
	privateFiles()
	if err := newApp().Run(helpArgs(args)); err != nil {
		printError(stderr, err)
		return exitStatus(err)
	}
	return exitOK
}

func newApp() *cli.App {
	app := &cli.App{
		Name:  "hookledger",
		Usage: "receive signed webhooks and keep a metered-usage ledger you can invoice from",
		Description: "Run `hookledger serve` with no configuration to start on the embedded default: one Standard\n" +
			"Webhooks provider named \"default\" at POST /webhooks/default, data in ./data.\n" +
			"Every flag can also be set from the environment variable shown next to it.",
		Version:              build.Version,
		EnableBashCompletion: true,
		Action:               rootAction,
		OnUsageError:         onUsageError,
		// Errors come back from Run; Main prints them and picks the exit code
		// (args.go), instead of urfave/cli exiting from inside Run.
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			serveCommand(),
			sendCommand(),
			keysCommand(),
			ingestCommand(),
			benchCommand(),
			usageCommand(),
			invoiceCommand(),
			planCommand(),
			customersCommand(),
			creditsCommand(),
			limitsCommand(),
			alertsCommand(),
			adjustCommand(),
			voidCommand(),
			amendCommand(),
			verifyCommand(),
			ledgerCommand(),
			disputeCommand(),
			devCommand(),
			reconcileCommand(),
			replayCommand(),
			pruneCommand(),
			forwardCommand(),
			stripeCommand(),
			auditCommand(),
			migrateCommand(),
			copyCommand(),
			restoreCommand(),
			replicaCommand(),
			versionCommand(),
			docsCommand(),
		},
	}
	strictArgs(app.Commands)
	cli.VersionPrinter = printVersion // --version prints what `version` does
	return app
}

// helpArgs turns `help invoice close` into `invoice close --help`:
// urfave/cli's help command looks up only its first argument, so it would
// print invoice's help for any subcommand.
func helpArgs(args []string) []string {
	if len(args) > 3 && args[1] == "help" {
		return append(append([]string{args[0]}, args[2:]...), "--help")
	}
	return args
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print version, commit and Go version",
		Action: func(c *cli.Context) error {
			printVersion(c)
			return nil
		},
	}
}

func printVersion(c *cli.Context) {
	fmt.Fprintf(c.App.Writer, "hookledger %s (commit %s, %s %s/%s)\n", build.Version, build.Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
