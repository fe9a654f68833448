package cli

import (
	"fmt"
	"os"
	"strconv"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

func ledgerCommand() *cli.Command {
	return &cli.Command{
		Name:  "ledger",
		Usage: "inspect the ledger's hash chains",
		Subcommands: []*cli.Command{{
			Name:  "head",
			Usage: "print where the ledger, receipts, closes and credits hash chains end, as anchors for `verify --anchor`",
			Description: "Prints the last row of each hash chain: the ledger (metered_usage id), the receipts\n" +
				"(receipts id), the closes (period_closes id, sealed with the count and digest of its invoices)\n" +
				"and the credits (credit_entries id: grants, burns, voids, expiries),\n" +
				"each with its row hash and as an anchor chain:id:hash. Keep the anchors outside\n" +
				"the machine (serve also logs them every 5 minutes and at shutdown): `verify --anchor` or\n" +
				"`verify --anchors FILE` later fails if an anchored row was deleted or the chain rewritten.\n" +
				"Reads only; creates nothing; safe while `serve` runs.",
			Flags: append(configFlags(), formatFlag()),
			Action: func(c *cli.Context) error {
				db, err := openExisting(c)
				if err != nil {
					return err
				}
				defer db.Close()
				as, err := invoice.LoadAnchors(c.Context, db)
				if err != nil {
					return err
				}
				type entry struct {
					ID     int64  `json:"id"`
					Hash   string `json:"hash"`
					Anchor string `json:"anchor"`
				}
				out := map[string]entry{}
				var rows [][]string
				for _, a := range as {
					e := entry{ID: a.ID, Hash: fmt.Sprintf("%x", a.Hash), Anchor: a.String()}
					out[a.Chain] = e
					rows = append(rows, []string{a.Chain, strconv.FormatInt(e.ID, 10), e.Hash, e.Anchor})
				}
				return writeRecords(c.App.Writer, c.String("format"), []string{"chain", "id", "hash", "anchor"}, rows, out)
			},
		}},
	}
}

// readAnchors gathers verify's --anchor values and the anchors in --anchors.
func readAnchors(c *cli.Context) ([]ledger.Anchor, error) {
	var out []ledger.Anchor
	for _, s := range c.StringSlice("anchor") {
		a, err := ledger.ParseAnchor(s)
		if err != nil {
			return nil, usageErrorf(c, "--anchor: %w", err)
		}
		out = append(out, a)
	}
	if path := c.String("anchors"); path != "" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("--anchors: %w", err)
		}
		defer f.Close()
		as, err := ledger.ParseAnchors(f)
		if err != nil {
			return nil, fmt.Errorf("--anchors %s: %w", path, err)
		}
		out = append(out, as...)
	}
	return out, nil
}
