package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/hookledger/hookledger/payload"
)

// APIScopePrefix starts the provider of every event of the ingest API: the
// key named billing sends as api:billing (ingest.Scope).
const APIScopePrefix = "api:"

// A consume (POST /v1/entitlements/{customer}/{meter}/consume,
// docs/entitlements.md) is usage recorded only when the customer's hard
// limit allows it, decided in the transaction that records it. hookledger
// writes its event itself; its one usage row is read from that body by
// this built-in mapping, the same at a replay as the first time, whatever
// the configured mappings say. A consume the limit refused keeps its
// receipt under ConsumeRefusedType, which maps to nothing: a replay never
// bills what was refused.
const (
	ConsumeType        = "hookledger.consume"
	ConsumeRefusedType = "hookledger.consume.refused"
	// ConsumeSource is the source part of a consume's event id
	// (ingest.EventID): consume#ID under the key's scope.
	ConsumeSource = "consume"
)

// consumeEvent is a consume's stored body.
type consumeEvent struct {
	ID      string      `json:"id"`
	Source  string      `json:"source"`
	Type    string      `json:"type"`
	Subject string      `json:"subject"` // the customer
	Time    string      `json:"time"`
	Data    consumeData `json:"data"`
}

type consumeData struct {
	Meter    string `json:"meter"`
	Quantity string `json:"quantity"`
}

// ConsumeBody is the event of a consume of quantity q of customer's meter
// at at, under id, of type typ (ConsumeType or ConsumeRefusedType).
func ConsumeBody(typ, id, customer, meter string, q Total, at time.Time) []byte {
	b, _ := json.Marshal(consumeEvent{ID: id, Source: ConsumeSource, Type: typ, Subject: customer,
		Time: at.UTC().Format(time.RFC3339Nano), Data: consumeData{Meter: meter, Quantity: q.String()}})
	return b
}

// ConsumeOf is the customer and meter a consume's body names.
func ConsumeOf(body []byte) (customer, meter string) {
	return payload.Get(body, "subject").String(), payload.Get(body, "data.meter").String()
}

// consumeRow is the usage row of a consume's body.
func (m *Mapper) consumeRow(body []byte) (UsageRow, error) {
	var r UsageRow
	var err error
	if r.Customer = payload.Get(body, "subject").String(); CheckIdentifier(r.Customer) != nil {
		return r, fmt.Errorf("consume: subject %q is not a customer id", r.Customer)
	}
	r.Meter = payload.Get(body, "data.meter").String()
	if m.meters != nil && !m.meters[r.Meter] {
		return r, fmt.Errorf("meter %q is not configured", r.Meter)
	}
	if r.Quantity, err = ParseRowQuantity(payload.Get(body, "data.quantity").String()); err != nil {
		return r, fmt.Errorf("consume: quantity: %w", err)
	}
	if r.OccurredAt, err = time.Parse(time.RFC3339Nano, payload.Get(body, "time").String()); err != nil {
		return r, fmt.Errorf("consume: time: %w", err)
	}
	r.Properties = "{}"
	return r, nil
}
