// Command hookledger receives signed webhooks, keeps each authenticated event
// durably in SQLite and turns usage events into an append-only metered-usage
// ledger. main only hands the build information to the command line
// (internal/cli); serve's runtime is internal/server.
package main

import (
	"os"

	"github.com/hookledger/hookledger/internal/cli"
)

// Set by the Taskfile build with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(cli.Main(cli.Build{Version: version, Commit: commit}, os.Args, os.Stderr))
}
