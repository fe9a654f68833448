package custody_test

import (
	"testing"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/testenv"
)

// An authenticated delivery whose free text (its event type, the sender's
// user agent) holds bytes that are not UTF-8 or a NUL is
// still taken into custody, on both backends (PostgreSQL's text refuses
// both): the text is stored with U+FFFD in their place, the body verbatim.
func TestDirtyFreeTextIsStoredCleanly(t *testing.T) {
	testenv.EachBackend(t, func(t *testing.T, backend string) {
		e := newEnv(t, backend)
		body := []byte(`{"type":"usage.recorded\u0000x","data":{"customer":"c","meter":"m","quantity":1,"occurred_at":"2026-11-29T10:00:00Z"}}`)
		h := e.SignDefault("msg_dirty", body)
		h.Set("User-Agent", "agent\xff\xfe/1.0")
		r := e.PostReply("default", h, body)
		if r.Code != 200 || !r.Body.Accepted || r.Body.Status != custody.StatusIgnored {
			t.Fatalf("got %d %+v", r.Code, r.Body)
		}
		var typ string
		var stored []byte
		if err := e.DB.Read.QueryRow(`SELECT event_type, body FROM receipts`).Scan(&typ, &stored); err != nil {
			t.Fatal(err)
		}
		as := e.AllAttempts()
		if len(as) != 1 {
			t.Fatalf("%d attempts, want 1", len(as))
		}
		ua := as[0].UserAgent
		if typ != "usage.recorded\uFFFDx" || ua != "agent\uFFFD/1.0" || string(stored) != string(body) {
			t.Errorf("stored type %q, user agent %q, body %q", typ, ua, stored)
		}
	})
}
