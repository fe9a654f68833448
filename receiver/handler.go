// Package receiver is HTTP ingress: it authenticates a webhook over its raw
// bytes, identifies the event, submits it to custody and replies. The request
// path reads top to bottom in serveWebhook; each step returns a value, and a
// step that refuses the delivery returns the result to answer instead.
package receiver

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/payload"
	"github.com/hookledger/hookledger/scheme"
)

// Submitter takes custody of an authenticated delivery (custody.Writer). A
// nil error means the delivery's writes are durable and its Outcome and
// StoredStatus are set; custody.ErrQueueFull means try again later.
type Submitter interface {
	Submit(ctx context.Context, op custody.Op) error
}

// Server answers POST /webhooks/{provider}. The order of its steps is the
// security contract: nothing is parsed before the signature over the raw bytes
// checks out, and nothing is acknowledged before it is committed.
type Server struct {
	refusals refusalLog // which refusals are logged at warn (refusals.go)

	Providers map[string]*Provider
	Mapper    *ledger.Mapper
	// Custody stores each authenticated delivery before the reply.
	Custody        Submitter
	HandlerVersion string
	Log            *slog.Logger
	// Now is the clock for signature tolerance and receipt times.
	Now func() time.Time
	// Observe, when set, sees every delivery attempt once (metrics).
	Observe func(Observation)
	// Budget, when set, bounds the body bytes requests hold at once, and
	// BodyTimeout, when set, how long a body may take to arrive (body.go).
	Budget      *BodyBudget
	BodyTimeout time.Duration
	// API, when set, serves the first-party ingest API (events.go).
	API *API
	// Entitlements, when set with API, answers entitlement checks with
	// the API's keys (entitlements.go).
	Entitlements Entitlements
}

// Observation summarises one delivery attempt. It never holds the body or a secret.
type Observation struct {
	Provider string
	Outcome  string // a custody.Outcome, or rejected or url_verification
	Reason   string // why a delivery was rejected
	Stored   string // the new receipt's status (applied, ignored, failed); "" when none was stored
	Code     int
	Latency  time.Duration
}

// Outcomes of attempts that custody never saw.
const (
	OutcomeRejected        = "rejected"
	OutcomeURLVerification = "url_verification"
)

// Routes registers the webhook route on mux.
func (s *Server) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /webhooks/{provider}", s.serveWebhook)
	if s.API != nil {
		mux.HandleFunc("POST /v1/events", s.serveEvents)
		if s.Entitlements != nil {
			mux.HandleFunc("GET /v1/entitlements/{customer}/{meter}", s.serveEntitlement)
			mux.HandleFunc("GET /v1/entitlements/{customer}", s.serveEntitlements)
			mux.HandleFunc("GET /v1/spend/{customer}", s.serveSpend)
			mux.HandleFunc("POST /v1/entitlements/{customer}/{meter}/consume", s.serveConsume)
		}
	}
}

type reply struct {
	Accepted  bool           `json:"accepted"`
	Duplicate bool           `json:"duplicate"`
	Status    custody.Status `json:"status,omitempty"`
	EventID   string         `json:"event_id,omitempty"`
	Error     string         `json:"error,omitempty"`
}

// attempt is one request, and what the handler has learned about it so far.
type attempt struct {
	start     time.Time // for the latency
	received  time.Time // s.Now: signature tolerance and receipt time
	requestID string
	provider  string
	// attrs gathers what is learned as the handler goes; finish logs them
	// once (Logger.With would encode them again at each step).
	attrs []slog.Attr
}

// result is how an attempt ends: the reply and what to log and observe.
type result struct {
	code    int
	body    any // reply, or the Slack challenge
	outcome string
	reason  string // a rejection's short stable label (logs, metrics)
	stored  string // the new receipt's status, "" when none was stored
	attrs   []slog.Attr
	close   bool // ask the client to close the connection (a body not read to its end)
	// The ingest API's: the events' outcomes, and a 429's Retry-After.
	events     []EventResult
	retryAfter string
}

// reject is a refused attempt: reason is a short stable label (logs,
// metrics), msg what the sender reads, err (optional) logged.
func reject(code int, reason, msg string, err error) *result {
	r := &result{code: code, body: reply{Error: msg}, outcome: OutcomeRejected, reason: reason}
	if err != nil {
		r.attrs = []slog.Attr{slog.String("error", err.Error())}
	}
	return r
}

