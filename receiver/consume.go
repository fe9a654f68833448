package receiver

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/ledger"
)

// POST /v1/entitlements/{customer}/{meter}/consume on the ingest API's
// listener (docs/entitlements.md): usage recorded only if the customer's
// hard limit allows it, the check and the row in one writer transaction
// (custody.Consume), so concurrent consumers never pass a limit together.
// It takes an API key like the checks; the body is {"id": "…",
// "quantity": "1"} (and "time", RFC 3339, for usage of another moment).

// consumeBodyLimit bounds a consume's body: an id, a quantity and a time.
const consumeBodyLimit = 4 << 10

// ConsumeRequest is a consume's body.
type ConsumeRequest struct {
	ID       string      `json:"id"`
	Quantity json.Number `json:"quantity"`
	Time     string      `json:"time,omitempty"`
}

// ConsumeReply is a consume's answer: whether it was recorded, the
// period's usage after it, and the limit (absent: none); under a limit of
// kind credit, the customer's credit after it instead (kind "credit").
type ConsumeReply struct {
	ID        string `json:"id"`
	Customer  string `json:"customer"`
	Meter     string `json:"meter"`
	Allowed   bool   `json:"allowed"`
	Duplicate bool   `json:"duplicate"`
	Used      string `json:"used"`
	Limit     string `json:"limit,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Remaining string `json:"remaining,omitempty"`
	// Credit is the month's spend and the credit it draws, after the
	// consume, under a limit of kind credit.
	Credit *entitle.CreditCheck `json:"credit,omitempty"`
}

func (s *Server) serveConsume(w http.ResponseWriter, r *http.Request) {
	a := s.begin(w, r)
	a.provider = APIProvider
	a.attrs[0] = slog.String("provider", APIProvider)
	key, rej := s.authenticateKey(r, a)
	if rej != nil {
		if rej.code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookledger"`)
		}
		s.finish(w, r, a, rej)
		return
	}
	if ok, wait := s.API.Keys.Allow(key); !ok {
		res := apiReject(http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("API key %q is over its rate limit (%g requests/s)", key.Name, key.RateLimit), nil)
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		s.finish(w, r, a, res)
		return
	}
	s.finish(w, r, a, s.consume(r, a, key.Name, key.ID, key.Prefix))
}

// consume reads, checks and submits one consume.
func (s *Server) consume(r *http.Request, a *attempt, keyName string, keyID int64, keyPrefix string) *result {
	customer, meter := r.PathValue("customer"), r.PathValue("meter")
	for _, id := range []string{customer, meter} {
		if ledger.CheckIdentifier(id) != nil {
			return apiReject(http.StatusBadRequest, "bad_request", fmt.Sprintf("%q is not a customer id or meter name", id), nil)
		}
	}
	var req ConsumeRequest
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, consumeBodyLimit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return apiReject(http.StatusBadRequest, "bad_request", "the body must be {\"id\": \"…\", \"quantity\": \"1\"}: "+err.Error(), nil)
	}
	if err := ledger.CheckIdentifier(req.ID); err != nil || req.ID == "" {
		return apiReject(http.StatusBadRequest, "no_id", "id: a consume needs an id, its idempotency key (printable text)", nil)
	}
	q, err := ledger.ParseRowQuantity(req.Quantity.String())
	if err != nil || q.Sign() <= 0 {
		return apiReject(http.StatusBadRequest, "bad_request", fmt.Sprintf("quantity %q: a positive decimal of at most 6 places", req.Quantity), nil)
	}
	at := a.received
	if req.Time != "" {
		if at, err = time.Parse(time.RFC3339Nano, req.Time); err != nil {
			return apiReject(http.StatusBadRequest, "bad_time", "time must be an RFC 3339 timestamp", nil)
		}
	}
	body := ledger.ConsumeBody(ledger.ConsumeType, req.ID, customer, meter, q, at)
	sum := sha256.Sum256(body)
	d := &custody.Delivery{
		Provider: ingest.Scope(keyName), EventID: ingest.EventID(ledger.ConsumeSource, req.ID), EventType: ledger.ConsumeType,
		Body: body, BodySHA256: sum[:], SignatureHeaders: "Hookledger-Api-Key: " + strconv.FormatInt(keyID, 10) + " " + keyPrefix + "\n",
		Source: custody.SourceAPI, HandlerVersion: s.HandlerVersion, ReceivedAt: a.received,
		Attempt: custody.Attempt{RemoteAddr: r.RemoteAddr, UserAgent: r.UserAgent(), RequestID: a.requestID, StatusCode: http.StatusOK},
	}
	d.Classify(s.Mapper)
	if d.Status != custody.StatusApplied {
		return apiReject(http.StatusBadRequest, "bad_request", d.Error, nil) // e.g. a meter that is not configured
	}
	op := &custody.Consume{Delivery: d, ID: req.ID}
	if err := s.API.Custody.SubmitAll(r.Context(), []custody.Op{op})[0]; err != nil {
		switch {
		case errors.Is(err, entitle.ErrNotBuilt):
			return apiReject(http.StatusServiceUnavailable, "not_ready", err.Error(), nil)
		case errors.Is(err, custody.ErrQueueFull):
			return apiReject(http.StatusServiceUnavailable, "queue_full", "not stored, retry later", err)
		}
		return apiReject(http.StatusServiceUnavailable, "storage_error", "not stored, retry later", err)
	}
	if op.Conflict != "" {
		return apiReject(http.StatusConflict, "id_conflict", fmt.Sprintf("id %q was consumed for %s: an id is one consume of one customer and meter", req.ID, op.Conflict), nil)
	}
	reply := ConsumeReply{ID: req.ID, Customer: customer, Meter: meter, Allowed: op.Allowed, Duplicate: op.Duplicate, Used: op.Used.String()}
	switch {
	case op.Credit != nil:
		reply.Kind, reply.Credit = entitle.LimitCredit, op.Credit
	case op.HasLimit:
		reply.Limit, reply.Kind, reply.Remaining = op.Limit.Value.String(), op.Limit.Kind, op.Limit.Remaining(op.Used).String()
	}
	out := &result{code: http.StatusOK, body: reply, outcome: string(d.Outcome), stored: string(d.StoredStatus),
		attrs: []slog.Attr{slog.String("customer", customer), slog.String("meter", meter), slog.Bool("allowed", op.Allowed)}}
	if op.Duplicate {
		out.outcome, out.stored = string(custody.OutcomeDuplicate), ""
	}
	return out
}
