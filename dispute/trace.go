package dispute

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
)

// Trace is everything behind a disputed charge. It holds no time of its own
// making, so tracing the same database twice gives the same trace.
type Trace struct {
	Target   string             `json:"target"`
	Kind     string             `json:"kind"`
	Scope    *Scope             `json:"scope,omitempty"`
	Invoices []InvoiceView      `json:"invoices"`
	Usage    []ledger.UsageLine `json:"usage,omitempty"`
	Rows     []RowView          `json:"rows"`
	Events   []EventView        `json:"events"`
	Summary  Summary            `json:"summary"`
}

// Scope is the customer and event-time period of a customer trace.
type Scope struct {
	Customer    string    `json:"customer"`
	Period      string    `json:"period"`
	TZ          string    `json:"tz"`
	PeriodStart time.Time `json:"period_start"`
	PeriodEnd   time.Time `json:"period_end"`
}

// InvoiceView is a closed invoice with its digest recomputed. Lines holds
// the lines in the trace, not necessarily all of them; the digest covers all.
type InvoiceView struct {
	ID               int64      `json:"id"`
	Customer         string     `json:"customer"`
	Period           string     `json:"period"`
	TZ               string     `json:"tz"`
	PeriodStart      time.Time  `json:"period_start"`
	PeriodEnd        time.Time  `json:"period_end"`
	Cutoff           time.Time  `json:"cutoff"`
	LedgerHead       int64      `json:"ledger_head"`
	ClosedAt         time.Time  `json:"closed_at"`
	LineCount        int        `json:"line_count"`
	Digest           string     `json:"digest"`
	DigestRecomputed string     `json:"digest_recomputed"`
	DigestOK         bool       `json:"digest_ok"`
	Lines            []LineView `json:"lines"`
}

// LineView is an invoice line beside its recomputation from the ledger.
type LineView struct {
	Ref         string             `json:"ref"` // invoice:ID/LINE
	Invoice     int64              `json:"invoice"`
	Line        int64              `json:"line"`
	Customer    string             `json:"customer"`
	Meter       string             `json:"meter"`
	Aggregation ledger.Aggregation `json:"aggregation"`
	Property    string             `json:"property,omitempty"`
	Unit        string             `json:"unit,omitempty"`
	Late        bool               `json:"late"`
	Period      string             `json:"period"`
	TZ          string             `json:"tz"`
	PeriodStart time.Time          `json:"period_start"`
	PeriodEnd   time.Time          `json:"period_end"`
	AfterID     int64              `json:"after_id"`
	ThroughID   int64              `json:"through_id"`
	Quantity    ledger.Quantity    `json:"quantity"`
	Rows        int64              `json:"rows"`
	Adjustments int64              `json:"adjustments"`
	MaxID       int64              `json:"max_id"`
	Digest      string             `json:"digest"`
	Recomputed  Recomputed         `json:"recomputed"`
	OK          bool               `json:"ok"`
	Problem     string             `json:"problem,omitempty"`
	// RowIDs are the covered rows, listed when the trace shows them.
	RowIDs []int64 `json:"row_ids,omitempty"`
}

// Recomputed is an invoice line computed again from the ledger as it is now.
type Recomputed struct {
	Quantity    ledger.Quantity `json:"quantity"`
	Rows        int64           `json:"rows"`
	Adjustments int64           `json:"adjustments"`
	MaxID       int64           `json:"max_id"`
	Digest      string          `json:"digest"`
}

// RowView is one ledger row with its place in the hash chain checked.
type RowView struct {
	ID         int64           `json:"id"`
	Kind       string          `json:"kind"`
	Provider   string          `json:"provider,omitempty"`
	EventID    string          `json:"event_id"`
	Customer   string          `json:"customer"`
	Meter      string          `json:"meter"`
	Quantity   ledger.Quantity `json:"quantity"`
	Properties string          `json:"properties,omitempty"`
	Reason     string          `json:"reason,omitempty"`
	Ref        string          `json:"ref,omitempty"`
	OccurredAt time.Time       `json:"occurred_at"`
	RecordedAt time.Time       `json:"recorded_at"`
	PrevHash   string          `json:"prev_hash"`
	RowHash    string          `json:"row_hash"`
	// Chain is "ok" or what is wrong with the row's links.
	Chain string `json:"chain"`
	// BilledBy lists the invoice lines billing the row (invoice:ID/LINE);
	// empty while its period is open or its late usage awaits an invoice.
	BilledBy []string `json:"billed_by"`
}

