package invoice

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Invoice is one customer's bill for one period, frozen when it was closed.
type Invoice struct {
	ID          int64
	CloseID     int64
	Customer    string
	Period      string
	TZ          string
	PeriodStart int64 // unix ms, inclusive
	PeriodEnd   int64 // unix ms, exclusive
	Cutoff      int64 // ingestion cutoff: recorded_at < Cutoff
	LedgerHead  int64 // rows with id <= LedgerHead were visible
	ClosedAt    int64
	Digest      []byte
	Lines       []InvoiceLine
	Money       InvoiceMoney // zero when no plan priced the invoice
	// Credits are what prepaid grants gave it at its close, in the burn
	// order (credits.go); nil when none did.
	Credits []InvoiceCredit
	// Parts is the period split at a plan change (parts.go); nil: one part.
	Parts []InvoicePart
	// Stripe is what billing sync knows of the invoice in Stripe (nil:
	// nothing). The invoice reads leave it nil; stripe.WithStates fills it.
	// It is no part of the frozen invoice or its digest.
	Stripe *StripeInvoice
}

// StripeInvoice is the state of a close-mode invoice in Stripe
// (docs/stripe.md): State is pushed (its lines were pushed, Stripe has said
// nothing of them yet), invoiced, paid or payment_failed, that of the latest
// of Events by Stripe's event time; Events are every Stripe invoice event
// that bills it, in that order.
type StripeInvoice struct {
	State  string                      `json:"state"`
	Events []schema.StripeInvoiceState `json:"events"`
}

// InvoiceLine is one meter's quantity on an invoice. A late line bills usage
// of an earlier closed period that was recorded after that period's close;
// its Period names that earlier period and its Quantity is the change to
// that period's total.
type InvoiceLine struct {
	InvoiceID  int64
	LineNo     int64
	Customer   string
	Meter      string
	Dimensions string // a line of one dimension value: {"model":"gpt-4o"} (dimprice.go); "" for a meter's one line
	// PartStart and PartEnd bound the part of a split period the line bills
	// (parts.go); both 0: the whole period.
	PartStart, PartEnd int64
	Aggregation        ledger.Aggregation
	Property           string
	Unit               string
	Late               bool
	Period             string
	TZ                 string
	PeriodStart        int64
	PeriodEnd          int64
	AfterID            int64 // covers rows with AfterID < id <= ThroughID
	ThroughID          int64 //
	Quantity           ledger.Total
	Rows               int64
	Adjustments        int64
	MaxID              int64 // highest ledger id covered
	Digest             []byte
	Money              LineMoney
}

// Close errors a caller branches on.
var (
	ErrTooEarly      = errors.New("period has not ended (plus grace)")
	ErrPeriodOverlap = errors.New("period overlaps a differently bounded closed period")
	ErrNoInvoice     = errors.New("no such invoice")
)

// MarshalJSON shows times in RFC 3339 (in the invoice's zone) and the digest in hex.
func (inv Invoice) MarshalJSON() ([]byte, error) {
	lines := inv.Lines
	if lines == nil {
		lines = []InvoiceLine{}
	}
	return json.Marshal(struct {
		ID          int64           `json:"id"`
		CloseID     int64           `json:"close_id"`
		Customer    string          `json:"customer"`
		Period      string          `json:"period"`
		TZ          string          `json:"tz"`
		PeriodStart time.Time       `json:"period_start"`
		PeriodEnd   time.Time       `json:"period_end"`
		Cutoff      time.Time       `json:"cutoff"`
		LedgerHead  int64           `json:"ledger_head"`
		ClosedAt    time.Time       `json:"closed_at"`
		Digest      string          `json:"digest"`
		Plan        string          `json:"plan,omitempty"`
		Currency    string          `json:"currency,omitempty"`
		Fee         string          `json:"fee,omitempty"`
		TrueUp      string          `json:"true_up,omitempty"`
		Total       string          `json:"total,omitempty"`
		Credits     string          `json:"credits,omitempty"`
		AmountDue   string          `json:"amount_due,omitempty"`
		Grants      []InvoiceCredit `json:"credit_grants,omitempty"`
		Parts       []partJSON      `json:"parts,omitempty"`
		PriceDigest string          `json:"price_digest,omitempty"`
		Prices      jsonRaw         `json:"prices,omitempty"`
		Lines       []InvoiceLine   `json:"lines"`
		Stripe      *StripeInvoice  `json:"stripe,omitempty"`
	}{inv.ID, inv.CloseID, inv.Customer, inv.Period, inv.TZ, ledger.MsTime(inv.PeriodStart, inv.TZ), ledger.MsTime(inv.PeriodEnd, inv.TZ),
		time.UnixMilli(inv.Cutoff).UTC(), inv.LedgerHead, time.UnixMilli(inv.ClosedAt).UTC(), hex.EncodeToString(inv.Digest),
		inv.Money.Plan, inv.Money.Currency, inv.Money.Fee, inv.Money.TrueUp, inv.Money.Total,
		inv.Money.Credits, inv.Money.AmountDue, inv.Credits, partsView(inv), hex.EncodeToString(inv.Money.PriceDigest),
		jsonRaw(inv.Money.Snapshot), lines, inv.Stripe})
}

