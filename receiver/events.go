package receiver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/schema"
)

// The first-party ingest API: POST /v1/events, authenticated by an API key
// instead of a provider's signature (docs/ingest.md). Its steps keep the
// webhook path's order: authenticate (before a byte of the body is read),
// rate-limit, read the body under the same budget and deadline, check the
// JSON, split it into events, submit every accepted event to custody as its
// own Delivery, reply once all of them are durable.

// Keyring is what the ingest API authenticates with (*ingest.Keyring).
type Keyring interface {
	Authenticate(ctx context.Context, key string) (schema.APIKey, error)
	Allow(key schema.APIKey) (ok bool, retryAfter time.Duration)
}

// BatchSubmitter takes custody of many deliveries at once
// (custody.Writer.SubmitAll): errs[i] is ops[i]'s Submit error.
type BatchSubmitter interface {
	SubmitAll(ctx context.Context, ops []custody.Op) []error
}

// API configures the ingest API; Server.API nil serves no /v1/events.
type API struct {
	Keys      Keyring
	Custody   BatchSubmitter
	MaxEvents int
	MaxBody   int64
	MaxDepth  int
}

// APIProvider is the provider label of the ingest API's observations (one
// label for every key, so metrics stay bounded however many keys exist).
const APIProvider = "api:*"

// Event outcomes of the ingest API beyond custody's.
const (
	EventRejected  = "rejected"   // not stored: see reason
	EventNotStored = "not_stored" // a storage error: retry the batch
)

// EventResult is one event's outcome, in request order.
type EventResult struct {
	Index   int    `json:"index"`
	ID      string `json:"id,omitempty"`
	Source  string `json:"source,omitempty"`
	EventID string `json:"event_id,omitempty"` // the receipt's key within the scope
	// Outcome is applied, ignored or failed (a new receipt with that status),
	// duplicate, payload_mismatch, rejected or not_stored.
	Outcome string `json:"outcome"`
	// Status is the stored receipt's status (for a duplicate, the original's).
	Status custody.Status `json:"status,omitempty"`
	Reason string         `json:"reason,omitempty"` // why it was rejected
	Error  string         `json:"error,omitempty"`  // the rejection, or the mapping error of a failed event
}

// EventsReply is the ingest API's answer to a request it read.
type EventsReply struct {
	Scope   string         `json:"scope"`
	Events  int            `json:"events"`
	Counts  map[string]int `json:"counts"`
	Results []EventResult  `json:"results"`
	Error   string         `json:"error,omitempty"`
}

// APIError is the answer to a request refused as a whole: nothing was written.
type APIError struct {
	Error  string `json:"error"`
	Reason string `json:"reason"`
}

func apiReject(code int, reason, msg string, err error) *result {
	r := reject(code, reason, msg, err)
	r.body = APIError{Error: msg, Reason: reason}
	return r
}

