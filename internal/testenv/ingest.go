package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
)

// api is the ingest API as serve builds it (internal/server/ingest.go), on
// the Env's database, writer and clock.
func (e *Env) api() *receiver.API {
	keys := ingest.NewKeyring(e.DB)
	keys.TTL, keys.Now = e.Config.Ingest.KeyCache.Duration, e.now
	api := &receiver.API{Keys: keys, Custody: e.Writer, MaxEvents: e.Config.Ingest.MaxEvents,
		MaxBody: e.Config.Ingest.MaxBody, MaxDepth: config.DefaultMaxDepth}
	if api.MaxEvents == 0 { // a Config built in code rather than by config.Parse
		api.MaxEvents, api.MaxBody = config.DefaultIngestMaxEvents, config.DefaultIngestMaxBody
	}
	if keys.TTL == 0 {
		keys.TTL = config.DefaultKeyCache
	}
	return api
}

// Keyring is the running ingest API's keyring.
func (e *Env) Keyring() *ingest.Keyring { return e.Server.API.Keys.(*ingest.Keyring) }

// CreateKey stores a new API key named name, as `hookledger keys create`
// does, and returns it with its id.
func (e *Env) CreateKey(name string, rate float64, burst int) (key string, id int64) {
	e.T.Helper()
	key, sum, prefix, err := ingest.NewKey()
	if err != nil {
		e.T.Fatal(err)
	}
	k, err := e.DB.InsertAPIKey(context.Background(), schema.APIKey{Name: name, Prefix: prefix, SHA256: sum[:],
		RateLimit: rate, Burst: burst, CreatedAt: e.Now().UnixMilli()})
	if err != nil {
		e.T.Fatal(err)
	}
	return key, k.ID
}

// EventsResponse is the ingest API's answer.
type EventsResponse struct {
	Code   int
	Header http.Header
	Raw    []byte
	Reply  receiver.EventsReply // a request it read
	Error  receiver.APIError    // a request refused as a whole
}

// PostEvents posts body to /v1/events with key (none if "") as contentType.
func (e *Env) PostEvents(key, contentType string, body []byte) EventsResponse {
	e.T.Helper()
	return PostEvents(e.T, e.HTTP.URL, key, contentType, body)
}

// PostEvents posts body to base's /v1/events with key (none if "").
func PostEvents(t interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}, base, key, contentType string, body []byte) EventsResponse {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/events", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := EventsResponse{Code: resp.StatusCode, Header: resp.Header}
	if r.Raw, err = io.ReadAll(resp.Body); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(r.Raw, &r.Reply); err != nil {
		t.Fatalf("response %d is not JSON: %q", r.Code, r.Raw)
	}
	json.Unmarshal(r.Raw, &r.Error)
	return r
}

// CloudEvent is a CloudEvent of the generic usage event's meaning: subject
// the customer, data the meter and quantity.
func CloudEvent(source, id, customer, meter, quantity string) []byte {
	b, _ := json.Marshal(map[string]any{"specversion": "1.0", "id": id, "source": source, "type": "usage.recorded",
		"subject": customer, "time": "2026-11-29T10:00:00Z", "data": map[string]any{"meter": meter, "quantity": json.Number(quantity)}})
	return b
}

// Batch joins events into a JSON array.
func Batch(events ...[]byte) []byte {
	return append(append([]byte{'['}, bytes.Join(events, []byte{','})...), ']')
}

// Go is t for a helper called from a goroutine the test started (testing
// allows FailNow only on the test's own goroutine): its Fatal and Fatalf
// report with Errorf and end that goroutine (runtime.Goexit, which runs its
// defers), so a transport error fails the test instead of crashing it.
func Go(t testing.TB) interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
} {
	return goT{t}
}

type goT struct{ testing.TB }

func (g goT) Fatal(args ...any) { g.TB.Helper(); g.TB.Error(args...); runtime.Goexit() }

func (g goT) Fatalf(format string, args ...any) {
	g.TB.Helper()
	g.TB.Errorf(format, args...)
	runtime.Goexit()
}
