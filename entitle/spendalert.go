package entitle

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/schema"
)

// SpendAlertEventType is the type of a spend alert: an event of provider
// hookledger like a usage alert, with its own type so that a destination
// can take one without the other (sales wants spend, the app wants quotas).
const SpendAlertEventType = "spend.threshold_crossed"

// SpendAlertEventID is a spend alert's event id: derived from the customer,
// period and threshold, the key it fires once for ("spd_", never equal to
// a usage alert's "thr_").
func SpendAlertEventID(customer string, periodStart int64, threshold string) string {
	h := sha256.New()
	fmt.Fprintf(h, "spend\x00%s\x00%d\x00%s", customer, periodStart, threshold)
	return "spd_" + alertEncoding.EncodeToString(h.Sum(nil)[:20])
}

// SpendAlert is the body of a spend.threshold_crossed event.
type SpendAlert struct {
	Type      string          `json:"type"`
	Customer  string          `json:"customer"`
	Threshold string          `json:"threshold"` // as configured: "80%", "500.00"
	Amount    pricing.Decimal `json:"amount"`    // the amount the threshold stands for
	Currency  string          `json:"currency"`
	Limit     *SpendLimitJSON `json:"limit"` // null: none
	Spent     pricing.Decimal `json:"spent"` // the period's spend after the row that crossed it
	Plan      string          `json:"plan"`  // name@date of the version that priced it
	Period    PeriodJSON      `json:"period"`
	Row       AlertRow        `json:"row"`
	CrossedAt string          `json:"crossed_at"`
}

// SpendLimitJSON is a spend limit in alerts.
type SpendLimitJSON struct {
	Amount   pricing.Decimal `json:"amount"`
	Kind     string          `json:"kind"`
	Override int64           `json:"override,omitempty"`
}

// SpendAlertBody is the JSON body of c's event, raised at now.
func SpendAlertBody(c SpendCrossing, now time.Time) []byte {
	loc, err := ledger.LoadZone(c.Zone)
	if err != nil {
		loc = time.UTC
	}
	a := SpendAlert{Type: SpendAlertEventType, Customer: c.Customer, Threshold: c.Threshold.Spelling, Amount: c.Value,
		Currency: c.Spent.Currency, Spent: c.Spent.Total, Plan: c.Limit.VersionKey(), Period: Period(c.PeriodStart, c.PeriodEnd, loc),
		CrossedAt: now.UTC().Format(time.RFC3339Nano),
		Row: AlertRow{ID: c.Row.ID, Kind: c.Row.Kind, Provider: c.Row.Provider, EventID: c.Row.EventID, Quantity: c.Row.Quantity,
			OccurredAt: time.UnixMilli(c.Row.OccurredAt).UTC().Format(time.RFC3339Nano)}}
	if c.Limit.Limit != nil {
		a.Limit = &SpendLimitJSON{Amount: *c.Limit.Limit, Kind: c.Limit.Kind, Override: c.Limit.Override}
	}
	b, _ := json.Marshal(a) // strings and numbers only
	return b
}

// SpendRecord is what spend_crossings stores of c: the crossing, with the
// snapshot of the version that priced it (so verify recomputes the spend
// at the row from the ledger alone).
func SpendRecord(c SpendCrossing, receiptID, now int64) (schema.SpendCrossing, error) {
	snap, _, err := c.Limit.Version.Snapshot()
	if err != nil {
		return schema.SpendCrossing{}, err
	}
	limit := ""
	if c.Limit.Limit != nil {
		limit = c.Limit.Limit.String()
	}
	return schema.SpendCrossing{Customer: c.Customer, PeriodStart: c.PeriodStart, PeriodEnd: c.PeriodEnd,
		Threshold: c.Threshold.Spelling, ThresholdValue: c.Value.String(), Limit: limit, Spent: c.Spent.Total.String(),
		Currency: c.Spent.Currency, Plan: c.Limit.VersionKey(), PlanSnapshot: string(snap), RowID: c.Row.ID,
		ReceiptID: receiptID, CrossedAt: now}, nil
}

// SpendCrossingView is a spend threshold that fired, as `alerts list` and
// the console show it.
type SpendCrossingView struct {
	Customer  string    `json:"customer"`
	Period    string    `json:"period"` // the month's label, 2026-12
	Threshold string    `json:"threshold"`
	Amount    string    `json:"amount"` // the amount it stood for
	Currency  string    `json:"currency"`
	Limit     string    `json:"limit"` // "" without one
	Spent     string    `json:"spent"` // after the row that crossed it
	Plan      string    `json:"plan"`
	RowID     int64     `json:"row_id"`
	EventID   string    `json:"alert_event_id"` // the alert's receipt: provider hookledger
	CrossedAt time.Time `json:"crossed_at"`
}

// SpendCrossingStore reads the spend crossings (*schema.DB).
type SpendCrossingStore interface {
	StateZone(ctx context.Context) (schema.StateZone, bool, error)
	SpendCrossings(ctx context.Context, customer string, limit int) ([]schema.SpendCrossing, error)
}

// SpendCrossings lists the spend thresholds that fired, newest first, at
// most limit.
func SpendCrossings(ctx context.Context, db SpendCrossingStore, customer string, limit int) ([]SpendCrossingView, error) {
	cs, err := db.SpendCrossings(ctx, customer, limit)
	if err != nil {
		return nil, err
	}
	loc, _, err := stateLocation(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]SpendCrossingView, len(cs))
	for i, c := range cs {
		out[i] = SpendCrossingView{Customer: c.Customer, Period: time.UnixMilli(c.PeriodStart).In(loc).Format("2006-01"),
			Threshold: c.Threshold, Amount: c.ThresholdValue, Currency: c.Currency, Limit: c.Limit, Spent: c.Spent, Plan: c.Plan,
			RowID: c.RowID, EventID: SpendAlertEventID(c.Customer, c.PeriodStart, c.Threshold), CrossedAt: time.UnixMilli(c.CrossedAt).UTC()}
	}
	return out, nil
}
