package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/csvout"
	"github.com/hookledger/hookledger/ledger"
)

// Downloads: the usage and invoices pages as CSV and JSON. Each is the
// page's own view (usageView, invoicesView) written out instead of
// rendered, reached by the page's address with .csv or .json added and the
// same query, so a file holds exactly the rows, filters and page the
// operator was looking at. Times are RFC 3339 in UTC with milliseconds,
// quantities and amounts exact decimals as text. CSV cells are guarded
// against formula injection by csvout, the writer of every CSV hookledger
// emits.

// download sets the headers of a file download named name.
func download(w http.ResponseWriter, format, name string) {
	switch format {
	case "csv":
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	default:
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.%s"`, name, format))
}

// usageFile is the JSON download of the usage page.
type usageFile struct {
	From     string `json:"from"`
	To       string `json:"to"`
	TZ       string `json:"tz"`
	Customer string `json:"customer,omitempty"`
	After    string `json:"after,omitempty"` // the page starts after this customer
	// Dimension is the dimension the lines are grouped by, Value the one
	// value they are kept to ("": every value).
	Dimension string             `json:"dimension,omitempty"`
	Value     string             `json:"value,omitempty"`
	Next      string             `json:"next,omitempty"` // the next page starts after this one
	Lines     []ledger.UsageLine `json:"lines"`
	Days      []ledger.UsageLine `json:"days,omitempty"` // one customer: per meter, per day
}

// usageCSVHeader: a row per line of the page's table, then (one customer)
// a row per meter and day of its per-day tables, whose day column is set.
// With a dimension picked, a column named after it follows meter (empty on
// the per-day rows, which are not split by it).
var usageCSVHeader = []string{"from", "to", "tz", "customer", "meter", "day", "aggregation", "quantity", "unit", "events", "adjustments"}

func writeUsage(w http.ResponseWriter, format string, v usageView) {
	f := usageFile{From: v.WindowFrom, To: v.WindowTo, TZ: v.TZ, Customer: v.Customer, After: v.After, Next: v.Next, Lines: v.Lines,
		Dimension: v.Dim, Value: v.Value}
	if f.Lines == nil {
		f.Lines = []ledger.UsageLine{}
	}
	for _, d := range v.Days {
		f.Days = append(f.Days, d.Lines...)
	}
	name := "usage-" + v.WindowFrom + "-" + v.WindowTo
	if v.Customer != "" {
		name += "-" + v.Customer
	}
	download(w, format, fileName(name))
	if format == "json" {
		json.NewEncoder(w).Encode(f)
		return
	}
	cw := csvout.NewWriter(w)
	header := usageCSVHeader
	if v.Dim != "" {
		header = slices.Insert(slices.Clone(header), 5, v.Dim)
	}
	cw.Write(header)
	row := func(l ledger.UsageLine, day string) {
		r := []string{f.From, f.To, f.TZ, l.Customer, l.Meter, day, string(l.Aggregation), l.Quantity.String(), l.Unit,
			strconv.FormatInt(l.Events, 10), strconv.FormatInt(l.Adjustments, 10)}
		if v.Dim != "" {
			r = slices.Insert(r, 5, l.Dimensions[v.Dim])
		}
		cw.Write(r)
	}
	for _, l := range f.Lines {
		row(l, "")
	}
	for _, l := range f.Days {
		row(l, l.Period)
	}
	cw.Flush()
}

// invoiceRow is one invoice of the invoices page as a download writes it.
type invoiceRow struct {
	ID         int64  `json:"id"`
	Customer   string `json:"customer"`
	Period     string `json:"period"`
	TZ         string `json:"tz"`
	Lines      int64  `json:"lines"`
	LateLines  int64  `json:"late_lines"`
	Plan       string `json:"plan,omitempty"`
	Total      string `json:"total,omitempty"` // "" on an unpriced invoice
	Currency   string `json:"currency,omitempty"`
	Cutoff     string `json:"ingestion_cutoff"`
	LedgerHead int64  `json:"ledger_head"`
	ClosedAt   string `json:"closed_at"`
}

// invoicesFile is the JSON download of the invoices page.
type invoicesFile struct {
	Customer string        `json:"customer,omitempty"`
	Period   string        `json:"period,omitempty"`
	Before   int64         `json:"before,omitempty"` // the page holds invoices below this id
	Older    int64         `json:"older,omitempty"`  // the next page: before=older
	Invoices []invoiceRow  `json:"invoices"`
	Totals   []currencySum `json:"totals"` // the page's money, per currency
	Unpriced int           `json:"unpriced"`
}

var invoicesCSVHeader = []string{"id", "customer", "period", "tz", "lines", "late_lines", "plan", "total", "currency",
	"ingestion_cutoff", "ledger_head", "closed_at"}

func writeInvoices(w http.ResponseWriter, format string, v invoicesView) {
	f := invoicesFile{Customer: v.Customer, Period: v.Period, Before: v.Before, Older: v.Older, Invoices: []invoiceRow{},
		Totals: v.Totals, Unpriced: v.Unpriced}
	if f.Totals == nil {
		f.Totals = []currencySum{}
	}
	for _, inv := range v.Invoices {
		f.Invoices = append(f.Invoices, invoiceRow{ID: inv.ID, Customer: inv.Customer, Period: inv.Period, TZ: inv.TZ,
			Lines: inv.Lines, LateLines: inv.Late, Plan: inv.Plan, Total: inv.Total, Currency: inv.Currency,
			Cutoff: exactTime(time.UnixMilli(inv.Cutoff)), LedgerHead: inv.LedgerHead, ClosedAt: exactTime(time.UnixMilli(inv.ClosedAt))})
	}
	name := "invoices"
	for _, part := range []string{v.Period, v.Customer} {
		if part != "" {
			name += "-" + part
		}
	}
	if v.Before != 0 {
		name += "-before-" + strconv.FormatInt(v.Before, 10)
	}
	download(w, format, fileName(name))
	if format == "json" {
		json.NewEncoder(w).Encode(f)
		return
	}
	cw := csvout.NewWriter(w)
	cw.Write(invoicesCSVHeader)
	for _, r := range f.Invoices {
		cw.Write([]string{strconv.FormatInt(r.ID, 10), r.Customer, r.Period, r.TZ, strconv.FormatInt(r.Lines, 10),
			strconv.FormatInt(r.LateLines, 10), r.Plan, r.Total, r.Currency, r.Cutoff, strconv.FormatInt(r.LedgerHead, 10), r.ClosedAt})
	}
	cw.Flush()
}

// fileName keeps a download's name to characters every file system and the
// Content-Disposition header take: a customer id may hold anything.
func fileName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	if len(b) > 100 {
		b = b[:100]
	}
	return string(b)
}
