package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/csvout"
)

// formatFlag values.
var formats = []string{"table", "json", "csv"}

// formatFlag is --format for every command that prints records. The flag
// checks its own value, so a bad one fails before the command does anything.
func formatFlag() cli.Flag {
	return &cli.StringFlag{Name: "format", Value: "table", EnvVars: []string{"HOOKLEDGER_FORMAT"},
		Usage:  "output as table, json or csv (RFC 4180)",
		Action: func(c *cli.Context, f string) error { return checkFormat(c, f) }}
}

func checkFormat(c *cli.Context, f string) error {
	for _, ok := range formats {
		if f == ok {
			return nil
		}
	}
	return usageErrorf(c, "--format: %q is not one of %s", f, strings.Join(formats, ", "))
}

// writeRecords prints a header and rows as an aligned table or RFC 4180 CSV
// (through csvout, which guards cells against formula injection); JSON
// output prints v instead, so numbers and names keep their types.
func writeRecords(w io.Writer, format string, header []string, rows [][]string, v any) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "csv":
		cw := csvout.NewWriter(w)
		cw.Write(header)
		cw.WriteAll(rows)
		return cw.Error()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(header, "\t")))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func itoa(n int) string { return strconv.Itoa(n) }

// plural is one when n is 1, else many: "1 event was", "2 events were".
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
