package cli

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/durable"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

func verifyCommand() *cli.Command {
	return &cli.Command{
		Name:  "verify",
		Usage: "prove nobody edited the ledger: hash chains, receipts, invoices and closes, SQLite integrity",
		Description: "Runs SQLite's integrity_check, recomputes the hash chain over every ledger row, checks that every\n" +
			"applied receipt has its usage rows and every usage row its receipt, and recomputes every closed\n" +
			"invoice's digests and quantities from the ledger; checks every close against its seal (the count\n" +
			"and digest of the invoices it wrote, chained close after close) and that every usage row of a\n" +
			"closed period is on an invoice of its close or late, never between closed periods where no close\n" +
			"can bill it. Recomputes the receipts' hash chain, checks\n" +
			"that both chains end where the chain head says, that every stored body matches its body_sha256\n" +
			"and every replayed receipt's status its replays, and that every anchor (from `ledger head` or\n" +
			"serve's \"chain head\" log lines) still names a row with that hash. On PostgreSQL the integrity\n" +
			"check is amcheck's page and index checks; when amcheck is not installed or not granted to the\n" +
			"role, that check is listed as skipped with the reason, every other check runs, and the exit\n" +
			"status does not change. Exits 3 naming the first broken row (1 when it cannot check, 130 when\n" +
			"interrupted). What is not a failure but worth knowing is a note (exit 0): e.g. a late line an\n" +
			"older version put on an earlier month's invoice.\n" +
			"\n" +
			"Incremental verify: with --save FILE, a verify that finds nothing wrong writes the anchors it\n" +
			"verified up to (where each chain ended as it began) to FILE and lists them (\"verified head\").\n" +
			"--since FILE later proves each of those anchors still holds (the row is there with its hash, and\n" +
			"the hash recomputes from the row and the row before it), then runs every check over what was\n" +
			"appended after them only: ledger rows, receipts, voids, the usage state of the months new rows\n" +
			"fall in, crossings, closes with every invoice they wrote, credit entries with the grants they\n" +
			"touch; integrity_check is skipped. Each check says what it covered. It does NOT see an edit at or\n" +
			"before the anchors made after they were verified: only the full verify proves the whole ledger.\n" +
			"A chain with no anchor given is checked in full. Run e.g. `verify --since F --save F` nightly\n" +
			"and a full `verify --save F` weekly; keep F where the database's writers cannot change it.\n" +
			"Reads only; safe while `serve` runs.",
		Flags: append(configFlags(), formatFlag(),
			&cli.StringSliceFlag{Name: "anchor", EnvVars: []string{"HOOKLEDGER_ANCHOR"},
				Usage: "an `ANCHOR` that must still hold: chain:id:hash (ledger:ID:HASH, receipts:ID:HASH, closes:ID:HASH or credits:ID:HASH) from hookledger ledger head; repeatable"},
			&cli.StringFlag{Name: "anchors", EnvVars: []string{"HOOKLEDGER_ANCHORS"},
				Usage: "a `FILE` of anchors: every chain:id:hash in it, e.g. kept serve log lines or hookledger ledger head output"},
			&cli.StringSliceFlag{Name: "since",
				Usage: "verify incrementally from `ANCHORS` a verify printed: a file --save wrote, or chain:id:hash (repeatable), one per chain; proves they still hold, then checks only what came after them"},
			&cli.StringFlag{Name: "save",
				Usage: "when every check passes, write the anchors this verify covered to `FILE` (atomically, mode 0600), for a later --since"},
		),
		Action: func(c *cli.Context) error {
			format := c.String("format")
			anchors, err := readAnchors(c)
			if err != nil {
				return err
			}
			from, err := readSince(c)
			if err != nil {
				return err
			}
			db, err := openExisting(c)
			if err != nil {
				return err
			}
			defer db.Close()
			ctx, stop := signalContext(c)
			defer stop()
			var rep *invoice.VerifyReport
			if c.IsSet("since") {
				rep, err = invoice.VerifySince(ctx, db, from, anchors...)
			} else {
				rep, err = invoice.Verify(ctx, db, anchors...)
			}
			if ctx.Err() != nil {
				return interrupted("the ledger was not fully verified; nothing was changed (verify only reads)")
			}
			if errors.Is(err, invoice.ErrBadSince) {
				return usageErrorf(c, "%w", err)
			}
			if err != nil {
				return err
			}
			if err := writeRecords(c.App.Writer, format, verifyHeader, verifyRows(rep, c.IsSet("since") || c.IsSet("save")), rep); err != nil {
				return err
			}
			if p := rep.First(); p != nil {
				return problem(fmt.Errorf("verify failed: %w", *p))
			}
			if path := c.String("save"); path != "" {
				if err := saveVerified(path, rep); err != nil {
					return fmt.Errorf("--save: %w", err)
				}
			}
			return nil
		},
	}
}

