package dispute

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookledger/hookledger/ledger"
)

// Width is the terminal width the table output fits.
const Width = 100

// WriteJSON writes the trace as indented JSON (the golden-file format).
func WriteJSON(w io.Writer, tr *Trace) error {
	b, err := marshal(tr)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// WriteTable writes the trace for people, in lines of at most Width
// characters: long values are cut with "…" (the JSON has them whole).
func WriteTable(w io.Writer, tr *Trace) error {
	p := &printer{w: w}
	p.line("DISPUTE %s", tr.Target)
	if sc := tr.Scope; sc != nil {
		p.blank()
		p.line("CUSTOMER %s  period %s (%s)", sc.Customer, sc.Period, sc.TZ)
		p.kv("period", "%s <= event time < %s", stamp(sc.PeriodStart), stamp(sc.PeriodEnd))
		if len(tr.Usage) > 0 {
			p.line("  usage of the period as the ledger holds it now:")
			var rows [][]string
			for _, u := range tr.Usage {
				rows = append(rows, []string{u.Meter, string(u.Aggregation), u.Quantity.String(), u.Unit,
					strconv.FormatInt(u.Events, 10), strconv.FormatInt(u.Adjustments, 10)})
			}
			p.table("    ", []column{{name: "meter", elastic: true}, {name: "aggregation"}, {name: "quantity"}, {name: "unit", elastic: true},
				{name: "usage rows"}, {name: "adjustments"}}, rows, nil)
		}
	}
	for _, inv := range tr.Invoices {
		p.blank()
		p.invoice(inv)
	}
	if len(tr.Rows) > 0 {
		p.blank()
		p.rows(tr.Rows)
	}
	for _, ev := range tr.Events {
		p.blank()
		p.event(ev)
	}
	p.blank()
	p.summary(tr.Summary)
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) raw(s string) {
	if p.err == nil {
		_, p.err = io.WriteString(p.w, s+"\n")
	}
}

func (p *printer) blank() { p.raw("") }

// line prints one line, cut to Width.
func (p *printer) line(format string, args ...any) { p.raw(clip(fmt.Sprintf(format, args...), Width)) }

// kv prints "  label      value".
func (p *printer) kv(label, format string, args ...any) {
	p.line("  %-11s%s", label, fmt.Sprintf(format, args...))
}

// wrap prints text folded at word boundaries: the first line starts with
// first, the others with indent.
func (p *printer) wrap(first, indent, text string) {
	line, start := first, len(first)
	for _, word := range strings.Fields(text) {
		if len(line) > start && runeLen(line)+1+runeLen(word) > Width {
			p.line("%s", line)
			line, start = indent, len(indent)
		}
		if len(line) > start {
			line += " "
		}
		line += word
	}
	if len(line) > start {
		p.line("%s", line)
	}
}

func (p *printer) invoice(inv InvoiceView) {
	p.line("INVOICE %d  customer %s  period %s (%s)", inv.ID, inv.Customer, inv.Period, inv.TZ)
	p.kv("period", "%s <= event time < %s", stamp(inv.PeriodStart), stamp(inv.PeriodEnd))
	p.kv("cutoff", "recorded before %s, ledger ids <= %d", stamp(inv.Cutoff), inv.LedgerHead)
	p.kv("closed", "%s, %d line(s)", stamp(inv.ClosedAt), inv.LineCount)
	if inv.DigestOK {
		p.kv("digest", "%s recomputed: ok", inv.Digest)
	} else {
		p.kv("digest", "%s stored", inv.Digest)
		p.kv("", "%s recomputed: MISMATCH", inv.DigestRecomputed)
	}
	if inv.Currency != "" {
		p.kv("plan", "%s, prices sha256 %s", inv.Plan, inv.PriceDigest)
		p.kv("money", "fee %s, true-up %s, total %s %s", inv.Fee, inv.TrueUp, inv.Total, inv.Currency)
	}
	if inv.CreditsApplied != "" {
		p.kv("credits", "%s %s applied, amount due %s %s", inv.CreditsApplied, inv.Currency, inv.AmountDue, inv.Currency)
		for _, c := range inv.Credits {
			if g := c.Granted; g != nil {
				p.kv("", "grant %s gave %s (%s left) of %s %s, %s, priority %d", c.Grant, c.Amount, c.BalanceAfter,
					g.Amount, g.Currency, g.Category, g.Priority)
				p.wrap(fmt.Sprintf("  %-11s", "")+"granted by "+g.Actor+": ", fmt.Sprintf("  %-11s  ", ""), g.Reason)
			} else {
				p.kv("", "grant %s gave %s (%s left)", c.Grant, c.Amount, c.BalanceAfter)
			}
		}
	}
	switch {
	case len(inv.MoneyProblems) > 0:
		p.kv("", "recomputed from the prices: MISMATCH")
	case inv.MoneyOK != nil:
		p.kv("", "recomputed from the prices: ok")
	}
	for _, l := range inv.Lines {
		p.blank()
		kind := ""
		if l.Late {
			kind = "  late"
		}
		p.line("LINE %s  %s%s  %s%s", l.Ref, l.Meter, dimension(l.Dimension), l.Aggregation, kind)
		r := l.Recomputed
		p.kv("quantity", "%s%s: %d usage rows, %d adjustments, highest id %d", l.Quantity, unit(l.Unit), l.Rows, l.Adjustments, l.MaxID)
		if r.Quantity.Equal(l.Quantity) && r.Rows == l.Rows && r.Adjustments == l.Adjustments && r.MaxID == l.MaxID {
			p.kv("", "recomputed: the same")
		} else {
			p.kv("", "recomputed: %s%s: %d usage rows, %d adjustments, highest id %d: MISMATCH", r.Quantity, unit(l.Unit), r.Rows, r.Adjustments, r.MaxID)
		}
		what := "usage of"
		if l.Late {
			what = "late usage of"
		}
		p.kv("covers", "%s %s (%s), ledger ids %d < id <= %d", what, l.Period, l.TZ, l.AfterID, l.ThroughID)
		if l.Digest == r.Digest {
			p.kv("digest", "%s recomputed: ok", l.Digest)
		} else {
			p.kv("digest", "%s stored", l.Digest)
			p.kv("", "%s recomputed: MISMATCH", r.Digest)
		}
		if l.Amount != "" {
			p.kv("amount", "%s %s (exactly %s), plan version %s", l.Amount, l.Currency, l.AmountPrecise, l.PlanVersion)
			if l.Late {
				p.kv("", "priced at the margin above %s billed before (recomputed: %s)", l.BilledBefore, l.Recomputed.BilledBefore)
			}
			p.wrap("  breakdown  ", "             ", l.Breakdown)
		}
		if l.Problem != "" {
			p.wrap("  problem    ", "             ", l.Problem)
		}
	}
	for _, msg := range inv.MoneyProblems {
		p.wrap("  money      ", "             ", msg)
	}
}

// rows prints the ledger rows, one table per meter.
func (p *printer) rows(rows []RowView) {
	var meters []string
	byMeter := map[string][]RowView{}
	billing := map[string]bool{}
	for _, r := range rows {
		if byMeter[r.Meter] == nil {
			meters = append(meters, r.Meter)
		}
		byMeter[r.Meter] = append(byMeter[r.Meter], r)
		billing[strings.Join(r.BilledBy, " ")] = true
	}
	for i, m := range meters {
		if i > 0 {
			p.blank()
		}
		p.line("LEDGER ROWS  meter %s", m)
		var prose []bool // an adjustment's or a void's reason, not an event id
		for _, r := range byMeter[m] {
			prose = append(prose, r.Kind != ledger.KindUsage)
		}
		// Event ids of one source share a long prefix: a cut keeps the part
		// that tells them apart.
		event := column{name: "event", elastic: true, fit: func(cells []string, n int) []string { return distinct(cells, prose, n) }}
		cols := []column{{name: "row"}, event, {name: "occurred_at"}, {name: "recorded_at"}, {name: "quantity"}}
		if len(billing) > 1 {
			cols = append(cols, column{name: "billed", elastic: true})
		}
		cols = append(cols, column{name: "chain"})
		var out [][]string
		for _, r := range byMeter[m] {
			event := r.Provider + ":" + r.EventID
			if r.Kind != "usage" {
				event = r.Kind + ": " + r.Reason
			}
			cells := []string{strconv.FormatInt(r.ID, 10), event, stamp(r.OccurredAt), stamp(r.RecordedAt), r.Quantity.String()}
			if len(billing) > 1 {
				var refs []string
				for _, ref := range r.BilledBy {
					refs = append(refs, strings.TrimPrefix(ref, "invoice:"))
				}
				b := strings.Join(refs, " ")
				if b == "" {
					b = "no"
				}
				cells = append(cells, b)
			}
			chain := "ok"
			if r.Chain != "ok" {
				chain = "BROKEN"
			}
			out = append(out, append(cells, chain))
		}
		p.table("  ", cols, out, nil)
	}
	if len(billing) == 1 {
		if b := strings.Join(rows[0].BilledBy, " "); b != "" {
			p.line("  all billed by %s", b)
		} else {
			p.line("  none billed yet")
		}
	} else {
		p.line("  BILLED: the invoice/line billing the row; no: not billed yet (open period or late usage)")
	}
	for _, r := range rows {
		switch {
		case r.Kind == ledger.KindVoid:
			p.wrap(fmt.Sprintf("  row %d voids %s: ", r.ID, strings.Replace(r.Ref, "row:", "row ", 1)), "    ", r.Reason)
		case r.Kind == ledger.KindUsage && r.Ref != "":
			p.line("  row %d amends %s", r.ID, r.Ref)
		case r.Ref != "":
			p.line("  row %d corrects %s", r.ID, r.Ref)
		}
		if r.Chain != "ok" {
			p.wrap(fmt.Sprintf("  row %d: ", r.ID), "    ", r.Chain)
		}
	}
}

func (p *printer) event(ev EventView) {
	typ := ""
	if ev.Receipt != nil {
		typ = "  " + ev.Receipt.Type
	}
	p.line("EVENT %s:%s%s", ev.Provider, ev.EventID, typ)
	if rc := ev.Receipt; rc != nil {
		status := rc.Status
		if rc.Error != "" {
			status += ": " + rc.Error
		}
		p.kv("receipt", "%s, source %s, handler %s", status, rc.Source, rc.HandlerVersion)
		p.kv("received", "%s, processed %s", stamp(rc.ReceivedAt), stamp(rc.ProcessedAt))
		switch {
		case rc.BodyBytes != nil:
			p.kv("body", "%d bytes, SHA-256 %s", *rc.BodyBytes, rc.BodySHA256)
		case rc.BodyMissing:
			p.kv("body", "missing, SHA-256 %s", rc.BodySHA256)
		default:
			p.kv("body", "pruned, SHA-256 %s", rc.BodySHA256)
		}
	} else {
		p.kv("receipt", "deleted by retention")
	}
	v := ev.Verification
	if v.Status == Valid {
		p.kv("signature", "valid (%s, secret %d)", v.Scheme, v.Secret)
	} else {
		p.kv("signature", "%s", v.Text)
		p.wrap("             ", "             ", v.Detail)
	}
	if len(ev.RowIDs) > 0 {
		ids := make([]string, len(ev.RowIDs))
		for i, id := range ev.RowIDs {
			ids[i] = strconv.FormatInt(id, 10)
		}
		p.kv("rows", "%s", strings.Join(ids, ", "))
	}
	if len(ev.Attempts) == 0 {
		p.kv("attempts", "none recorded")
		return
	}
	p.kv("attempts", "%d", len(ev.Attempts))
	var out [][]string
	var notes []string
	for _, a := range ev.Attempts {
		age := "-"
		if a.SignatureAgeMS != nil {
			age = (time.Duration(*a.SignatureAgeMS) * time.Millisecond).String()
		}
		sig := a.Signature.Text
		if a.Signature.Status != Valid {
			sig = shortStatus(a.Signature.Status)
		}
		out = append(out, []string{a.Label(), stamp(a.ReceivedAt), a.Outcome, strconv.Itoa(a.StatusCode), age, sig})
		note := "from " + a.RemoteAddr
		if a.UserAgent != "" {
			note += ", " + a.UserAgent
		}
		notes = append(notes, note)
	}
	p.table("    ", []column{{name: "id"}, {name: "received"}, {name: "outcome"}, {name: "code"}, {name: "sig_age"},
		{name: "signature"}}, out, notes)
	for _, a := range ev.Attempts {
		if a.Signature.Status != Valid && a.Signature.Status != ev.Verification.Status {
			p.wrap(fmt.Sprintf("    %s: ", a.Name()), "      ", a.Signature.Text+": "+a.Signature.Detail)
		}
	}
}

func (p *printer) summary(s Summary) {
	p.line("SUMMARY")
	voids := ""
	if s.Voids > 0 {
		voids = ", " + plural(s.Voids, "void")
	}
	p.line("  ledger: %s, %s%s, %d not billed yet", plural(s.UsageRows, "usage row"), plural(s.Adjustments, "adjustment"), voids, s.UnbilledRows)
	p.line("  events: %d, %s (%s, %s)", s.Events, plural(s.Attempts, "delivery attempt"), plural(s.Duplicates, "duplicate"),
		plural(s.PayloadMismatches, "payload mismatch"))
	p.wrap("  bodies: ", "          ", s.Bodies.String())
	p.wrap("  attempt signatures: ", "                      ", s.Signatures.String())
	if s.Bodies.APIKey+s.Signatures.APIKey > 0 {
		p.wrap("  verified by API key: ", "    ", "ingest API events carry no provider signature; for each, the API key recorded "+
			"on arrival is a stored key of the event's scope, and the body hashes to the digest recorded on arrival")
	}
	money := ""
	if s.MoneyOK != nil {
		money = "; money: " + okWord(*s.MoneyOK, "ok", "MISMATCH")
	}
	p.line("  hash chain: %s; invoice digests and lines: %s%s", okWord(s.ChainOK, "ok", "BROKEN"), okWord(s.InvoicesOK, "ok", "MISMATCH"), money)
	for _, prob := range s.Problems {
		p.wrap("  PROBLEM: ", "           ", prob)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "h") {
		return fmt.Sprintf("%d %ses", n, what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// String is the tally as the summary says it; ingest API events, checked by
// their API key and body digest, are named only when there are some.
func (c Counts) String() string {
	key := ""
	if c.APIKey > 0 {
		key = fmt.Sprintf("%d verified by API key, ", c.APIKey)
	}
	return fmt.Sprintf("%d valid, %s%d invalid, %d not verifiable, %d pruned", c.Valid, key, c.Invalid, c.NotVerifiable, c.Pruned)
}

func shortStatus(s string) string {
	switch s {
	case NotVerifiable:
		return "not verifiable"
	case APIKey:
		return "API key ok"
	}
	return s
}

func unit(u string) string {
	if u == "" {
		return ""
	}
	return " " + u
}

// stamp is a time in RFC 3339, with all three digits of milliseconds when it has any.
func stamp(t time.Time) string {
	if t.Nanosecond() == 0 {
		return t.Format(time.RFC3339)
	}
	return t.Format("2006-01-02T15:04:05.000Z07:00")
}

type column struct {
	name    string
	elastic bool // may be cut to fit Width
	// fit, when set, cuts the column's cells to n characters, all at once
	// (so it can keep what tells them apart); clip cuts each otherwise.
	fit func(cells []string, n int) []string
}

// table prints aligned columns; when the table is wider than Width, the
// widest elastic column gives way first, down to its header's width.
// notes, when given, puts a line under each row, aligned with the second column.
func (p *printer) table(indent string, cols []column, rows [][]string, notes []string) {
	widths := make([]int, len(cols))
	for i, c := range cols {
		widths[i] = len(c.name)
	}
	for _, r := range rows {
		for i, v := range r {
			widths[i] = max(widths[i], runeLen(v))
		}
	}
	total := func() int {
		n := len(indent) + 2*(len(cols)-1)
		for _, w := range widths {
			n += w
		}
		return n
	}
	for total() > Width {
		best := -1
		for i, c := range cols {
			if c.elastic && widths[i] > max(len(c.name), 6) && (best < 0 || widths[i] > widths[best]) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		widths[best]--
	}
	for i, c := range cols {
		if c.fit == nil {
			continue
		}
		cells := make([]string, len(rows))
		for j, r := range rows {
			cells[j] = r[i]
		}
		for j, v := range c.fit(cells, widths[i]) {
			rows[j][i] = v
		}
	}
	emit := func(cells []string) {
		var b strings.Builder
		b.WriteString(indent)
		for i, v := range cells {
			v = clip(v, widths[i])
			b.WriteString(v)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-runeLen(v)+2))
			}
		}
		p.line("%s", b.String())
	}
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = strings.ToUpper(c.name)
	}
	emit(header)
	for i, r := range rows {
		emit(r)
		if i < len(notes) && notes[i] != "" {
			p.line("%s%s", indent+strings.Repeat(" ", widths[0]+2), notes[i])
		}
	}
}

func runeLen(s string) int { return utf8.RuneCountInString(s) }

// clip cuts s to n characters, marking the cut with "…".
func clip(s string, n int) string {
	if runeLen(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// distinct cuts each cell longer than n characters to n so that it still
// differs from the others where clip's cut would make them alike: event ids
// of one source share a long prefix and differ at the end
// (api:app:api-gateway#cus_big_0001, …_0002). A cut keeps the head and, after
// "…", the tail from where the cell first differs from its nearest
// neighbour; when that tail does not fit, a window from just before there,
// marked "…" on both sides. prose[i] marks a cell of words (a reason), cut by clip.
func distinct(cells []string, prose []bool, n int) []string {
	var ids []string
	for i, c := range cells {
		if !prose[i] && runeLen(c) > n {
			ids = append(ids, c)
		}
	}
	if len(ids) == 0 || n < 3 {
		return clipAll(cells, n)
	}
	// The nearest neighbour of a string, by shared prefix, is next to it
	// in sorted order.
	var all []string
	for i, c := range cells {
		if !prose[i] {
			all = append(all, c)
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	differs := make(map[string]int, len(all)) // rune index of the first rune no neighbour shares
	for i, c := range all {
		d := 0
		if i > 0 {
			d = max(d, commonPrefix(all[i-1], c))
		}
		if i+1 < len(all) {
			d = max(d, commonPrefix(c, all[i+1]))
		}
		differs[c] = d
	}
	out := make([]string, len(cells))
	for i, c := range cells {
		if prose[i] || runeLen(c) <= n {
			out[i] = clip(c, n)
			continue
		}
		r, p := []rune(c), differs[c]
		head := (n - 1) / 3
		tail := n - 1 - head
		switch {
		case p < head || len(r)-tail <= p: // the head or the tail shows where it differs
			out[i] = string(r[:head]) + "…" + string(r[len(r)-tail:])
		case p < n-1: // the head alone shows it
			out[i] = clip(c, n)
		case len(r)-p <= n-1: // all of the tail from there, after less of the head
			out[i] = string(r[:n-1-(len(r)-p)]) + "…" + string(r[p:])
		default: // from a little before where it differs
			from := max(head, p-3)
			out[i] = string(r[:head]) + "…" + string(r[from:from+n-2-head]) + "…"
		}
	}
	return out
}

func clipAll(cells []string, n int) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		out[i] = clip(c, n)
	}
	return out
}

// commonPrefix is how many leading runes a and b share.
func commonPrefix(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	n := 0
	for n < len(ra) && n < len(rb) && ra[n] == rb[n] {
		n++
	}
	return n
}

// dimension is " model=gpt-4o" for a line of one dimension value, "" else.
func dimension(label string) string {
	if label == "" {
		return ""
	}
	return " " + label
}
