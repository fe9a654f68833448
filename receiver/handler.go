package receiver

import (
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

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/payload"
	"github.com/hookledger/hookledger/receiver/scheme"
)

// Server answers POST /webhooks/{provider}. The order of its steps is the
// security contract: nothing is parsed before the signature over the raw bytes
// checks out, and nothing is acknowledged before it is committed.
type Server struct {
	Providers      map[string]*Provider
	Mapper         *ledger.Mapper
	Writer         *Writer
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
}

// Observation summarises one delivery attempt. It never holds the body or a secret.
type Observation struct {
	Provider string
	Outcome  string // inserted, duplicate, payload_mismatch, rejected, url_verification
	Reason   string // why a delivery was rejected
	Code     int
	Latency  time.Duration
}

// Routes registers the webhook route on mux.
func (s *Server) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /webhooks/{provider}", s.serveWebhook)
}

type reply struct {
	Accepted  bool   `json:"accepted"`
	Duplicate bool   `json:"duplicate"`
	Status    string `json:"status,omitempty"`
	EventID   string `json:"event_id,omitempty"`
	Error     string `json:"error,omitempty"`
}

func (s *Server) serveWebhook(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	received := s.Now()
	reqID := requestID(r)
	w.Header().Set("X-Request-Id", reqID)
	name := r.PathValue("provider")
	// logAttrs gathers what is learned about the attempt as the handler goes;
	// record logs them once (Logger.With would encode them again at each step).
	logAttrs := make([]slog.Attr, 0, 12)
	logAttrs = append(logAttrs, slog.String("provider", name), slog.String("request_id", reqID))

	// record is the one place an attempt is logged and observed.
	record := func(o Observation, attrs ...slog.Attr) {
		o.Provider, o.Latency = name, time.Since(start)
		logAttrs = append(append(logAttrs, attrs...), slog.String("outcome", o.Outcome), slog.Int("status", o.Code),
			slog.Float64("latency_ms", float64(o.Latency.Microseconds())/1000))
		if o.Reason != "" {
			logAttrs = append(logAttrs, slog.String("reason", o.Reason))
		}
		s.Log.LogAttrs(r.Context(), slog.LevelInfo, "delivery", logAttrs...)
		if s.Observe != nil {
			s.Observe(o)
		}
	}
	// fail rejects the attempt: reason is a short stable label (logs, metrics),
	// msg what the sender reads.
	fail := func(code int, reason, msg string, err error) {
		var attrs []slog.Attr
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		record(Observation{Outcome: "rejected", Reason: reason, Code: code}, attrs...)
		if code == http.StatusServiceUnavailable {
			w.Header().Set("Retry-After", "1")
		}
		writeJSON(w, code, reply{Error: msg})
	}

	p, ok := s.Providers[name]
	if !ok {
		fail(http.StatusNotFound, "unknown_provider", "unknown provider", nil)
		return
	}
	body, release, err := s.readBody(w, r, p.MaxBody)
	defer release()
	if err != nil {
		code, reason, msg := s.bodyError(err, p.MaxBody)
		w.Header().Set("Connection", "close")
		fail(code, reason, msg, err)
		return
	}

	ts, hasTS, err := p.Scheme.Verify(r.Header, body, p.Keys, received, p.Tolerance)
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
		fail(code, reason, err.Error(), nil)
		return
	}
	logAttrs = append(logAttrs, slog.String("signature", "valid")) // a rejection's reason names the failure
	var age *time.Duration
	if hasTS {
		a := received.Sub(ts)
		age = &a
		logAttrs = append(logAttrs, slog.Int64("signature_age_ms", a.Milliseconds()))
	}
	switch err := payload.Check(body, p.MaxDepth); {
	case errors.Is(err, payload.ErrTooDeep):
		fail(http.StatusBadRequest, "too_deep", fmt.Sprintf("body nests deeper than %d levels (max_depth)", p.MaxDepth), nil)
		return
	case err != nil:
		fail(http.StatusBadRequest, "not_json", "body is not valid JSON", nil)
		return
	}
	id, typ := p.Scheme.Identify(r.Header, body)
	if id == "" {
		if hs, ok := p.Scheme.(scheme.Handshaker); ok {
			if reply, ok := hs.Handshake(r.Header, body); ok {
				record(Observation{Outcome: "url_verification", Code: http.StatusOK})
				writeJSON(w, http.StatusOK, json.RawMessage(reply))
				return
			}
		}
		fail(http.StatusBadRequest, "no_event_id", "delivery carries no event id", nil)
		return
	}
	// The event id is the receipt's key, printed by every command that lists receipts: one that
	// is not clean text cannot be kept faithfully, so it is refused like a missing one.
	if err := ledger.CheckIdentifier(id); err != nil {
		fail(http.StatusBadRequest, "bad_event_id", "event id: "+err.Error(), fmt.Errorf("event id %q", id))
		return
	}
	logAttrs = append(logAttrs, slog.String("event_id", id), slog.String("event_type", typ))

	sum := sha256.Sum256(body)
	d := &Delivery{
		Provider:         p.Name,
		EventID:          id,
		EventType:        typ,
		Body:             body,
		BodySHA256:       sum[:],
		SignatureHeaders: signatureHeaders(r.Header, p.Scheme.Headers()),
		Source:           SourceWebhook,
		HandlerVersion:   s.HandlerVersion,
		ReceivedAt:       received,
		Attempt: Attempt{
			RemoteAddr:   r.RemoteAddr,
			UserAgent:    r.UserAgent(),
			RequestID:    reqID,
			SignatureAge: age,
			StatusCode:   http.StatusOK,
		},
	}
	d.Classify(s.Mapper)

	if err := s.Writer.Submit(r.Context(), d); err != nil {
		reason := "storage_error"
		if errors.Is(err, ErrQueueFull) {
			reason = "queue_full"
		}
		fail(http.StatusServiceUnavailable, reason, "not stored, retry later", err)
		return
	}
	// A kept but unmappable event tells the sender and the operator why, so
	// the mapping can be fixed and the event replayed.
	attrs, mapErr := []slog.Attr{slog.String("receipt_status", d.StoredStatus)}, ""
	if d.StoredStatus == StatusFailed && d.Error != "" {
		mapErr = d.Error
		attrs = append(attrs, slog.String("mapping_error", mapErr))
	}
	record(Observation{Outcome: d.Outcome, Code: http.StatusOK}, attrs...)
	writeJSON(w, http.StatusOK, reply{
		Accepted:  true,
		Duplicate: d.Outcome != OutcomeInserted,
		Status:    d.StoredStatus,
		EventID:   id,
		Error:     mapErr,
	})
}

// Classify runs the usage mapping and records its verdict on d.
func (d *Delivery) Classify(m *ledger.Mapper) {
	rows, matched, err := m.Map(d.Provider, d.EventType, d.Body, d.ReceivedAt)
	switch {
	case err != nil:
		d.Status, d.Error, d.Rows = StatusFailed, err.Error(), nil
	case !matched:
		d.Status, d.Rows = StatusIgnored, nil
	default:
		d.Status, d.Rows = StatusApplied, rows
	}
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
