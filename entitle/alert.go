package entitle

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Alerts are events of provider hookledger, so destinations route them like
// any other event (config.AlertProvider).
const (
	AlertProvider  = "hookledger"
	AlertEventType = "usage.threshold_crossed"
)

// AlertEventID is the alert's event id: derived from the customer, meter,
// period and threshold, the key it fires once for, so its receipt (and the
// webhook-id of every message forwarding it) is the same whichever row and
// whichever process crossed it.
func AlertEventID(customer, meter string, periodStart int64, threshold string) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s", customer, meter, periodStart, threshold)
	return "thr_" + alertEncoding.EncodeToString(h.Sum(nil)[:20])
}

var alertEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// Alert is the body of a usage.threshold_crossed event.
type Alert struct {
	Type      string       `json:"type"`
	Customer  string       `json:"customer"`
	Meter     string       `json:"meter"`
	Threshold string       `json:"threshold"` // as configured: "80%", "5000"
	Value     ledger.Total `json:"value"`     // the quantity the threshold stands for
	Limit     *LimitJSON   `json:"limit"`     // the limit in force (null: none)
	Used      ledger.Total `json:"used"`      // the period's usage after the row that crossed it
	Period    PeriodJSON   `json:"period"`
	Row       AlertRow     `json:"row"`
	CrossedAt string       `json:"crossed_at"`
}

// LimitJSON is a limit in alerts and entitlement answers.
type LimitJSON struct {
	Value    ledger.Total `json:"value"`
	Kind     string       `json:"kind"`
	Plan     string       `json:"plan,omitempty"`     // name@date of the plan version
	Override int64        `json:"override,omitempty"` // the override's id
}

// PeriodJSON is a period in alerts and entitlement answers.
type PeriodJSON struct {
	Label string `json:"label"` // 2026-12
	Zone  string `json:"zone"`
	Start string `json:"start"` // RFC 3339
	End   string `json:"end"`
}

// AlertRow is the ledger row that crossed the threshold.
type AlertRow struct {
	ID         int64        `json:"id"`
	Kind       string       `json:"kind"`
	Provider   string       `json:"provider"`
	EventID    string       `json:"event_id"`
	Quantity   ledger.Total `json:"quantity"`
	OccurredAt string       `json:"occurred_at"`
}

// Period returns the period [start, end) of loc's month as JSON.
func Period(start, end int64, loc *time.Location) PeriodJSON {
	s := time.UnixMilli(start).In(loc)
	return PeriodJSON{Label: s.Format("2006-01"), Zone: loc.String(), Start: s.Format(time.RFC3339), End: time.UnixMilli(end).In(loc).Format(time.RFC3339)}
}

func limitJSON(l Limit) *LimitJSON {
	return &LimitJSON{Value: l.Value, Kind: l.Kind, Plan: l.Plan, Override: l.Override}
}

// AlertBody is the JSON body of c's event, raised at now.
func AlertBody(c Crossing, now time.Time) []byte {
	loc, err := ledger.LoadZone(c.Zone)
	if err != nil {
		loc = time.UTC
	}
	a := Alert{Type: AlertEventType, Customer: c.Customer, Meter: c.Meter, Threshold: c.Threshold.Spelling, Value: c.Value,
		Used: c.Used, Period: Period(c.PeriodStart, c.PeriodEnd, loc), CrossedAt: now.UTC().Format(time.RFC3339Nano),
		Row: AlertRow{ID: c.Row.ID, Kind: c.Row.Kind, Provider: c.Row.Provider, EventID: c.Row.EventID, Quantity: c.Row.Quantity,
			OccurredAt: time.UnixMilli(c.Row.OccurredAt).UTC().Format(time.RFC3339Nano)}}
	if c.HasLimit {
		a.Limit = limitJSON(c.Limit)
	}
	b, _ := json.Marshal(a) // strings and numbers only
	return b
}

// CrossingView is a threshold that fired, as `alerts list` shows it.
type CrossingView struct {
	Customer  string       `json:"customer"`
	Meter     string       `json:"meter"`
	Period    string       `json:"period"` // the month's label, 2026-12
	Threshold string       `json:"threshold"`
	Value     ledger.Total `json:"value"`
	Limit     string       `json:"limit"` // "" without one
	Used      ledger.Total `json:"used"`  // after the row that crossed it
	RowID     int64        `json:"row_id"`
	EventID   string       `json:"alert_event_id"` // the alert's receipt: provider hookledger
	CrossedAt time.Time    `json:"crossed_at"`
}

// CrossingStore reads the crossings (*schema.DB).
type CrossingStore interface {
	StateZone(ctx context.Context) (schema.StateZone, bool, error)
	Crossings(ctx context.Context, customer string, limit int) ([]schema.Crossing, error)
}

// Crossings lists the thresholds that fired, newest first, at most limit.
func Crossings(ctx context.Context, db CrossingStore, customer string, limit int) ([]CrossingView, error) {
	cs, err := db.Crossings(ctx, customer, limit)
	if err != nil {
		return nil, err
	}
	loc, _, err := stateLocation(ctx, db)
	if err != nil {
		return nil, err
	}
	out := make([]CrossingView, len(cs))
	for i, c := range cs {
		v, _ := ledger.ParseTotal(c.ThresholdValue)
		u, _ := ledger.ParseTotal(c.Used)
		out[i] = CrossingView{Customer: c.Customer, Meter: c.Meter, Period: time.UnixMilli(c.PeriodStart).In(loc).Format("2006-01"),
			Threshold: c.Threshold, Value: v, Limit: c.Limit, Used: u, RowID: c.RowID,
			EventID:   AlertEventID(c.Customer, c.Meter, c.PeriodStart, c.Threshold),
			CrossedAt: time.UnixMilli(c.CrossedAt).UTC()}
	}
	return out, nil
}
