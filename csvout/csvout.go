// Package csvout is the one CSV writer of hookledger: the CLI's --format
// csv, GET /v1/usage?format=csv and the console's downloads all write
// through it, so every CSV file hookledger emits is RFC 4180 with its cells
// guarded against formula injection the same way.
package csvout

import (
	"encoding/csv"
	"io"
	"strings"
)

// Writer is an encoding/csv Writer whose every cell, header included, passes
// through Cell.
type Writer struct {
	w *csv.Writer
}

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: csv.NewWriter(w)} }

// Write writes one record; the caller's slice is left as it is.
func (w *Writer) Write(record []string) error {
	out, copied := record, false
	for i, s := range record {
		if c := Cell(s); c != s {
			if !copied {
				out, copied = append([]string(nil), record...), true
			}
			out[i] = c
		}
	}
	return w.w.Write(out)
}

// WriteAll writes records and flushes, as csv.Writer.WriteAll does.
func (w *Writer) WriteAll(records [][]string) error {
	for _, r := range records {
		if err := w.Write(r); err != nil {
			return err
		}
	}
	w.w.Flush()
	return w.w.Error()
}

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() { w.w.Flush() }

// Error reports an error of a previous Write or Flush.
func (w *Writer) Error() error { return w.w.Error() }

// Cell guards one cell against formula injection (OWASP's "CSV Injection"):
// a spreadsheet runs a cell starting with =, +, -, @, tab or carriage return
// as a formula, so a customer id such as =HYPERLINK("http://x","y") or a
// dimension value @SUM(1) is written with a leading apostrophe, which
// spreadsheets show as text and do not run.
//
// Two kinds of cell are left as they are, so that the values a user
// re-imports are the values hookledger wrote: a plain decimal number ("-5",
// "-0.50", "+3": optional sign, digits, optional point and digits), which
// a spreadsheet reads as a number, never a formula; and a lone "-", the
// CLI's mark for an empty value. Everything else that starts with one of
// those characters is prefixed, whatever column it is in.
func Cell(s string) string {
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) || s == "-" || isNumber(s) {
		return s
	}
	return "'" + s
}

// isNumber reports whether s is a plain decimal number: [+-]digits[.digits].
func isNumber(s string) bool {
	if s[0] == '+' || s[0] == '-' {
		s = s[1:]
	}
	whole, frac, point := strings.Cut(s, ".")
	return digits(whole) && (!point || digits(frac))
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
