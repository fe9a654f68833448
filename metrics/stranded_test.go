package metrics

import (
	"crypto/sha256"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
)

// hookledger_usage_stranded_rows counts the ledger rows dated before the
// first closed period (invoice.StrandedUsage): 0 until a close, then the row
// of 1971 and the August row that arrived after September was closed.
func TestStrandedUsageGauge(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := testenv.New(t, testenv.Options{NoServer: true, Backend: backend, Now: time.Date(2026, 10, 2, 0, 0, 0, 0, time.UTC)})
		m := New(Options{})
		m.WatchDatabase(e.DB, nil)
		write := func(id, at string) {
			t.Helper()
			occurred, err := time.Parse(time.RFC3339, at)
			if err != nil {
				t.Fatal(err)
			}
			body := []byte(`{"id":"` + id + `"}`)
			sum := sha256.Sum256(body)
			d := &custody.Delivery{Provider: "test", EventID: id, EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
				Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: e.Now(), Status: custody.StatusApplied,
				Rows:    []ledger.UsageRow{{Customer: "cus_1", Meter: "api", Quantity: ledger.TotalOf(1_000_000), OccurredAt: occurred, Properties: "{}"}},
				Attempt: custody.Attempt{StatusCode: 200}}
			if err := e.Writer.Submit(t.Context(), d); err != nil {
				t.Fatal(err)
			}
		}
		write("evt_zero", "1971-01-01T00:00:00Z")
		write("evt_sep", "2026-09-10T00:00:00Z")
		if got := value(t, scrape(t, m), "hookledger_usage_stranded_rows", nil); got != 0 {
			t.Errorf("before any close: %v, want 0", got)
		}
		sep, err := ledger.MonthPeriod("2026-09", time.UTC)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := invoice.Close(t.Context(), e.DB, invoice.CloseRequest{Period: sep, All: true, Now: e.Now}); err != nil {
			t.Fatal(err)
		}
		write("evt_aug", "2026-08-31T23:59:59Z")
		write("evt_oct", "2026-10-01T10:00:00Z")
		mfs := scrape(t, m)
		if got := value(t, mfs, "hookledger_usage_stranded_rows", nil); got != 2 {
			t.Errorf("after closing September: %v, want 2 (1971 and August)", got)
		}
		if got := value(t, mfs, "hookledger_db_stats_up", nil); got != 1 {
			t.Errorf("db_stats_up = %v", got)
		}
	})
}
