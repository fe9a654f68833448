package admin

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/redact"
	"github.com/hookledger/hookledger/schema"
)

// ForwardStore is what the forwarding endpoints read (*schema.DB).
type ForwardStore interface {
	forward.ReadStore
	forward.AttemptStore
	EventFeed(ctx context.Context, after int64, limit int) ([]schema.FeedEvent, error)
}

// Forward holds the forwarding endpoints: the same views and actions as
// `hookledger forward`, and the pull feed. Register them with Routes.
type Forward struct {
	DB           ForwardStore
	Writer       forward.Submitter
	Destinations []string // configured
	// Secrets are scrubbed from every stored response and error shown
	// (forward.Secrets of the config); nil scrubs the credential shapes
	// only.
	Secrets *redact.Secrets
	Now     func() time.Time
	// Kick, when set, is called after a retry or a resume, so the relay
	// looks at once.
	Kick func()
}

// Feed limits.
const (
	DefaultFeedLimit = 100
	MaxFeedLimit     = 1000
)

// Routes registers the forwarding endpoints on mux.
func (f *Forward) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/events", f.feed)
	mux.HandleFunc("GET /v1/forward/status", f.status)
	mux.HandleFunc("GET /v1/forward/messages", f.list)
	mux.HandleFunc("GET /v1/forward/messages/{id}/attempts", f.attempts)
	mux.HandleFunc("POST /v1/forward/retry", f.retry)
	mux.HandleFunc("POST /v1/forward/destinations/{name}/pause", f.pause(true))
	mux.HandleFunc("POST /v1/forward/destinations/{name}/resume", f.pause(false))
}

// FeedPage is one page of the pull feed.
type FeedPage struct {
	Events []FeedEvent `json:"events"`
	// Next is the cursor to pass as after= for the next page; the same as
	// the request's when there was nothing new.
	Next string `json:"next_cursor"`
}

// FeedEvent is one receipt in the pull feed.
type FeedEvent struct {
	Cursor     string    `json:"cursor"`
	Provider   string    `json:"provider"`
	EventID    string    `json:"event_id"`
	EventType  string    `json:"event_type"`
	Status     string    `json:"status"`
	Source     string    `json:"source"`
	ReceivedAt time.Time `json:"received_at"`
	Body       string    `json:"body"`             // base64 of the raw body as received
	Pruned     bool      `json:"pruned,omitempty"` // the body is gone (retention.payload)
}

// feed answers GET /v1/events?after=CURSOR&limit=N: receipts in commit order
// after the cursor (schema.DB.EventFeed says why id order is commit order).
// A consumer stores next_cursor once it has processed a page and resumes from
// it: it sees every receipt at least once.
func (f *Forward) feed(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var after int64
	if s := q.Get("after"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			forwardError(w, http.StatusBadRequest, "bad_cursor", "after: not a cursor from this feed (a next_cursor value, or empty for the start)")
			return
		}
		after = v
	}
	limit := DefaultFeedLimit
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > MaxFeedLimit {
			forwardError(w, http.StatusBadRequest, "bad_limit", "limit: want a whole number from 1 to "+strconv.Itoa(MaxFeedLimit))
			return
		}
		limit = v
	}
	evs, err := f.DB.EventFeed(r.Context(), after, limit)
	if err != nil {
		forwardError(w, http.StatusServiceUnavailable, "storage", err.Error())
		return
	}
	page := FeedPage{Events: make([]FeedEvent, 0, len(evs)), Next: strconv.FormatInt(after, 10)}
	for _, e := range evs {
		c := strconv.FormatInt(e.ID, 10)
		page.Events = append(page.Events, FeedEvent{Cursor: c, Provider: e.Provider, EventID: e.EventID, EventType: e.EventType,
			Status: e.Status, Source: e.Source, ReceivedAt: time.UnixMilli(e.ReceivedAt).UTC(),
			Body: base64.StdEncoding.EncodeToString(e.Body), Pruned: e.Pruned})
		page.Next = c
	}
	forwardJSON(w, http.StatusOK, page)
}

