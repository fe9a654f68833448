package admin

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

func TestVoidsListsVoidRows(t *testing.T) {
	e := testenv.New(t, testenv.Options{Dir: t.TempDir(), NoServer: true})
	ctx := context.Background()
	at := time.Date(2026, 10, 5, 0, 0, 0, 0, time.UTC)
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		body := []byte(`{"id":"` + id + `"}`)
		sum := sha256.Sum256(body)
		d := &custody.Delivery{Provider: "default", EventID: id, EventType: "usage.recorded", Body: body, BodySHA256: sum[:],
			Source: custody.SourceWebhook, HandlerVersion: "test", ReceivedAt: at, Status: custody.StatusApplied,
			Rows:    []ledger.UsageRow{{Customer: "cus_1", Meter: "api_requests", Quantity: ledger.TotalOf(4 * ledger.Scale), OccurredAt: at, Properties: "{}"}},
			Attempt: custody.Attempt{StatusCode: 200}}
		if err := e.Writer.Submit(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"evt_3", "evt_1"} {
		if err := e.Writer.Submit(ctx, &custody.VoidEvent{Void: ledger.Void{Provider: "default", EventID: id, Reason: "test traffic", Actor: "ana"}}); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(Voids(e.DB))
	defer srv.Close()
	get := func(query string) (int, []ledger.Row) {
		code, body, _ := request(t, srv.URL+"/v1/voids"+query, "")
		var rows []ledger.Row
		if code == 200 {
			if err := json.Unmarshal([]byte(body), &rows); err != nil {
				t.Fatalf("%s: %v", body, err)
			}
		}
		return code, rows
	}
	code, rows := get("")
	if code != 200 || len(rows) != 2 || rows[0].ID != 4 || rows[0].Ref != "row:3" || rows[1].Ref != "row:1" ||
		rows[0].Reason != "test traffic (by ana)" || rows[0].Kind != ledger.KindVoid || !rows[0].Quantity.Equal(ledger.TotalOf(-4*ledger.Scale)) {
		t.Fatalf("GET /v1/voids: %d %+v", code, rows)
	}
	if code, rows := get("?after=4&limit=1"); code != 200 || len(rows) != 1 || rows[0].ID != 5 {
		t.Fatalf("second page: %d %+v", code, rows)
	}
	for _, q := range []string{"?after=x", "?limit=0", "?limit=1001"} {
		if code, _ := get(q); code != 400 {
			t.Errorf("%s: status %d, want 400", q, code)
		}
	}
}
