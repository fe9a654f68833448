package custody_test

import (
	"fmt"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/testenv"
)

// An API event is forwarded like a webhook: SubmitAll routes each delivery
// as Submit does, and Delivery.Apply writes its outbox rows with the receipt.
func TestAPIEventsGetOutboxRows(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend, func(c *config.Config) {
			c.Destinations = []config.Destination{
				{Name: "billing", URL: "http://127.0.0.1:9/hooks", Events: config.Events{Providers: []string{"api:app"}}},
				{Name: "everything", URL: "http://127.0.0.1:9/all"},
			}
		})
		app, _ := e.CreateKey("app", 0, 0)
		other, _ := e.CreateKey("other", 0, 0)
		var events [][]byte
		for i := range 10 {
			events = append(events, testenv.CloudEvent("src", fmt.Sprintf("evt_%d", i), "cus_1", "api_requests", "1"))
		}
		body := testenv.Batch(append(events, events[0])...) // and a duplicate
		if r := e.PostEvents(app, ingest.MediaCloudEventBatch, body); r.Code != 200 || r.Reply.Counts["applied"] != 10 {
			t.Fatalf("app: %d %s", r.Code, r.Raw)
		}
		if r := e.PostEvents(other, ingest.MediaCloudEventBatch, testenv.Batch(events[:3]...)); r.Code != 200 {
			t.Fatalf("other: %d %s", r.Code, r.Raw)
		}
		// app's 10 events go to both destinations, other's 3 to "everything"
		// only; the duplicate adds none.
		if n := e.Count("outbox"); n != 23 {
			t.Fatalf("%d outbox rows, want 23", n)
		}
		if n := e.Int(`SELECT COUNT(*) FROM outbox WHERE destination = 'billing'`); n != 10 {
			t.Fatalf("%d outbox rows for billing, want 10", n)
		}
	})
}