func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	a := s.begin(w, r)
	p, ok := s.Providers[a.provider]
	if !ok {
		s.finish(w, r, a, reject(http.StatusNotFound, "unknown_provider", "unknown provider", nil))
		return
	}
	body, release, err := s.readBody(w, r, p.MaxBody)
	defer release()
	if err != nil {
		code, reason, msg := s.bodyError(err, p.MaxBody)
		res := reject(code, reason, msg, err)
		res.close = true
		s.finish(w, r, a, res)
		return
	}
	s.finish(w, r, a, s.deliver(r, a, p, body))
}

// deliver takes an attempt whose body has been read: authenticate, check
// the JSON, identify the event, submit it.
func (s *Server) deliver(r *http.Request, a *attempt, p *Provider, body []byte) *result {
	age, rej := authenticate(r.Header, p, body, a)
	if rej != nil {
		return rej
	}
	if rej := checkJSON(body, p.MaxDepth); rej != nil {
		return rej
	}
	id, typ, rej := identify(r.Header, p, body, a)
	if rej != nil {
		return rej
	}
	d := s.delivery(r, a, p, body, id, typ, age)
	return s.submit(r.Context(), d)
}

// begin starts an attempt: its clocks, request id and provider name.
func (s *Server) begin(w http.ResponseWriter, r *http.Request) *attempt {
	a := &attempt{start: time.Now(), received: s.Now(), requestID: requestID(r), provider: r.PathValue("provider"),
		attrs: make([]slog.Attr, 0, 12)}
	w.Header().Set("X-Request-Id", a.requestID)
	a.attrs = append(a.attrs, slog.String("provider", a.provider), slog.String("request_id", a.requestID))
	return a
}

// authenticate verifies the signature over the raw bytes with any current
// key. age is the signature's age, nil when the scheme signs no timestamp.
func authenticate(h http.Header, p *Provider, body []byte, a *attempt) (age *time.Duration, rej *result) {
	ts, hasTS, err := p.Scheme.Verify(h, body, p.Keys, a.received, p.Tolerance)
	if err != nil {
		code, reason := http.StatusUnauthorized, "bad_signature"
		switch {
		case errors.Is(err, scheme.ErrMissingSignature):
			code, reason = http.StatusBadRequest, "missing_signature"
		case errors.Is(err, scheme.ErrMalformedSignature):
			code, reason = http.StatusBadRequest, "malformed_signature"
		case errors.Is(err, scheme.ErrTimestamp):
			reason = "timestamp_out_of_tolerance"
		}
		return nil, reject(code, reason, err.Error(), nil)
	}
	a.attrs = append(a.attrs, slog.String("signature", "valid")) // a rejection's reason names the failure
	if !hasTS {
		return nil, nil
	}
	d := a.received.Sub(ts)
	a.attrs = append(a.attrs, slog.Int64("signature_age_ms", d.Milliseconds()))
	return &d, nil
}

// checkJSON refuses a body that is not JSON or nests deeper than maxDepth.
func checkJSON(body []byte, maxDepth int) *result {
	switch err := payload.Check(body, maxDepth); {
	case errors.Is(err, payload.ErrTooDeep):
		return reject(http.StatusBadRequest, "too_deep", fmt.Sprintf("body nests deeper than %d levels (max_depth)", maxDepth), nil)
	case err != nil:
		return reject(http.StatusBadRequest, "not_json", "body is not valid JSON", nil)
	}
	return nil
}

// identify finds the event id and type. A delivery without an id is refused,
// except Slack's endpoint check, which is answered here.
func identify(h http.Header, p *Provider, body []byte, a *attempt) (id, typ string, rej *result) {
	id, typ = p.Scheme.Identify(h, body)
	if id == "" {
		if hs, ok := p.Scheme.(scheme.Handshaker); ok {
			if reply, ok := hs.Handshake(h, body); ok {
				return "", "", &result{code: http.StatusOK, body: json.RawMessage(reply), outcome: OutcomeURLVerification}
			}
		}
		return "", "", reject(http.StatusBadRequest, "no_event_id", "delivery carries no event id", nil)
	}
	// The event id is the receipt's key, printed by every command that lists receipts: one that
	// is not clean text cannot be kept faithfully, so it is refused like a missing one.
	if err := ledger.CheckIdentifier(id); err != nil {
		return "", "", reject(http.StatusBadRequest, "bad_event_id", "event id: "+err.Error(), fmt.Errorf("event id %q", id))
	}
	a.attrs = append(a.attrs, slog.String("event_id", id), slog.String("event_type", typ))
	return id, typ, nil
}