func (f *Forward) status(w http.ResponseWriter, r *http.Request) {
	st, err := forward.Status(r.Context(), f.DB, f.Destinations, f.Secrets, f.Now())
	if err != nil {
		forwardError(w, http.StatusServiceUnavailable, "storage", err.Error())
		return
	}
	forwardJSON(w, http.StatusOK, map[string]any{"destinations": st})
}

func (f *Forward) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	flt := schema.OutboxFilter{Destination: q.Get("destination"), Status: q.Get("status"), Limit: 100}
	if s := q.Get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 || v > MaxFeedLimit {
			forwardError(w, http.StatusBadRequest, "bad_limit", "limit: want a whole number from 1 to "+strconv.Itoa(MaxFeedLimit))
			return
		}
		flt.Limit = v
	}
	if flt.Destination != "" {
		if err := forward.CheckDestination(r.Context(), f.DB, f.Destinations, flt.Destination); err != nil {
			f.fail(w, err)
			return
		}
	}
	ms, err := forward.List(r.Context(), f.DB, flt, f.Secrets)
	if err != nil {
		f.fail(w, err)
		return
	}
	forwardJSON(w, http.StatusOK, map[string]any{"messages": ms})
}

func (f *Forward) attempts(w http.ResponseWriter, r *http.Request) {
	as, err := forward.Attempts(r.Context(), f.DB, r.PathValue("id"), f.Secrets)
	if err != nil {
		f.fail(w, err)
		return
	}
	forwardJSON(w, http.StatusOK, map[string]any{"attempts": as})
}

// RetryRequest is the body of POST /v1/forward/retry: a message id, or a
// destination (its dead messages, since an RFC 3339 time when given).
type RetryRequest struct {
	MessageID   string     `json:"message_id"`
	Destination string     `json:"destination"`
	Since       *time.Time `json:"since"`
}

func (f *Forward) retry(w http.ResponseWriter, r *http.Request) {
	var req RetryRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		forwardError(w, http.StatusBadRequest, "bad_request", "want JSON {\"message_id\": …} or {\"destination\": …, \"since\": …}: "+err.Error())
		return
	}
	sel := schema.OutboxRetry{MessageID: req.MessageID, Destination: req.Destination}
	switch {
	case (req.MessageID == "") == (req.Destination == ""):
		forwardError(w, http.StatusBadRequest, "bad_request", "give message_id or destination, not both")
		return
	case req.Destination != "":
		if err := forward.CheckDestination(r.Context(), f.DB, f.Destinations, req.Destination); err != nil {
			f.fail(w, err)
			return
		}
		if req.Since != nil {
			sel.Since = req.Since.UnixMilli()
		}
	}
	n, err := forward.Retry(r.Context(), f.Writer, sel, f.Now())
	if err != nil {
		f.fail(w, err)
		return
	}
	f.kick()
	forwardJSON(w, http.StatusOK, map[string]any{"retried": n})
}

func (f *Forward) pause(paused bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := forward.CheckDestination(r.Context(), f.DB, f.Destinations, name); err != nil {
			f.fail(w, err)
			return
		}
		if err := forward.SetPaused(r.Context(), f.Writer, name, paused, f.Now()); err != nil {
			f.fail(w, err)
			return
		}
		if !paused {
			f.kick()
		}
		forwardJSON(w, http.StatusOK, map[string]any{"destination": name, "paused": paused})
	}
}

func (f *Forward) kick() {
	if f.Kick != nil {
		f.Kick()
	}
}

// fail maps the forwarding errors onto HTTP.
func (f *Forward) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, forward.ErrUnknownDestination):
		forwardError(w, http.StatusNotFound, "unknown_destination", err.Error())
	case errors.Is(err, forward.ErrUnknownMessage):
		forwardError(w, http.StatusNotFound, "unknown_message", err.Error())
	case errors.Is(err, forward.ErrDelivered):
		forwardError(w, http.StatusConflict, "delivered", err.Error())
	case errors.Is(err, forward.ErrBadStatus):
		forwardError(w, http.StatusBadRequest, "bad_status", err.Error())
	default:
		forwardError(w, http.StatusServiceUnavailable, "storage", err.Error())
	}
}

func forwardJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func forwardError(w http.ResponseWriter, code int, kind, msg string) {
	forwardJSON(w, code, map[string]string{"error": msg, "code": kind})
}