// EventView is one event: its receipt, every delivery attempt and the
// re-verification of the stored body.
type EventView struct {
	Provider     string        `json:"provider"`
	EventID      string        `json:"event_id"`
	Receipt      *ReceiptView  `json:"receipt"` // null when retention deleted the receipt
	Verification Verification  `json:"verification"`
	Attempts     []AttemptView `json:"attempts"`
	RowIDs       []int64       `json:"row_ids"`

	body []byte // the raw body, for the bundle
}

// ReceiptView is the stored receipt of an event.
type ReceiptView struct {
	Type             string    `json:"type"`
	Status           string    `json:"status"`
	Error            string    `json:"error,omitempty"`
	Source           string    `json:"source"`
	HandlerVersion   string    `json:"handler_version"`
	ReceivedAt       time.Time `json:"received_at"`
	ProcessedAt      time.Time `json:"processed_at"`
	BodySHA256       string    `json:"body_sha256"`
	BodyBytes        *int      `json:"body_bytes"` // null when pruned
	BodyPruned       bool      `json:"body_pruned"`
	SignatureHeaders string    `json:"signature_headers"`
}

// AttemptView is one delivery of an event, with its own signature checked.
type AttemptView struct {
	ID               int64        `json:"id"`
	ReceivedAt       time.Time    `json:"received_at"`
	RemoteAddr       string       `json:"remote_addr"`
	UserAgent        string       `json:"user_agent"`
	RequestID        string       `json:"request_id"`
	Outcome          string       `json:"outcome"`
	StatusCode       int          `json:"status_code"`
	SignatureAgeMS   *int64       `json:"signature_age_ms"` // null when the scheme signs no timestamp
	BodySHA256       string       `json:"body_sha256"`
	SignatureHeaders string       `json:"signature_headers"`
	Signature        Verification `json:"signature"`
}

// Summary counts what the trace holds and lists what did not check out.
type Summary struct {
	UsageRows         int      `json:"usage_rows"`
	Adjustments       int      `json:"adjustments"`
	UnbilledRows      int      `json:"unbilled_rows"`
	Events            int      `json:"events"`
	Attempts          int      `json:"attempts"`
	Duplicates        int      `json:"duplicates"`
	PayloadMismatches int      `json:"payload_mismatches"`
	Bodies            Counts   `json:"bodies"`
	Signatures        Counts   `json:"attempt_signatures"`
	ChainOK           bool     `json:"chain_ok"`
	InvoicesOK        bool     `json:"invoices_ok"`
	Problems          []string `json:"problems"`
}

// Counts tallies verification statuses.
type Counts struct {
	Valid         int `json:"valid"`
	Invalid       int `json:"invalid"`
	NotVerifiable int `json:"not_verifiable"`
	Pruned        int `json:"pruned"`
}

func (c *Counts) add(status string) {
	switch status {
	case Valid:
		c.Valid++
	case Invalid:
		c.Invalid++
	case NotVerifiable:
		c.NotVerifiable++
	case Pruned:
		c.Pruned++
	}
}

// Tracer builds traces from the database.
type Tracer struct {
	DB       *sqlx.DB // the read pool
	Verifier *Verifier
	// Meters declares aggregations for the customer view's usage totals.
	Meters ledger.Meters
}

// Trace follows target (see ParseTarget) to its evidence.
func (t *Tracer) Trace(ctx context.Context, target string) (*Trace, error) {
	tg, err := ParseTarget(target)
	if err != nil {
		return nil, err
	}
	return t.trace(ctx, tg.String(), tg.Kind, func(b *builder) error { return b.target(tg) })
}

