package receiver_test

import (
	"strings"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// A signed webhook whose mapped property holds text no backend can store as
// text (a byte that is not UTF-8, a NUL) is kept failed with the reason, on
// both backends alike: 2xx (it is stored, its sender stops retrying), no
// usage row, and a replay applies it once the payload or mapping is fixed.
// On PostgreSQL it was a 503 for every retry (the batch's transaction
// aborted); on SQLite it was applied, and copy then failed on the row.
func TestUnstorableMappedTextIsFailed(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := &env{testenv.New(t, testenv.Options{Backend: backend, Edits: []func(*config.Config){func(c *config.Config) {
			c.Usage[0].Properties = map[string]ledger.Field{"model": {Path: "data.model"}}
		}}})}
		for _, c := range []struct{ id, model, want string }{
			{"evt_ff", "\"a\xffb\"", `properties.model: is not valid UTF-8`},
			{"evt_nul_escaped", `"a\u0000b"`, `properties.model: contains a NUL`},
			{"evt_nested", "{\"k\":\"a\xffb\"}", `properties.model: is not valid UTF-8`},
			{"evt_key", "{\"k\xff\":1}", `properties.model: is not valid UTF-8`},
		} {
			body := []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1,"model":` + c.model + `}}`)
			r := e.Send(c.id, body)
			if r.Code != 200 || r.Body.Status != custody.StatusFailed || !strings.Contains(r.Body.Error, c.want) {
				t.Errorf("%s: %d %+v, want 200 failed with %q", c.id, r.Code, r.Body, c.want)
			}
			if r := e.Send(c.id, body); r.Code != 200 || !r.Body.Duplicate {
				t.Errorf("%s again: %d %+v, want a 200 duplicate", c.id, r.Code, r.Body)
			}
			if n := e.Int(`SELECT COUNT(*) FROM receipts WHERE event_id = $1 AND status = 'failed' AND error LIKE $2`, c.id, "%"+c.want+"%"); n != 1 {
				t.Errorf("%s: %d failed receipts with %q, want 1", c.id, n, c.want)
			}
		}
		if r := e.Send("evt_ok", []byte(`{"type":"usage.recorded","data":{"customer":"cus_1","meter":"api_requests","quantity":1,"model":"a\u00e9b"}}`)); r.Code != 200 || r.Body.Status != custody.StatusApplied {
			t.Errorf("clean property: %d %+v", r.Code, r.Body)
		}
		if got := e.Rows(); got != [3]int{5, 9, 1} {
			t.Errorf("receipts, attempts, usage = %v, want [5 9 1]", got)
		}

		// The ingest API maps its events the same way: such an event is
		// stored failed with the reason, the rest of the batch applied.
		key, _ := e.CreateKey("app", 0, 0)
		bad := []byte("{\"specversion\":\"1.0\",\"id\":\"e1\",\"source\":\"app\",\"type\":\"usage.recorded\",\"subject\":\"cus_2\"," +
			"\"data\":{\"meter\":\"api_requests\",\"quantity\":5,\"model\":\"a\xffb\"}}")
		resp := e.PostEvents(key, ingest.MediaCloudEventBatch, testenv.Batch(bad, testenv.CloudEvent("app", "e2", "cus_2", "api_requests", "1")))
		if got := resp.Reply.Results; resp.Code != 200 || len(got) != 2 || got[0].Outcome != "failed" ||
			!strings.Contains(got[0].Error, "properties.model: is not valid UTF-8") || got[1].Outcome != "applied" {
			t.Errorf("ingest batch: %d %s", resp.Code, resp.Raw)
		}
		if got := e.Rows(); got != [3]int{7, 11, 2} {
			t.Errorf("after the ingest batch: receipts, attempts, usage = %v, want [7 11 2]", got)
		}

		// Nothing is lost: with the mapping fixed (the property dropped), a
		// replay applies every kept receipt.
		m := e.Config.Usage[0]
		m.Properties = nil
		fixed := ledger.NewMapper([]ledger.Mapping{m}, e.Config.MeterNames())
		rep, err := custody.ReplayReceipts(t.Context(), e.DB, e.Writer, fixed, "test+fixed", custody.ReplayFilter{Provider: "default", Status: custody.StatusFailed})
		if err != nil || rep.Applied != 4 {
			t.Fatalf("replay: %+v %v, want 4 applied", rep, err)
		}
		if got := e.Rows(); got != [3]int{7, 11, 6} {
			t.Errorf("after the replay: receipts, attempts, usage = %v, want [7 11 6]", got)
		}
	})
}