func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	a := s.begin(w, r)
	a.provider = APIProvider
	a.attrs[0] = slog.String("provider", APIProvider)
	res, n := s.events(w, r, a)
	if res.code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", res.retryAfter)
	}
	if res.code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="hookledger"`)
	}
	s.finishEvents(w, r, a, res, n)
}

// events runs one request of the ingest API; n is how many events it held.
func (s *Server) events(w http.ResponseWriter, r *http.Request, a *attempt) (res *result, n int) {
	key, rej := s.authenticateKey(r, a)
	if rej != nil {
		return rej, 0
	}
	if ok, wait := s.API.Keys.Allow(key); !ok {
		res := apiReject(http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("API key %q is over its rate limit (%g requests/s)", key.Name, key.RateLimit), nil)
		res.retryAfter = strconv.Itoa(int((wait + time.Second - 1) / time.Second))
		return res, 0
	}
	shape, err := ingest.ShapeOf(r.Header.Get("Content-Type"))
	if err != nil {
		res := apiReject(http.StatusUnsupportedMediaType, "media_type", err.Error(), nil)
		res.close = true // the body is not read
		return res, 0
	}
	body, release, err := s.readBody(w, r, s.API.MaxBody)
	defer release()
	if err != nil {
		code, reason, msg := s.bodyError(err, s.API.MaxBody)
		res := apiReject(code, reason, msg, err)
		res.close = true
		return res, 0
	}
	events, rej := parseEvents(body, shape, s.API, key.Name)
	if rej != nil {
		return rej, 0
	}
	return s.submitEvents(r, a, key, events, shape), len(events)
}

// authenticateKey finds the request's valid API key; every failure is 401
// (a storage error 503) and writes nothing.
func (s *Server) authenticateKey(r *http.Request, a *attempt) (schema.APIKey, *result) {
	plain, err := ingest.ParseBearer(r.Header.Get("Authorization"))
	if err == nil {
		var key schema.APIKey
		if key, err = s.API.Keys.Authenticate(r.Context(), plain); err == nil {
			a.attrs = append(a.attrs, slog.String("api_key", key.Name), slog.Int64("api_key_id", key.ID))
			return key, nil
		}
	}
	switch {
	case errors.Is(err, ingest.ErrNoKey):
		return schema.APIKey{}, apiReject(http.StatusUnauthorized, "missing_key", err.Error(), nil)
	case errors.Is(err, ingest.ErrBadKey), errors.Is(err, ingest.ErrUnknownKey):
		return schema.APIKey{}, apiReject(http.StatusUnauthorized, "unknown_key", "unknown API key", nil)
	case errors.Is(err, ingest.ErrRevokedKey):
		return schema.APIKey{}, apiReject(http.StatusUnauthorized, "revoked_key", "API key revoked", nil)
	}
	return schema.APIKey{}, apiReject(http.StatusServiceUnavailable, "storage_error", "could not check the API key, retry later", err)
}

// parseEvents splits the body into events; a body refused as a whole is 4xx.
func parseEvents(body []byte, shape ingest.Shape, api *API, keyName string) ([]ingest.Event, *result) {
	events, err := ingest.Parse(body, shape, api.MaxDepth, api.MaxEvents, keyName)
	switch {
	case errors.Is(err, ingest.ErrTooMany):
		return nil, apiReject(http.StatusRequestEntityTooLarge, "too_many_events", err.Error(), nil)
	case errors.Is(err, ingest.ErrTooDeep):
		return nil, apiReject(http.StatusBadRequest, "too_deep", err.Error(), nil)
	case errors.Is(err, ingest.ErrNotJSON):
		return nil, apiReject(http.StatusBadRequest, "not_json", err.Error(), nil)
	case err != nil:
		return nil, apiReject(http.StatusBadRequest, "bad_shape", err.Error(), nil)
	}
	return events, nil
}

// submitEvents hands every accepted event to custody as its own delivery and
// waits for all of them; the reply lists each event's outcome in order.
func (s *Server) submitEvents(r *http.Request, a *attempt, key schema.APIKey, events []ingest.Event, shape ingest.Shape) *result {
	scope := ingest.Scope(key.Name)
	results := make([]EventResult, len(events))
	ops := make([]custody.Op, 0, len(events))
	deliveries := make([]*custody.Delivery, len(events))
	// The key that authenticated, in the place a webhook keeps its signature
	// headers: the dispute trace shows it (never the key itself).
	auth := "Hookledger-Api-Key: " + strconv.FormatInt(key.ID, 10) + " " + key.Prefix + "\n"
	for i := range events {
		e := &events[i]
		results[i] = EventResult{Index: i, ID: e.ID, Source: e.Source}
		if e.Reject != "" {
			results[i].Outcome, results[i].Reason, results[i].Error = EventRejected, e.Reject, e.Detail
			continue
		}
		sum := sha256.Sum256(e.Raw)
		d := &custody.Delivery{
			Provider: scope, EventID: e.EventID(), EventType: e.Type, Body: e.Raw, BodySHA256: sum[:],
			SignatureHeaders: auth, Source: custody.SourceAPI, HandlerVersion: s.HandlerVersion, ReceivedAt: a.received,
			Attempt: custody.Attempt{RemoteAddr: r.RemoteAddr, UserAgent: r.UserAgent(), RequestID: a.requestID, StatusCode: http.StatusOK},
		}
		d.Classify(s.Mapper)
		results[i].EventID = d.EventID
		deliveries[i] = d
		ops = append(ops, d)
	}
	errs := s.API.Custody.SubmitAll(r.Context(), ops)
	reply := EventsReply{Scope: scope, Events: len(events), Counts: map[string]int{}, Results: results}
	var stored error
	k := 0
	for i, d := range deliveries {
		res := &results[i]
		if d != nil {
			if err := errs[k]; err != nil {
				res.Outcome, res.Error = EventNotStored, "not stored, retry the batch"
				if stored == nil {
					stored = err
				}
			} else {
				res.Outcome, res.Status = eventOutcome(d), d.StoredStatus
				if d.Outcome == custody.OutcomeInserted && d.Status == custody.StatusFailed {
					res.Error = d.Error
				}
			}
			k++
		}
		reply.Counts[res.Outcome]++
	}
	out := &result{code: http.StatusOK, body: reply, outcome: "batch"}
	switch {
	case stored != nil:
		reason := "storage_error"
		if errors.Is(stored, custody.ErrQueueFull) {
			reason = "queue_full"
		}
		reply.Error = "not every event was stored: retry the whole batch (what was stored is absorbed as duplicates)"
		out.code, out.body, out.reason = http.StatusServiceUnavailable, reply, reason
		out.attrs = []slog.Attr{slog.String("error", stored.Error())}
	case shape == ingest.CloudEvent && results[0].Outcome == EventRejected:
		// One structured event that cannot be stored is the request's fault.
		out.code, out.reason = http.StatusBadRequest, results[0].Reason
	}
	out.events = results
	return out
}

// eventOutcome is a stored event's outcome: the new receipt's status, or what
// the unique key found.
func eventOutcome(d *custody.Delivery) string {
	if d.Outcome == custody.OutcomeInserted {
		return string(d.StoredStatus)
	}
	return string(d.Outcome)
}

// finishEvents logs the request once (with its counts, not a line per
// event), observes each event as a delivery of provider "api", and answers.
func (s *Server) finishEvents(w http.ResponseWriter, r *http.Request, a *attempt, res *result, n int) {
	latency := time.Since(a.start)
	if s.Observe != nil {
		if res.events == nil {
			s.Observe(Observation{Provider: APIProvider, Outcome: res.outcome, Reason: res.reason, Code: res.code, Latency: latency})
		}
		for _, e := range res.events {
			outcome, stored := e.Outcome, ""
			switch outcome {
			case string(custody.StatusApplied), string(custody.StatusIgnored), string(custody.StatusFailed):
				outcome, stored = string(custody.OutcomeInserted), e.Outcome
			case EventNotStored:
				outcome = OutcomeRejected
			}
			s.Observe(Observation{Provider: APIProvider, Outcome: outcome, Reason: e.Reason, Stored: stored, Code: res.code, Latency: latency})
		}
	}
	attrs := append(append(a.attrs, res.attrs...), slog.Int("events", n), slog.Int("status", res.code),
		slog.Float64("latency_ms", float64(latency.Microseconds())/1000))
	if rep, ok := res.body.(EventsReply); ok {
		for _, o := range []string{"applied", "ignored", "failed", "duplicate", "payload_mismatch", EventRejected, EventNotStored} {
			if c := rep.Counts[o]; c > 0 {
				attrs = append(attrs, slog.Int(o, c))
			}
		}
	}
	if res.reason != "" {
		attrs = append(attrs, slog.String("reason", res.reason))
	}
	s.Log.LogAttrs(r.Context(), slog.LevelDebug, "api events", attrs...) // summed up once a minute, as deliveries are
	failed := 0
	if rep, ok := res.body.(EventsReply); ok {
		failed = rep.Counts[string(custody.StatusFailed)]
	}
	switch {
	case res.code >= http.StatusBadRequest:
		s.refused(r, APIProvider, "api events refused", attrs)
	case failed > 0:
		s.refused(r, APIProvider, "api events failed to map", attrs)
	}
	if res.close {
		w.Header().Set("Connection", "close")
	}
	if res.code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, res.code, res.body)
}