// Customer traces every charge of customer in the event-time period: the
// period's invoice (with any late lines it bills), late lines of later
// invoices billing the period, and every ledger row of the period, billed or
// not, down to each event's deliveries.
func (t *Tracer) Customer(ctx context.Context, customer string, p ledger.Period) (*Trace, error) {
	if customer == "" {
		return nil, errors.New("customer: required")
	}
	return t.trace(ctx, "customer:"+customer+"@"+p.Label, KindCustomer, func(b *builder) error { return b.customer(customer, p, t.Meters) })
}

func (t *Tracer) trace(ctx context.Context, target, kind string, fill func(*builder) error) (*Trace, error) {
	// One read transaction: the trace is a single snapshot even while serve writes.
	tx, err := t.DB.BeginTxx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("dispute: begin read: %w", err)
	}
	defer tx.Rollback()
	b := &builder{ctx: ctx, q: tx, v: t.Verifier, tr: &Trace{Target: target, Kind: kind},
		invoices: map[int64]*invoiceAcc{}, rows: map[int64]*RowView{}, rowsRead: map[int64]ledger.Row{},
		lines: map[string][]ledger.InvoiceLine{}, events: map[eventKey]*EventView{}}
	if err := fill(b); err != nil {
		return nil, err
	}
	if err := b.finish(); err != nil {
		return nil, err
	}
	return b.tr, nil
}

type eventKey struct{ provider, id string }

type invoiceAcc struct {
	view  InvoiceView
	lines map[int64]*LineView
}

// builder gathers invoices, lines, rows and events, each once.
type builder struct {
	ctx      context.Context
	q        sqlx.QueryerContext
	v        *Verifier
	tr       *Trace
	invoices map[int64]*invoiceAcc
	rows     map[int64]*RowView
	rowsRead map[int64]ledger.Row // the rows as read, for the chain checks
	lines    map[string][]ledger.InvoiceLine
	events   map[eventKey]*EventView
	eventSeq []eventKey // events named by the target come first
	loaded   int        // eventSeq[:loaded] have their receipts and attempts
}

