package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/replication"
	"github.com/hookledger/hookledger/schema"
)

func restoreCommand() *cli.Command {
	return &cli.Command{
		Name:  "restore",
		Usage: "rebuild the database from its Litestream replica, latest or at a point in time",
		Description: "Restores into a temporary file, runs SQLite's full integrity check, and only then moves it into\n" +
			"place (removing the old database's stale -wal/-shm files and Litestream sidecar), then prints\n" +
			"the Litestream TXID and time it reflects and its receipt and usage-row counts.\n" +
			"Refuses to replace an existing database without --force; stop serve first. The stock\n" +
			"`litestream restore -config litestream.yml DB` reads the same replica.",
		Flags: []cli.Flag{
			litestreamConfigFlag(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, EnvVars: []string{"HOOKLEDGER_RESTORE_OUTPUT"},
				Usage: "where to write the database (default: the database path in litestream.yml)"},
			&cli.StringFlag{Name: "timestamp", EnvVars: []string{"HOOKLEDGER_RESTORE_TIMESTAMP"},
				Usage: "restore the state as of this time, RFC 3339 (e.g. 2026-11-29T14:05:00Z): the last replica sync before it"},
			&cli.StringFlag{Name: "txid", EnvVars: []string{"HOOKLEDGER_RESTORE_TXID"},
				Usage: "restore the state as of this Litestream TXID (hex, as \"hookledger replica status\" prints it)"},
			&cli.BoolFlag{Name: "if-db-not-exists", EnvVars: []string{"HOOKLEDGER_RESTORE_IF_DB_NOT_EXISTS"},
				Usage: "do nothing, successfully, when the database already exists"},
			&cli.BoolFlag{Name: "force", EnvVars: []string{"HOOKLEDGER_RESTORE_FORCE"},
				Usage: "replace an existing database (and its -wal/-shm files); the local state is lost"},
		},
		Action: restore,
	}
}

func restore(c *cli.Context) error {
	var opts replication.RestoreOptions
	if ts, id := c.String("timestamp"), c.String("txid"); ts != "" && id != "" {
		return errors.New("--timestamp and --txid: choose one")
	} else if ts != "" {
		t, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			return fmt.Errorf("--timestamp: %q is not an RFC 3339 time (e.g. 2026-11-29T14:05:00Z)", ts)
		}
		opts.Timestamp = t
	} else if id != "" {
		txid, err := replication.ParseTXID(id)
		if err != nil {
			return fmt.Errorf("--txid: %w", err)
		}
		if txid == 0 {
			return errors.New("--txid: TXIDs start at 1")
		}
		opts.TXID = txid
	}
	if c.Bool("force") && c.Bool("if-db-not-exists") {
		return errors.New("--force and --if-db-not-exists: choose one")
	}
	cfg, err := requireLitestream(c)
	if err != nil {
		return err
	}
	opts.OutputPath, opts.IfDBNotExists, opts.Force = c.String("output"), c.Bool("if-db-not-exists"), c.Bool("force")
	// Litestream narrates every step at INFO; a command prints its result.
	// Its restore logs partly through slog.Default, hence both.
	opts.Logger = slog.New(slog.NewTextHandler(c.App.ErrWriter, &slog.HandlerOptions{Level: slog.LevelWarn}))
	slog.SetDefault(opts.Logger)
	var bar restoreBar
	if isTerminal(c.App.ErrWriter) {
		opts.Progress = bar.set
	}

	// Never write into the data directory of a running serve (or beside a
	// migrate or another restore). A directory that does not exist yet is
	// nobody's: Restore creates it.
	out := opts.OutputPath
	if out == "" {
		out = cfg.DB.Path
	}
	if fi, err := os.Stat(filepath.Dir(out)); err == nil && fi.IsDir() {
		lock, err := schema.LockDir(filepath.Dir(out))
		if err != nil {
			return fmt.Errorf("restore: %w", err)
		}
		defer lock.Unlock()
	}

	ctx, stop := signalContext(c)
	defer stop()
	res, err := replication.Restore(ctx, cfg, opts)
	bar.finish()
	switch {
	case ctx.Err() != nil:
		return interrupted("nothing was restored: the restore writes a temporary file and moves it into place only " +
			"after its integrity check, so any existing database is as it was")
	case errors.Is(err, replication.ErrNoReplica):
		return fmt.Errorf("%w\n(check the replica in %s; has serve ever replicated with it?)", err, cfg.File)
	case errors.Is(err, replication.ErrNotAvailable):
		return fmt.Errorf("%w\n(point-in-time restore reaches back as far as the oldest snapshot the replica keeps: snapshot.retention in %s)", err, cfg.File)
	case err != nil:
		return err
	case res.Skipped:
		fmt.Fprintf(c.App.Writer, "%s exists; nothing restored (--if-db-not-exists)\n", res.Path)
		return nil
	}

	receipts, usage, err := countLedger(c, res.Path)
	if err != nil {
		return fmt.Errorf("restored %s, but cannot read it: %w", res.Path, err)
	}
	tw := tabwriter.NewWriter(c.App.Writer, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "restored\t%s\n", res.Path)
	fmt.Fprintf(tw, "from\t%s\n", cfg.DB.Replica.String())
	fmt.Fprintf(tw, "txid\t%s\n", res.TXID)
	fmt.Fprintf(tw, "timestamp\t%s\n", res.Timestamp.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(tw, "receipts\t%d\n", receipts)
	fmt.Fprintf(tw, "usage rows\t%d\n", usage)
	fmt.Fprintf(tw, "integrity\tok\n")
	return tw.Flush()
}

// countLedger counts receipts and usage rows in a restored database.
func countLedger(c *cli.Context, path string) (receipts, usage int64, err error) {
	db, err := schema.Open(c.Context, path, schema.Options{ReadOnly: true})
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	if receipts, err = db.CountReceipts(c.Context); err != nil {
		return 0, 0, err
	}
	if usage, err = db.CountLedgerRows(c.Context); err != nil {
		return 0, 0, err
	}
	return receipts, usage, nil
}

// restoreBar draws the bytes read from the replica on an interactive
// terminal; it appears on the first progress report, when the total is known.
type restoreBar struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar
}

func (b *restoreBar) set(read, total int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar == nil {
		b.bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(os.Stderr),
			progressbar.OptionSetDescription("restoring"),
			progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
	}
	b.bar.Set64(read)
}

func (b *restoreBar) finish() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bar != nil {
		b.bar.Finish()
	}
}
