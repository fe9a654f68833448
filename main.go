// Command hookledger receives signed webhooks, keeps each authenticated event
// durably in SQLite and turns usage events into an append-only metered-usage
// ledger. main only wires: flags, objects, signals.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/urfave/cli/v2"
)

// Set by the Taskfile build with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	privateFiles()
	if err := newApp().Run(os.Args); err != nil {
		printError(os.Stderr, err)
		os.Exit(exitStatus(err))
	}
}

func newApp() *cli.App {
	app := &cli.App{
		Name:  "hookledger",
		Usage: "receive signed webhooks and keep a metered-usage ledger you can invoice from",
		Description: "Run `hookledger serve` with no configuration to start on the embedded default: one Standard\n" +
			"Webhooks provider named \"default\" at POST /webhooks/default, data in ./data.\n" +
			"Every flag can also be set from the environment variable shown next to it.",
		Version:              version,
		EnableBashCompletion: true,
		Action:               rootAction,
		OnUsageError:         onUsageError,
		// Errors come back from Run; main prints them and picks the exit code
		// (args.go), instead of urfave/cli exiting from inside Run.
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{
			serveCommand(),
			sendCommand(),
			benchCommand(),
			usageCommand(),
			invoiceCommand(),
			adjustCommand(),
			verifyCommand(),
			ledgerCommand(),
			disputeCommand(),
			devCommand(),
			reconcileCommand(),
			replayCommand(),
			pruneCommand(),
			auditCommand(),
			migrateCommand(),
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
	fmt.Fprintf(c.App.Writer, "hookledger %s (commit %s, %s %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