// delivery is the authenticated event as custody stores it, classified by
// the usage mapping (off the write path).
func (s *Server) delivery(r *http.Request, a *attempt, p *Provider, body []byte, id, typ string, age *time.Duration) *custody.Delivery {
	sum := sha256.Sum256(body)
	d := &custody.Delivery{
		Provider:         p.Name,
		EventID:          id,
		EventType:        typ,
		Body:             body,
		BodySHA256:       sum[:],
		SignatureHeaders: signatureHeaders(r.Header, p.Scheme.Headers()),
		Source:           custody.SourceWebhook,
		HandlerVersion:   s.HandlerVersion,
		ReceivedAt:       a.received,
		Attempt: custody.Attempt{
			RemoteAddr:   r.RemoteAddr,
			UserAgent:    r.UserAgent(),
			RequestID:    a.requestID,
			SignatureAge: age,
			StatusCode:   http.StatusOK,
		},
	}
	d.Classify(s.Mapper)
	return d
}

// submit hands d to custody and waits until it is durable.
func (s *Server) submit(ctx context.Context, d *custody.Delivery) *result {
	if err := s.Custody.Submit(ctx, d); err != nil {
		reason := "storage_error"
		if errors.Is(err, custody.ErrQueueFull) {
			reason = "queue_full"
		}
		return reject(http.StatusServiceUnavailable, reason, "not stored, retry later", err)
	}
	// A kept but unmappable event tells the sender and the operator why, so
	// the mapping can be fixed and the event replayed.
	attrs, mapErr := []slog.Attr{slog.String("receipt_status", string(d.StoredStatus))}, ""
	if d.StoredStatus == custody.StatusFailed && d.Error != "" {
		mapErr = d.Error
		attrs = append(attrs, slog.String("mapping_error", mapErr))
	}
	stored := ""
	if d.Outcome == custody.OutcomeInserted {
		stored = string(d.StoredStatus)
	}
	return &result{code: http.StatusOK, outcome: string(d.Outcome), stored: stored, attrs: attrs, body: reply{
		Accepted:  true,
		Duplicate: d.Outcome != custody.OutcomeInserted,
		Status:    d.StoredStatus,
		EventID:   d.EventID,
		Error:     mapErr,
	}}
}

// finish is the one place an attempt is logged and observed, then answered.
func (s *Server) finish(w http.ResponseWriter, r *http.Request, a *attempt, res *result) {
	latency := time.Since(a.start)
	attrs := append(append(a.attrs, res.attrs...), slog.String("outcome", res.outcome), slog.Int("status", res.code),
		slog.Float64("latency_ms", float64(latency.Microseconds())/1000))
	if res.reason != "" {
		attrs = append(attrs, slog.String("reason", res.reason))
	}
	// At debug: serve sums the deliveries up once a minute at info
	// (internal/server/summary.go), so the log grows with time, not traffic;
	// a refusal is logged at warn too, a few a source (refusals.go).
	s.Log.LogAttrs(r.Context(), slog.LevelDebug, "delivery", attrs...)
	switch {
	case res.code >= http.StatusBadRequest:
		s.refused(r, a.provider, "delivery refused", attrs)
	case res.stored == string(custody.StatusFailed):
		s.refused(r, a.provider, "delivery failed to map", attrs) // kept for replay once the mapping is fixed
	}
	if s.Observe != nil {
		s.Observe(Observation{Provider: a.provider, Outcome: res.outcome, Reason: res.reason, Stored: res.stored, Code: res.code, Latency: latency})
	}
	if res.close {
		w.Header().Set("Connection", "close")
	}
	if res.code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, res.code, res.body)
}

// signatureHeaders keeps the headers needed to re-verify the body later, one
// "Name: value" per line, exactly as received.
func signatureHeaders(h http.Header, names []string) string {
	var b strings.Builder
	for _, n := range names {
		for _, v := range h.Values(n) {
			b.WriteString(http.CanonicalHeaderKey(n))
			b.WriteString(": ")
			b.WriteString(v)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// ParseSignatureHeaders is the inverse of the stored signature_headers text.
func ParseSignatureHeaders(s string) http.Header {
	h := http.Header{}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, ": "); ok {
			h.Add(k, v)
		}
	}
	return h
}

func requestID(r *http.Request) string {
	if id := r.Header.Get("X-Request-Id"); id != "" && len(id) <= 64 {
		return id
	}
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
