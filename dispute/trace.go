package dispute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
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
	ID               int64     `json:"id"`
	Customer         string    `json:"customer"`
	Period           string    `json:"period"`
	TZ               string    `json:"tz"`
	PeriodStart      time.Time `json:"period_start"`
	PeriodEnd        time.Time `json:"period_end"`
	Cutoff           time.Time `json:"cutoff"`
	LedgerHead       int64     `json:"ledger_head"`
	ClosedAt         time.Time `json:"closed_at"`
	LineCount        int       `json:"line_count"`
	Digest           string    `json:"digest"`
	DigestRecomputed string    `json:"digest_recomputed"`
	DigestOK         bool      `json:"digest_ok"`
	Money
	// Credits are the prepaid grants behind the invoice (nil: none paid it).
	Credits []CreditView `json:"credits,omitempty"`
	Lines   []LineView   `json:"lines"`
}

// Money is what a priced invoice charges, as frozen at its close, with the
// price snapshot that made it and the recomputation `hookledger verify`
// runs (invoice.CheckInvoiceMoney). All of it is left out for an invoice no
// plan priced.
type Money struct {
	Plan     string `json:"plan,omitempty"`
	Currency string `json:"currency,omitempty"`
	Fee      string `json:"fee,omitempty"`
	TrueUp   string `json:"true_up,omitempty"` // up to the plan's minimum
	Total    string `json:"total,omitempty"`
	// CreditsApplied is what prepaid grants gave the invoice, AmountDue
	// what is left to pay (both "" when no grant gave anything); the
	// invoice's Credits say which grants.
	CreditsApplied string `json:"credits_applied,omitempty"`
	AmountDue      string `json:"amount_due,omitempty"`
	// PriceDigest is the SHA-256 the invoice stores of Prices: the plan
	// versions that priced it, canonical JSON, byte for byte as stored (the
	// bundle holds them as a file of their own).
	PriceDigest string          `json:"price_digest,omitempty"`
	Prices      json.RawMessage `json:"prices,omitempty"`
	// MoneyOK: the amounts, fee, true-up and total recompute from Prices
	// and the ledger; MoneyProblems says what does not. Nil on an invoice
	// no plan priced (which must then carry no amount at all).
	MoneyOK       *bool    `json:"money_ok,omitempty"`
	MoneyProblems []string `json:"money_problems,omitempty"`
}

// CreditView is what one prepaid grant gave an invoice, frozen at its
// close, and the grant as it was made (who granted it, why, its dates).
type CreditView struct {
	Grant        string         `json:"grant"`
	Amount       string         `json:"amount"`
	BalanceAfter string         `json:"balance_after"`
	Granted      *invoice.Grant `json:"granted,omitempty"`
}

// LineView is an invoice line beside its recomputation from the ledger.
type LineView struct {
	Ref         string             `json:"ref"` // invoice:ID/LINE
	Invoice     int64              `json:"invoice"`
	Line        int64              `json:"line"`
	Customer    string             `json:"customer"`
	Meter       string             `json:"meter"`
	Dimension   string             `json:"dimension,omitempty"` // model=gpt-4o: the value a line of a price by dimension bills
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
	Quantity    ledger.Total       `json:"quantity"`
	Rows        int64              `json:"rows"`
	Adjustments int64              `json:"adjustments"`
	MaxID       int64              `json:"max_id"`
	Digest      string             `json:"digest"`
	LineMoney
	Recomputed Recomputed `json:"recomputed"`
	OK         bool       `json:"ok"`
	Problem    string     `json:"problem,omitempty"`
	// RowIDs are the covered rows, listed when the trace shows them.
	RowIDs []int64 `json:"row_ids,omitempty"`
}

// LineMoney is a priced line's amount as frozen at the close; left out of
// unpriced lines (and of lines whose meter the plan does not price).
type LineMoney struct {
	Amount        string `json:"amount,omitempty"`         // rounded once to the currency's minor unit, half-even
	AmountPrecise string `json:"amount_precise,omitempty"` // exact
	Currency      string `json:"currency,omitempty"`
	// BilledBefore is, on a late line, the period's total its earlier
	// invoices billed: the line is priced at the margin above it.
	BilledBefore string `json:"billed_before,omitempty"`
	PlanVersion  string `json:"plan_version,omitempty"` // effective_from of the version in the invoice's prices
	// Charge is the price's breakdown as stored (pricing.Margin), Breakdown
	// the same for people: tier by tier, or the packages billed.
	Charge    json.RawMessage `json:"charge,omitempty"`
	Breakdown string          `json:"breakdown,omitempty"`
}

// Recomputed is an invoice line computed again from the ledger as it is now.
type Recomputed struct {
	Quantity    ledger.Total `json:"quantity"`
	Rows        int64        `json:"rows"`
	Adjustments int64        `json:"adjustments"`
	MaxID       int64        `json:"max_id"`
	Digest      string       `json:"digest"`
	// BilledBefore is a priced late line's billed-before total recomputed
	// from the ledger.
	BilledBefore string `json:"billed_before,omitempty"`
}