func (b *builder) target(tg Target) error {
	switch tg.Kind {
	case KindInvoice, KindLine:
		inv, err := ledger.GetInvoice(b.ctx, b.q, tg.Invoice)
		if errors.Is(err, ledger.ErrNoInvoice) {
			return fmt.Errorf("%s: %w: there is no invoice %d (see `hookledger invoice list`)", tg, ErrNotFound, tg.Invoice)
		}
		if err != nil {
			return err
		}
		b.addInvoice(inv)
		found := false
		for _, l := range inv.Lines {
			if tg.Kind == KindInvoice || l.LineNo == tg.Line {
				found = true
				if err := b.addLine(inv, l, true); err != nil {
					return err
				}
			}
		}
		if tg.Kind == KindLine && !found {
			return fmt.Errorf("%s: %w: invoice %d has no line %d (it has %d)", tg, ErrNotFound, tg.Invoice, tg.Line, len(inv.Lines))
		}
		return nil
	case KindRow:
		r, err := ledger.GetRow(b.ctx, b.q, tg.Row)
		if errors.Is(err, ledger.ErrNoRow) {
			return fmt.Errorf("%s: %w: the ledger has no row %d", tg, ErrNotFound, tg.Row)
		}
		if err != nil {
			return err
		}
		return b.addRow(*r)
	case KindEvent:
		rows, err := ledger.EventRows(b.ctx, b.q, tg.Provider, tg.EventID)
		if err != nil {
			return err
		}
		ev := b.wantEvent(tg.Provider, tg.EventID)
		if err := b.loadEvents(); err != nil {
			return err
		}
		if ev.Receipt == nil && len(rows) == 0 {
			return fmt.Errorf("%s: %w: no receipt and no ledger row for event %q of provider %q", tg, ErrNotFound, tg.EventID, tg.Provider)
		}
		for _, r := range rows {
			if err := b.addRow(r); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("%w: kind %q", ErrBadTarget, tg.Kind)
}

func (b *builder) customer(customer string, p ledger.Period, meters ledger.Meters) error {
	start, end := p.Start.UnixMilli(), p.End.UnixMilli()
	b.tr.Scope = &Scope{Customer: customer, Period: p.Label, TZ: p.Zone, PeriodStart: p.Start, PeriodEnd: p.End}
	invs, err := ledger.ListInvoices(b.ctx, b.q, ledger.InvoiceFilter{Customer: customer, PeriodStart: start, PeriodEnd: end})
	if err != nil {
		return err
	}
	for i := range invs {
		for _, l := range invs[i].Lines {
			if err := b.addLine(&invs[i], l, true); err != nil {
				return err
			}
		}
	}
	late, err := ledger.LinesForPeriod(b.ctx, b.q, customer, start, end)
	if err != nil {
		return err
	}
	for _, l := range late {
		inv, err := b.invoice(l.InvoiceID)
		if err != nil {
			return err
		}
		if err := b.addLine(inv, l, true); err != nil {
			return err
		}
	}
	rows, err := ledger.PeriodRows(b.ctx, b.q, customer, start, end)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if err := b.addRow(r); err != nil {
			return err
		}
	}
	rep, err := ledger.Query(b.ctx, b.q, ledger.UsageQuery{From: p.Start, To: p.End, Customer: customer, Meters: meters,
		GroupBy: []string{ledger.GroupMeter}})
	if err != nil {
		return err
	}
	b.tr.Usage = rep.Lines
	if len(b.invoices) == 0 && len(b.rows) == 0 {
		return fmt.Errorf("customer %q: %w: no invoice and no ledger rows for %s", customer, ErrNotFound, p)
	}
	return nil
}

// invoice reads an invoice once per trace (for its digest, over all lines).
func (b *builder) invoice(id int64) (*ledger.Invoice, error) {
	return ledger.GetInvoice(b.ctx, b.q, id)
}

// addInvoice adds an invoice once, with its digest recomputed over all its lines.
func (b *builder) addInvoice(inv *ledger.Invoice) *invoiceAcc {
	acc := b.invoices[inv.ID]
	if acc == nil {
		recomputed := ledger.InvoiceDigest(inv)
		acc = &invoiceAcc{lines: map[int64]*LineView{}, view: InvoiceView{
			ID: inv.ID, Customer: inv.Customer, Period: inv.Period, TZ: inv.TZ,
			PeriodStart: zoned(inv.PeriodStart, inv.TZ), PeriodEnd: zoned(inv.PeriodEnd, inv.TZ),
			Cutoff: utc(inv.Cutoff), LedgerHead: inv.LedgerHead, ClosedAt: utc(inv.ClosedAt), LineCount: len(inv.Lines),
			Digest: hex.EncodeToString(inv.Digest), DigestRecomputed: hex.EncodeToString(recomputed),
			DigestOK: bytes.Equal(recomputed, inv.Digest), Lines: []LineView{}}}
		b.invoices[inv.ID] = acc
	}
	return acc
}

// addLine adds an invoice line (and its invoice) with its recomputation;
// withRows also adds every row it covers.
func (b *builder) addLine(inv *ledger.Invoice, l ledger.InvoiceLine, withRows bool) error {
	acc := b.addInvoice(inv)
	lv := acc.lines[l.LineNo]
	if lv != nil && (!withRows || lv.RowIDs != nil) {
		return nil
	}
	check, err := ledger.CheckLine(b.ctx, b.q, l)
	if err != nil {
		return err
	}
	lv = &LineView{Ref: lineRef(l.InvoiceID, l.LineNo), Invoice: l.InvoiceID, Line: l.LineNo, Customer: l.Customer, Meter: l.Meter,
		Aggregation: l.Aggregation, Property: l.Property, Unit: l.Unit, Late: l.Late, Period: l.Period, TZ: l.TZ,
		PeriodStart: zoned(l.PeriodStart, l.TZ), PeriodEnd: zoned(l.PeriodEnd, l.TZ), AfterID: l.AfterID, ThroughID: l.ThroughID,
		Quantity: l.Quantity, Rows: l.Rows, Adjustments: l.Adjustments, MaxID: l.MaxID, Digest: hex.EncodeToString(l.Digest),
		Recomputed: Recomputed{Quantity: check.Quantity, Rows: check.UsageRows, Adjustments: check.Adjustments, MaxID: check.MaxID,
			Digest: hex.EncodeToString(check.Digest)},
		OK: check.Problem == "", Problem: check.Problem}
	acc.lines[l.LineNo] = lv
	if !withRows {
		return nil
	}
	lv.RowIDs = make([]int64, 0, len(check.Rows))
	for _, r := range check.Rows {
		lv.RowIDs = append(lv.RowIDs, r.ID)
		if err := b.addRow(r); err != nil {
			return err
		}
	}
	return nil
}

func (b *builder) addRow(r ledger.Row) error {
	if b.rows[r.ID] != nil {
		return nil
	}
	props := r.Properties
	if props == "{}" {
		props = ""
	}
	b.rowsRead[r.ID] = r
	b.rows[r.ID] = &RowView{ID: r.ID, Kind: r.Kind, Provider: r.Provider, EventID: r.EventID, Customer: r.Customer, Meter: r.Meter,
		Quantity: r.Quantity, Properties: props, Reason: r.Reason, Ref: r.Ref, OccurredAt: utc(r.OccurredAt), RecordedAt: utc(r.RecordedAt),
		PrevHash: hex.EncodeToString(r.PrevHash), RowHash: hex.EncodeToString(r.RowHash), Chain: "ok", BilledBy: []string{}}
	return nil
}

// finish checks the rows' chain links, bills each row to its lines, adds the
// events behind the usage rows, orders everything and sums it up.
func (b *builder) finish() error {
	ids := make([]int64, 0, len(b.rows))
	for id := range b.rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rows := make([]ledger.Row, len(ids))
	for i, id := range ids {
		rows[i] = b.rowsRead[id]
	}
	problems, err := ledger.CheckLinksBatch(b.ctx, b.q, rows)
	if err != nil {
		return err
	}
	for _, r := range rows {
		rv := b.rows[r.ID]
		if p, ok := problems[r.ID]; ok {
			rv.Chain = p
		}
		lines, ok := b.lines[r.Customer]
		if !ok {
			if lines, err = ledger.CustomerLines(b.ctx, b.q, r.Customer); err != nil {
				return err
			}
			b.lines[r.Customer] = lines
		}
		for _, l := range lines {
			if !l.Covers(r) {
				continue
			}
			rv.BilledBy = append(rv.BilledBy, lineRef(l.InvoiceID, l.LineNo))
			if b.invoices[l.InvoiceID] == nil || b.invoices[l.InvoiceID].lines[l.LineNo] == nil {
				inv, err := b.invoice(l.InvoiceID)
				if err != nil {
					return err
				}
				if err := b.addLine(inv, l, false); err != nil {
					return err
				}
			}
		}
		if rv.Kind == ledger.KindUsage {
			ev := b.wantEvent(rv.Provider, rv.EventID)
			ev.RowIDs = append(ev.RowIDs, rv.ID)
		}
		b.tr.Rows = append(b.tr.Rows, *rv)
	}
	if b.tr.Rows == nil {
		b.tr.Rows = []RowView{}
	}
	if err := b.loadEvents(); err != nil {
		return err
	}

	invIDs := make([]int64, 0, len(b.invoices))
	for id := range b.invoices {
		invIDs = append(invIDs, id)
	}
	slices.Sort(invIDs)
	b.tr.Invoices = []InvoiceView{}
	for _, id := range invIDs {
		acc := b.invoices[id]
		for _, lv := range acc.lines {
			acc.view.Lines = append(acc.view.Lines, *lv)
		}
		slices.SortFunc(acc.view.Lines, func(x, y LineView) int { return cmp.Compare(x.Line, y.Line) })
		b.tr.Invoices = append(b.tr.Invoices, acc.view)
	}
	b.tr.Events = make([]EventView, 0, len(b.eventSeq))
	for _, k := range b.eventSeq {
		b.tr.Events = append(b.tr.Events, *b.events[k])
	}
	b.summarize()
	return nil
}

func (b *builder) summarize() {
	s := &b.tr.Summary
	s.ChainOK, s.InvoicesOK, s.Problems = true, true, []string{}
	for _, inv := range b.tr.Invoices {
		if !inv.DigestOK {
			s.InvoicesOK = false
			s.Problems = append(s.Problems, fmt.Sprintf("invoice %d: stored digest does not match its fields and lines: the invoice was changed after it was closed", inv.ID))
		}
		for _, l := range inv.Lines {
			if !l.OK {
				s.InvoicesOK = false
				s.Problems = append(s.Problems, fmt.Sprintf("%s: %s", l.Ref, l.Problem))
			}
		}
	}
	for _, r := range b.tr.Rows {
		switch r.Kind {
		case ledger.KindUsage:
			s.UsageRows++
		case ledger.KindAdjustment:
			s.Adjustments++
		}
		if len(r.BilledBy) == 0 {
			s.UnbilledRows++
		}
		if len(r.BilledBy) > 1 {
			s.Problems = append(s.Problems, fmt.Sprintf("row %d is billed by %d invoice lines (%v)", r.ID, len(r.BilledBy), r.BilledBy))
		}
		if r.Chain != "ok" {
			s.ChainOK = false
			s.Problems = append(s.Problems, fmt.Sprintf("row %d: %s", r.ID, r.Chain))
		}
	}
	for _, e := range b.tr.Events {
		s.Events++
		s.Bodies.add(e.Verification.Status)
		if e.Verification.Status == Invalid {
			s.Problems = append(s.Problems, fmt.Sprintf("event %s:%s: %s", e.Provider, e.EventID, e.Verification.Detail))
		}
		for _, a := range e.Attempts {
			s.Attempts++
			s.Signatures.add(a.Signature.Status)
			switch a.Outcome {
			case receiver.OutcomeDuplicate:
				s.Duplicates++
			case receiver.OutcomePayloadMismatch:
				s.PayloadMismatches++
			}
			if a.Signature.Status == Invalid && e.Verification.Status != Invalid {
				s.Problems = append(s.Problems, fmt.Sprintf("event %s:%s attempt %d: %s", e.Provider, e.EventID, a.ID, a.Signature.Detail))
			}
		}
	}
}

// wantEvent adds an event to the trace; loadEvents reads it.
func (b *builder) wantEvent(provider, eventID string) *EventView {
	k := eventKey{provider, eventID}
	ev := b.events[k]
	if ev == nil {
		ev = &EventView{Provider: provider, EventID: eventID, Attempts: []AttemptView{}, RowIDs: []int64{}}
		b.events[k] = ev
		b.eventSeq = append(b.eventSeq, k)
	}
	return ev
}

type receiptRow struct {
	Provider       string `db:"provider"`
	EventID        string `db:"event_id"`
	Type           string `db:"event_type"`
	Status         string `db:"status"`
	Error          string `db:"error"`
	Source         string `db:"source"`
	HandlerVersion string `db:"handler_version"`
	ReceivedAt     int64  `db:"received_at"`
	ProcessedAt    int64  `db:"processed_at"`
	Body           []byte `db:"body"`
	Pruned         bool   `db:"pruned"`
	SHA            []byte `db:"body_sha256"`
	Headers        string `db:"signature_headers"`
}

type attemptRow struct {
	Provider   string        `db:"provider"`
	EventID    string        `db:"event_id"`
	ID         int64         `db:"id"`
	ReceivedAt int64         `db:"received_at"`
	RemoteAddr string        `db:"remote_addr"`
	UserAgent  string        `db:"user_agent"`
	RequestID  string        `db:"request_id"`
	SHA        []byte        `db:"body_sha256"`
	Headers    string        `db:"signature_headers"`
	Age        sql.NullInt64 `db:"signature_age_ms"`
	Outcome    string        `db:"outcome"`
	StatusCode int           `db:"status_code"`
}

// eventChunk bounds the ids per query, well under SQLite's variable limit.
const eventChunk = 500

// loadEvents reads the receipts and attempts of the events added since the
// last call, a provider and a chunk of ids per query, and re-verifies them.
func (b *builder) loadEvents() error {
	keys := b.eventSeq[b.loaded:]
	b.loaded = len(b.eventSeq)
	byProvider := map[string][]string{}
	var providers []string
	for _, k := range keys {
		if byProvider[k.provider] == nil {
			providers = append(providers, k.provider)
		}
		byProvider[k.provider] = append(byProvider[k.provider], k.id)
	}
	receipts := map[eventKey]*receiptRow{}
	attempts := map[eventKey][]attemptRow{}
	for _, p := range providers {
		ids := byProvider[p]
		for len(ids) > 0 {
			n := min(eventChunk, len(ids))
			args := make([]any, 0, n+1)
			args = append(args, p)
			for _, id := range ids[:n] {
				args = append(args, id)
			}
			in := `provider = ? AND event_id IN (?` + strings.Repeat(", ?", n-1) + `)`
			var rs []receiptRow
			if err := sqlx.SelectContext(b.ctx, b.q, &rs, `SELECT provider, event_id, event_type, status, error, source, handler_version,
				received_at, processed_at, body, body IS NULL AS pruned, body_sha256, signature_headers FROM receipts WHERE `+in, args...); err != nil {
				return fmt.Errorf("read receipts of %s: %w", p, err)
			}
			for i := range rs {
				receipts[eventKey{rs[i].Provider, rs[i].EventID}] = &rs[i]
			}
			var as []attemptRow
			if err := sqlx.SelectContext(b.ctx, b.q, &as, `SELECT provider, event_id, id, received_at, remote_addr, user_agent, request_id,
				body_sha256, signature_headers, signature_age_ms, outcome, status_code FROM delivery_attempts WHERE `+in+` ORDER BY id`, args...); err != nil {
				return fmt.Errorf("read delivery attempts of %s: %w", p, err)
			}
			for _, a := range as {
				k := eventKey{a.Provider, a.EventID}
				attempts[k] = append(attempts[k], a)
			}
			ids = ids[n:]
		}
	}
	for _, k := range keys {
		b.fillEvent(b.events[k], receipts[k], attempts[k])
	}
	return nil
}

// fillEvent puts a receipt and its attempts on ev and re-verifies them.
func (b *builder) fillEvent(ev *EventView, rc *receiptRow, attempts []attemptRow) {
	var st *stored
	headers := ""
	if rc != nil {
		st = &stored{provider: ev.Provider, source: rc.Source, body: rc.Body, pruned: rc.Pruned, sha: rc.SHA}
		if !rc.Pruned && st.body == nil {
			st.body = []byte{} // an empty body is not a pruned one
		}
		headers = rc.Headers
		ev.Receipt = &ReceiptView{Type: rc.Type, Status: rc.Status, Error: rc.Error, Source: rc.Source, HandlerVersion: rc.HandlerVersion,
			ReceivedAt: utc(rc.ReceivedAt), ProcessedAt: utc(rc.ProcessedAt), BodySHA256: hex.EncodeToString(rc.SHA),
			BodyPruned: rc.Pruned, SignatureHeaders: rc.Headers}
		if !rc.Pruned {
			n := len(st.body)
			ev.Receipt.BodyBytes = &n
			ev.body = st.body
		}
	}
	var inserted []byte
	for _, a := range attempts {
		av := AttemptView{ID: a.ID, ReceivedAt: utc(a.ReceivedAt), RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent, RequestID: a.RequestID,
			Outcome: a.Outcome, StatusCode: a.StatusCode, BodySHA256: hex.EncodeToString(a.SHA), SignatureHeaders: a.Headers,
			Signature: b.v.attempt(st, a.Headers, a.Outcome, a.SHA)}
		if a.Age.Valid {
			age := a.Age.Int64
			av.SignatureAgeMS = &age
		}
		if a.Outcome == receiver.OutcomeInserted && inserted == nil {
			inserted = a.SHA
		}
		ev.Attempts = append(ev.Attempts, av)
	}
	ev.Verification = b.v.receipt(st, headers, inserted)
}

func lineRef(invoice, line int64) string { return fmt.Sprintf("invoice:%d/%d", invoice, line) }

func utc(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func zoned(ms int64, tz string) time.Time {
	loc, err := ledger.LoadZone(tz)
	if err != nil {
		loc = time.UTC
	}
	return time.UnixMilli(ms).In(loc)
}