// MarshalJSON shows times in RFC 3339 (in the line's zone) and the digest in hex.
func (l InvoiceLine) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		LineNo      int64              `json:"line"`
		Meter       string             `json:"meter"`
		Dimensions  jsonRaw            `json:"dimensions,omitempty"`
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
		Before      string             `json:"billed_before,omitempty"`
		PlanVersion string             `json:"plan_version,omitempty"`
		Precise     string             `json:"amount_precise,omitempty"`
		Amount      string             `json:"amount,omitempty"`
		Charge      jsonRaw            `json:"charge,omitempty"`
		PartStart   *time.Time         `json:"part_start,omitempty"`
		PartEnd     *time.Time         `json:"part_end,omitempty"`
	}{l.LineNo, l.Meter, jsonRaw(l.Dimensions), l.Aggregation, l.Property, l.Unit, l.Late, l.Period, l.TZ, ledger.MsTime(l.PeriodStart, l.TZ), ledger.MsTime(l.PeriodEnd, l.TZ),
		l.AfterID, l.ThroughID, l.Quantity, l.Rows, l.Adjustments, l.MaxID, hex.EncodeToString(l.Digest),
		beforeIfLate(l), l.Money.PlanVersion, l.Money.AmountPrecise, l.Money.Amount, jsonRaw(l.Money.Charge), partTime(l.PartStart, l.PartEnd, l.TZ), partTime(l.PartEnd, l.PartEnd, l.TZ)})
}

// InvoiceFilter selects invoices; zero fields do not filter.
type InvoiceFilter = schema.InvoiceFilter

// ListInvoices returns invoices with their lines, in id order.
func ListInvoices(ctx context.Context, src InvoiceSource, f InvoiceFilter) ([]Invoice, error) {
	return listInvoices(ctx, src, f, true)
}

func listInvoices(ctx context.Context, src InvoiceSource, f InvoiceFilter, withLines bool) ([]Invoice, error) {
	recs, err := src.Invoices(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("read invoices: %w", err)
	}
	var invs []Invoice
	if recs != nil {
		invs = make([]Invoice, len(recs))
		for i := range recs {
			invs[i] = invoiceOf(&recs[i])
			if err := invoiceParts(&invs[i], &recs[i]); err != nil {
				return nil, err
			}
		}
	}
	if len(invs) == 0 {
		return invs, nil
	}
	if err := loadCredits(ctx, src, invs); err != nil {
		return nil, err
	}
	if !withLines {
		return invs, nil
	}
	idx := make(map[int64]int, len(invs))
	for i, inv := range invs {
		idx[inv.ID] = i
	}
	lines, err := invoiceLines(ctx, src, invs[0].ID, invs[len(invs)-1].ID)
	if err != nil {
		return nil, err
	}
	for _, l := range lines {
		if i, ok := idx[l.InvoiceID]; ok {
			invs[i].Lines = append(invs[i].Lines, l)
		}
	}
	return invs, nil
}

func invoiceLines(ctx context.Context, src InvoiceSource, fromID, toID int64) ([]InvoiceLine, error) {
	lines, err := src.InvoiceLinesBetween(ctx, fromID, toID)
	if err != nil {
		return nil, fmt.Errorf("read invoice lines: %w", err)
	}
	return linesOf(lines)
}

// GetInvoice returns one invoice with its lines.
func GetInvoice(ctx context.Context, src InvoiceSource, id int64) (*Invoice, error) {
	rec, err := src.GetInvoice(ctx, id)
	if errors.Is(err, schema.ErrNotFound) {
		return nil, fmt.Errorf("invoice %d: %w", id, ErrNoInvoice)
	}
	if err != nil {
		return nil, fmt.Errorf("read invoice %d: %w", id, err)
	}
	inv := invoiceOf(rec)
	if err := invoiceParts(&inv, rec); err != nil {
		return nil, err
	}
	if inv.Lines, err = invoiceLines(ctx, src, id, id); err != nil {
		return nil, err
	}
	one := []Invoice{inv}
	if err := loadCredits(ctx, src, one); err != nil {
		return nil, err
	}
	return &one[0], nil
}

// loadCredits puts on each of invs (in id order) what grants gave it.
func loadCredits(ctx context.Context, src InvoiceSource, invs []Invoice) error {
	byInvoice, err := invoiceCredits(ctx, src, invs[0].ID, invs[len(invs)-1].ID)
	if err != nil {
		return fmt.Errorf("read invoice credits: %w", err)
	}
	for i := range invs {
		if cs := byInvoice[invs[i].ID]; len(cs) > 0 {
			if err := setCredits(&invs[i], cs); err != nil {
				return err
			}
		}
	}
	return nil
}