// RowView is one ledger row with its place in the hash chain checked.
type RowView struct {
	ID         int64        `json:"id"`
	Kind       string       `json:"kind"`
	Provider   string       `json:"provider,omitempty"`
	EventID    string       `json:"event_id"`
	Customer   string       `json:"customer"`
	Meter      string       `json:"meter"`
	Quantity   ledger.Total `json:"quantity"`
	Properties string       `json:"properties,omitempty"`
	Reason     string       `json:"reason,omitempty"`
	Ref        string       `json:"ref,omitempty"`
	OccurredAt time.Time    `json:"occurred_at"`
	RecordedAt time.Time    `json:"recorded_at"`
	PrevHash   string       `json:"prev_hash"`
	RowHash    string       `json:"row_hash"`
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

// Body is the event's raw body as stored (nil when pruned or when the
// receipt is gone): what the bundle holds as body.raw, for the console.
func (e *EventView) Body() []byte { return e.body }

// ReceiptView is the stored receipt of an event.
type ReceiptView struct {
	Type           string    `json:"type"`
	Status         string    `json:"status"`
	Error          string    `json:"error,omitempty"`
	Source         string    `json:"source"`
	HandlerVersion string    `json:"handler_version"`
	ReceivedAt     time.Time `json:"received_at"`
	ProcessedAt    time.Time `json:"processed_at"`
	BodySHA256     string    `json:"body_sha256"`
	BodyBytes      *int      `json:"body_bytes"` // null when pruned or missing
	BodyPruned     bool      `json:"body_pruned"`
	// BodyMissing: the body is gone, and no prune of retention.payload
	// covers it (a problem: it was deleted some other way).
	BodyMissing      bool   `json:"body_missing,omitempty"`
	SignatureHeaders string `json:"signature_headers"`
}

// AttemptView is one delivery of an event, with its own signature checked.
// ID is the attempt's row id; the first delivery of an event stored since
// migration 0009 is kept in its receipt and has none (0, left out of the
// JSON; Label says "first").
type AttemptView struct {
	ID               int64        `json:"id,omitempty"`
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

// Label names the attempt in a table or a file name: its id, or "first"
// for the first delivery kept in the receipt.
func (a AttemptView) Label() string {
	if a.ID == 0 {
		return "first"
	}
	return strconv.FormatInt(a.ID, 10)
}

// Name names the attempt in a sentence: "attempt 17", "the first attempt".
func (a AttemptView) Name() string {
	if a.ID == 0 {
		return "the first attempt"
	}
	return "attempt " + strconv.FormatInt(a.ID, 10)
}

// Summary counts what the trace holds and lists what did not check out.
type Summary struct {
	UsageRows         int    `json:"usage_rows"`
	Adjustments       int    `json:"adjustments"`
	Voids             int    `json:"voids,omitempty"`
	UnbilledRows      int    `json:"unbilled_rows"`
	Events            int    `json:"events"`
	Attempts          int    `json:"attempts"`
	Duplicates        int    `json:"duplicates"`
	PayloadMismatches int    `json:"payload_mismatches"`
	Bodies            Counts `json:"bodies"`
	Signatures        Counts `json:"attempt_signatures"`
	ChainOK           bool   `json:"chain_ok"`
	InvoicesOK        bool   `json:"invoices_ok"` // digests, lines and money
	// MoneyOK: every priced invoice's amounts recompute from its prices;
	// nil when the trace holds no priced invoice.
	MoneyOK  *bool    `json:"money_ok,omitempty"`
	Problems []string `json:"problems"`
}

// Counts tallies verification statuses.
type Counts struct {
	Valid int `json:"valid"`
	// APIKey counts ingest API events: their API key and body digest
	// checked (there is no provider signature).
	APIKey        int `json:"api_key"`
	Invalid       int `json:"invalid"`
	NotVerifiable int `json:"not_verifiable"`
	Pruned        int `json:"pruned"`
}

func (c *Counts) add(status string) {
	switch status {
	case Valid:
		c.Valid++
	case APIKey:
		c.APIKey++
	case Invalid:
		c.Invalid++
	case NotVerifiable:
		c.NotVerifiable++
	case Pruned:
		c.Pruned++
	}
}

// Store is what a Tracer reads from storage; *schema.DB satisfies it.
type Store interface {
	// View runs fn in one read transaction: a trace is a single state of
	// the database even while serve writes.
	View(ctx context.Context, fn func(*schema.ReadTx) error) error
	HasReceipt(ctx context.Context, provider, eventID string) (bool, error)
	// APIKeys lists the ingest API's keys, revoked ones too: an API event's
	// recorded key is checked against them.
	APIKeys(ctx context.Context) ([]schema.APIKey, error)
}

// Tracer builds traces from the database.
type Tracer struct {
	DB       Store
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
	// Read before the snapshot: keys are only ever added or revoked, and a
	// key an event names was stored before the event arrived.
	ks, err := t.DB.APIKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("read API keys: %w", err)
	}
	keys := make(apiKeys, len(ks))
	for _, k := range ks {
		keys[k.ID] = k
	}
	var tr *Trace
	err = t.DB.View(ctx, func(s *schema.ReadTx) error {
		b := &builder{ctx: ctx, q: s, v: t.Verifier, keys: keys, tr: &Trace{Target: target, Kind: kind},
			invoices: map[int64]*invoiceAcc{}, rows: map[int64]*RowView{}, rowsRead: map[int64]ledger.Row{},
			lines: map[string][]invoice.InvoiceLine{}, events: map[eventKey]*EventView{}}
		if err := fill(b); err != nil {
			return err
		}
		if err := b.finish(); err != nil {
			return err
		}
		tr = b.tr
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tr, nil
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