var verifyHeader = []string{"check", "checked", "status", "table", "id", "problem"}

// verifyRows are the report's rows: each check's status, problems and
// notes; with heads, the anchors verified ("verified head"), which a plain
// verify leaves out so that its table stays what scripts and docs read.
func verifyRows(rep *invoice.VerifyReport, heads bool) [][]string {
	var rows [][]string
	for _, ch := range rep.Checks {
		name, n := ch.Name, strconv.FormatInt(ch.Checked, 10)
		if ch.From != "" {
			name += " (" + ch.From + ")"
		}
		if ch.Skipped != "" {
			rows = append(rows, []string{name, n, "skipped", "", "", ch.Skipped})
		} else if ch.OK() {
			rows = append(rows, []string{name, n, "ok", "", "", ""})
		}
		for _, p := range ch.Problems {
			rows = append(rows, []string{name, n, "BROKEN", p.Table, strconv.FormatInt(p.ID, 10), p.Msg})
		}
		for _, note := range ch.Notes {
			rows = append(rows, []string{name, n, "note", "", "", note})
		}
	}
	if heads {
		for _, a := range rep.Verified {
			rows = append(rows, []string{"verified head", "", "anchor", chainTable[a.Chain], strconv.FormatInt(a.ID, 10), a.String()})
		}
	}
	return rows
}

// chainTable is the table each chain's anchor names a row of.
var chainTable = map[string]string{
	ledger.ChainLedger: "metered_usage", ledger.ChainReceipts: "receipts",
	ledger.ChainCloses: "close_seals", ledger.ChainCredits: "credit_entries",
}

// anchorArg tells an anchor given on the command line from a file name.
var anchorArg = regexp.MustCompile(`^(ledger|receipts|closes|credits):[0-9]`)

// readSince gathers --since: anchors (chain:id:hash) and files of them.
// What does not read as anchors is a wrong command line (exit 2).
func readSince(c *cli.Context) ([]ledger.Anchor, error) {
	var out []ledger.Anchor
	for _, v := range c.StringSlice("since") {
		if anchorArg.MatchString(v) {
			a, err := ledger.ParseAnchor(v)
			if err != nil {
				return nil, usageErrorf(c, "--since: %w", err)
			}
			out = append(out, a)
			continue
		}
		f, err := os.Open(v)
		if err != nil {
			return nil, usageErrorf(c, "--since: %w (want a file verify --save wrote, or chain:id:hash)", err)
		}
		as, err := ledger.ParseAnchors(f)
		f.Close()
		if err != nil {
			return nil, usageErrorf(c, "--since %s: %w", v, err)
		}
		out = append(out, as...)
	}
	if c.IsSet("since") && len(out) == 0 {
		return nil, usageErrorf(c, "--since: no anchors given")
	}
	return out, nil
}

// saveVerified writes the anchors rep verified up to, atomically, for a
// later --since.
func saveVerified(path string, rep *invoice.VerifyReport) error {
	if len(rep.Anchors) == 0 {
		return errors.New("the database has no chain head to anchor (it predates the receipts chain: run hookledger migrate)")
	}
	var b strings.Builder
	kind := "a full verify" // no anchor in these comment lines: --since reads every anchor in the file
	if len(rep.Since) > 0 {
		kind = "an incremental verify"
	}
	fmt.Fprintf(&b, "# hookledger verify: every check passed at %s (%s)\n", time.Now().UTC().Format(time.RFC3339), kind)
	fmt.Fprintf(&b, "# the next one can start here: hookledger verify --since %s\n", path)
	for _, a := range rep.Anchors {
		fmt.Fprintln(&b, a)
	}
	return durable.WriteFile(path, []byte(b.String()), 0o600)
}
