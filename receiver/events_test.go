package receiver_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

func TestAPIRefusalsWriteNothing(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.Ingest.MaxBody, c.Ingest.MaxEvents = 4096, 5 })
	key, _ := e.CreateKey("app", 0, 0)
	revoked, revokedID := e.CreateKey("app", 0, 0)
	if _, err := e.DB.RevokeAPIKey(context.Background(), revokedID, e.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	one := testenv.CloudEvent("app", "e1", "cus_1", "api_requests", "1")
	batch := testenv.Batch(one)
	deep := bytes.Repeat([]byte("["), 200)
	for _, tc := range []struct {
		name, key, contentType string
		body                   []byte
		code                   int
		reason                 string
	}{
		{"missing key", "", ingest.MediaCloudEventBatch, batch, 401, "missing_key"},
		{"not an API key", "whsec_abc", ingest.MediaCloudEventBatch, batch, 401, "unknown_key"},
		{"wrong key", "hl_" + strings.Repeat("A", 43), ingest.MediaCloudEventBatch, batch, 401, "unknown_key"},
		{"revoked key", revoked, ingest.MediaCloudEventBatch, batch, 401, "revoked_key"},
		{"unsupported media type", key, "text/plain", batch, 415, "media_type"},
		{"no media type", key, "", batch, 415, "media_type"},
		{"over max_body", key, ingest.MediaCloudEventBatch, testenv.Batch(bytes.Repeat([]byte(`{"pad":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},`), 60), one), 413, "too_large"},
		{"over max_events", key, ingest.MediaCloudEventBatch, testenv.Batch(one, one, one, one, one, one), 413, "too_many_events"},
		{"not JSON", key, ingest.MediaCloudEventBatch, []byte(`[{"id":`), 400, "not_json"},
		{"trailing garbage", key, ingest.MediaGeneric, []byte(`[] []`), 400, "not_json"},
		{"too deep", key, ingest.MediaCloudEventBatch, deep, 400, "too_deep"},
		{"a batch that is an object", key, ingest.MediaCloudEventBatch, one, 400, "bad_shape"},
		{"a generic body that is an object", key, ingest.MediaGeneric, one, 400, "bad_shape"},
		{"a structured event that is an array", key, ingest.MediaCloudEvent, batch, 400, "bad_shape"},
		{"a structured event without an id", key, ingest.MediaCloudEvent, []byte(`{"specversion":"1.0","source":"a","type":"t"}`), 400, "no_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.PostEvents(tc.key, tc.contentType, tc.body)
			reason := r.Error.Reason
			if r.Code == 400 && reason == "" && len(r.Reply.Results) == 1 {
				reason = r.Reply.Results[0].Reason
			}
			if r.Code != tc.code || reason != tc.reason {
				t.Fatalf("got %d %s, want %d %s", r.Code, r.Raw, tc.code, tc.reason)
			}
			if tc.code == 401 && r.Header.Get("WWW-Authenticate") == "" {
				t.Error("401 without WWW-Authenticate")
			}
			if got := e.Rows(); got != [3]int{0, 0, 0} {
				t.Fatalf("receipts, attempts, usage = %v, want nothing", got)
			}
		})
	}
}

func TestAPIRateLimitedKey(t *testing.T) {
	e := newEnv(t)
	key, _ := e.CreateKey("app", 0.5, 2) // 2 at once, then one every 2 s
	body := func(id string) []byte {
		return testenv.Batch(testenv.CloudEvent("app", id, "cus_1", "api_requests", "1"))
	}
	for _, id := range []string{"a", "b"} {
		if r := e.PostEvents(key, ingest.MediaCloudEventBatch, body(id)); r.Code != 200 {
			t.Fatalf("%s: %d %s", id, r.Code, r.Raw)
		}
	}
	r := e.PostEvents(key, ingest.MediaCloudEventBatch, body("c"))
	if r.Code != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "2" || r.Error.Reason != "rate_limited" {
		t.Fatalf("third: got %d (Retry-After %q) %s, want 429 with Retry-After 2", r.Code, r.Header.Get("Retry-After"), r.Raw)
	}
	if got := e.Rows(); got != [3]int{2, 2, 2} {
		t.Fatalf("receipts, attempts, usage = %v: the limited request wrote something", got)
	}
	e.Clock.Add(2 * time.Second)
	if r := e.PostEvents(key, ingest.MediaCloudEventBatch, body("c")); r.Code != 200 {
		t.Fatalf("after Retry-After: %d %s", r.Code, r.Raw)
	}
	// Another key has its own limit.
	other, _ := e.CreateKey("other", 0, 0)
	for range 5 {
		if r := e.PostEvents(other, ingest.MediaCloudEventBatch, body("x")); r.Code != 200 {
			t.Fatalf("unlimited key: %d %s", r.Code, r.Raw)
		}
	}
}

func TestAPIKeysAreSeenPromptly(t *testing.T) {
	e := newEnv(t)
	body := testenv.Batch(testenv.CloudEvent("app", "e1", "cus_1", "api_requests", "1"))
	// A key created after serve started works at once: unknown keys are
	// always looked up, never cached.
	if r := e.PostEvents("hl_"+strings.Repeat("B", 43), ingest.MediaCloudEventBatch, body); r.Code != 401 {
		t.Fatalf("unknown key: %d", r.Code)
	}
	key, id := e.CreateKey("app", 0, 0)
	if r := e.PostEvents(key, ingest.MediaCloudEventBatch, body); r.Code != 200 {
		t.Fatalf("new key: %d %s", r.Code, r.Raw)
	}
	// A revoked key works until the cache entry is ingest.key_cache old, then never.
	if _, err := e.DB.RevokeAPIKey(context.Background(), id, e.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	e.Clock.Add(config.DefaultKeyCache - time.Millisecond)
	if r := e.PostEvents(key, ingest.MediaCloudEventBatch, body); r.Code != 200 {
		t.Fatalf("within the cache: %d %s", r.Code, r.Raw)
	}
	e.Clock.Add(time.Millisecond)
	if r := e.PostEvents(key, ingest.MediaCloudEventBatch, body); r.Code != 401 || r.Error.Reason != "revoked_key" {
		t.Fatalf("after key_cache: %d %s, want 401 revoked_key", r.Code, r.Raw)
	}
	if got := e.Rows(); got != [3]int{1, 2, 1} {
		t.Fatalf("receipts, attempts, usage = %v, want [1 2 1]", got)
	}
}

// failingKeys is a keyring whose database cannot be read.
type failingKeys struct{}

func (failingKeys) Authenticate(context.Context, string) (schema.APIKey, error) {
	return schema.APIKey{}, errors.New("disk I/O error")
}
func (failingKeys) Allow(schema.APIKey) (bool, time.Duration) { return true, 0 }

func TestAPIKeyStorageErrorIs503(t *testing.T) {
	e := newEnv(t)
	e.Server.API.Keys = failingKeys{}
	r := e.PostEvents("hl_"+strings.Repeat("C", 43), ingest.MediaCloudEventBatch,
		testenv.Batch(testenv.CloudEvent("app", "e1", "cus_1", "api_requests", "1")))
	if r.Code != http.StatusServiceUnavailable || r.Error.Reason != "storage_error" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("got %d %s (Retry-After %q), want 503 storage_error: a key that cannot be checked is not refused as wrong",
			r.Code, r.Raw, r.Header.Get("Retry-After"))
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Fatalf("receipts, attempts, usage = %v, want nothing", got)
	}
}
