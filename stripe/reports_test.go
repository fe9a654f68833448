package stripe

import (
	"fmt"
	"testing"

	"github.com/hookledger/hookledger/schema"
)

// Each sample is a report; an error type without samples and an event
// without data leave one each, so no error event goes unreported.
func TestParseReport(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"v1.billing.meter.error_report_triggered","related_object":{"id":"mtr_1"},
		"data":{"reason":{"error_count":4,"error_types":[
			{"code":"meter_event_customer_not_found","error_count":2,"sample_errors":[
				{"error_message":"no customer","request":{"identifier":"hl_a"}},
				{"error_message":"no customer either","request":null}]},
			{"code":"meter_event_invalid_value","error_count":2}]}}}`)
	got := ParseReport(EventMeterErrors, body)
	want := "[{mtr_1 meter_event_customer_not_found no customer hl_a} {mtr_1 meter_event_customer_not_found no customer either } {mtr_1 meter_event_invalid_value  }]"
	if s := reportsString(got); s != want {
		t.Errorf("got %s\nwant %s", s, want)
	}
	thin := ParseReport(EventNoMeterFound, []byte(`{"id":"evt_2","type":"v1.billing.meter.no_meter_found","related_object":{"id":"mtr_2"}}`))
	if s := reportsString(thin); s != "[{mtr_2   }]" || thin[0].EventType != EventNoMeterFound {
		t.Errorf("a thin event without data: %s", s)
	}
}

func reportsString(rs []schema.StripeReport) string {
	s := "["
	for i, r := range rs {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("{%s %s %s %s}", r.Meter, r.Code, r.Message, r.Identifier)
	}
	return s + "]"
}
