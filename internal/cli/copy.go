package cli

import (
	"fmt"
	"net/url"
	"sync/atomic"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/schema"
)

func copyCommand() *cli.Command {
	return &cli.Command{
		Name:  "copy",
		Usage: "copy a SQLite ledger into an empty PostgreSQL database (moving to several receivers)",
		Description: "Copies every table of DATA/hookledger.db — receipts (pruned bodies stay pruned), delivery\n" +
			"attempts, ledger rows with their hashes, invoices, period closes, reconcile checkpoints, replays —\n" +
			"into the PostgreSQL database --to names, in one transaction: a failed copy leaves the target\n" +
			"empty. The target must exist and hold no ledger; copy creates hookledger's tables there. Stop\n" +
			"serve first (copy takes the data directory's lock, so it refuses while serve runs), then point\n" +
			"the receivers at the target (database: in the config) and run `hookledger verify` on it.\n" +
			"docs/postgres.md walks through it.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Required: true, EnvVars: []string{"HOOKLEDGER_COPY_TO"},
				Usage: "the target PostgreSQL database, postgres://USER@HOST/DB (the variable keeps a password out of ps)"},
			&cli.StringFlag{Name: "from", Usage: "the data directory holding the SQLite hookledger.db (default: --data, the config's data, else ./data)"},
			configFlags()[0], configFlags()[1],
		},
		Action: copyLedger,
	}
}

func copyLedger(c *cli.Context) error {
	to := c.String("to")
	if !schema.IsPostgres(to) {
		return usageErrorf(c, "--to: must be a postgres:// or postgresql:// URL")
	}
	dir := c.String("from")
	if dir == "" {
		var err error
		if dir, _, err = locate(c); err != nil {
			return err
		}
	}
	lock, err := schema.LockDir(dir)
	if err != nil {
		return err
	}
	defer lock.Unlock()
	src, err := openDB(c.Context, schema.Path(dir), schema.Options{MustExist: true})
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := schema.Open(c.Context, to, schema.Options{})
	if err != nil {
		return err
	}
	defer dst.Close()
	counts, err := schema.CopyPlan(c.Context, src, dst)
	if err != nil {
		return err
	}
	var total int64
	for _, n := range counts {
		total += n
	}
	var done atomic.Int64
	var before int64 // rows of the tables already copied
	last := ""
	stop := progress(int(total), "copying", &done)
	err = schema.CopyLedger(c.Context, src, dst, func(table string, rows int64) {
		if table != last {
			before += counts[last]
			last = table
		}
		done.Store(before + rows)
	})
	stop()
	if err != nil {
		return fmt.Errorf("copy into %s: %w (the target is unchanged)", dst.Path, err)
	}
	head, err := dst.LatestHead(c.Context)
	if err != nil {
		return err
	}
	srcHead, err := src.LatestHead(c.Context)
	if err != nil {
		return err
	}
	if fmt.Sprint(head) != fmt.Sprint(srcHead) {
		return fmt.Errorf("after the copy the chain heads differ: source %+v, target %+v", srcHead, head)
	}
	// Attempts as the dispute trace shows them: a receipt's first attempt
	// is in its row, the redeliveries in delivery_attempts.
	attempts, err := dst.CountAttempts(c.Context)
	if err != nil {
		return err
	}
	w := c.App.Writer
	fmt.Fprintf(w, "copied %s into %s: %d receipts, %d delivery attempts, %d ledger rows, %d invoices (%d lines), %d period closes\n",
		src.Path, dst.Path, counts["receipts"], attempts, counts["metered_usage"], counts["invoices"],
		counts["invoice_lines"], counts["period_closes"])
	fmt.Fprintf(w, "chain heads on both: ledger %d %x, receipts %d %x\n", head.LedgerID, head.LedgerHash, head.ReceiptID, head.ReceiptHash)
	fmt.Fprintln(w, nextVerify(c.String("to"), dst.Path))
	return nil
}

// nextVerify is the command that verifies the copy. The password of the
// --to URL is never printed: a URL that has one is shown with a PASSWORD
// placeholder to fill in, and said so, so the line still works once pasted.
func nextVerify(to, shown string) string {
	const tail = ", then set database: in the receivers' config"
	u, err := url.Parse(to)
	if err != nil || u.User == nil {
		return "next: hookledger verify --database '" + shown + "'" + tail
	}
	if _, ok := u.User.Password(); !ok {
		return "next: hookledger verify --database '" + shown + "'" + tail
	}
	if u, err = url.Parse(shown); err != nil || u.User == nil {
		return "next: hookledger verify --database '" + shown + "'" + tail
	}
	u.User = url.UserPassword(u.User.Username(), "PASSWORD")
	return "next: hookledger verify --database '" + u.String() + "'" + tail +
		"\n      (PASSWORD is the password in the URL you gave --to, not printed here; or run verify with HOOKLEDGER_DATABASE set to that URL)"
}
