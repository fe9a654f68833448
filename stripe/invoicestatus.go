package stripe

import (
	"context"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// InvoicePushStore is what InvoiceStatus reads (*schema.DB).
type InvoicePushStore interface {
	StripeInvoicePushes(ctx context.Context, from, to int64, customer string) ([]schema.StripeInvoicePush, error)
}

// InvoiceLine is one invoice sent to Stripe (stripe.invoices) as stripe
// status shows it: hookledger's total beside what Stripe says is due.
type InvoiceLine struct {
	Invoice    int64  `json:"invoice"`
	Customer   string `json:"customer"`
	Period     string `json:"period"`
	Currency   string `json:"currency"`
	Total      string `json:"total"`       // hookledger's, in the currency
	TotalMinor string `json:"total_minor"` // the same in minor units
	Sent       string `json:"sent"`        // the push's state: pending, delivered or dead
	// Stripe is what Stripe answered once the invoice was complete.
	Stripe    schema.StripeInvoiceResult `json:"stripe"`
	State     string                     `json:"state"` // agrees or differs
	LastError string                     `json:"last_error,omitempty"`
}

// InvoiceStatus lists the invoices of period sent to Stripe (one
// customer's, or all for ""). One agrees when Stripe holds it complete and
// its amount_due is hookledger's total, to the minor unit; it differs while
// it is pending, when it is dead, and when Stripe asks for another amount
// (a customer balance or a tax Stripe applied, or an item changed there).
func InvoiceStatus(ctx context.Context, db InvoicePushStore, period ledger.Period, customer string) ([]InvoiceLine, error) {
	pushes, err := db.StripeInvoicePushes(ctx, period.Start.UnixMilli(), period.End.UnixMilli(), customer)
	if err != nil {
		return nil, err
	}
	out := make([]InvoiceLine, 0, len(pushes))
	for _, p := range pushes {
		l := InvoiceLine{Invoice: p.InvoiceID, Customer: p.CustomerID, Period: p.Period, Currency: p.Currency, Total: p.Total,
			TotalMinor: p.TotalMinor, Sent: p.Status, Stripe: p.Result, State: StateDiffers, LastError: p.LastError}
		if p.Status == schema.OutboxDelivered && p.Result.AmountDue == p.TotalMinor {
			l.State = StateAgrees
		}
		out = append(out, l)
	}
	return out, nil
}

// InvoicesDiffer reports whether any of lines differs.
func InvoicesDiffer(lines []InvoiceLine) bool {
	for _, l := range lines {
		if l.State != StateAgrees {
			return true
		}
	}
	return false
}
