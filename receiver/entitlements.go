package receiver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ledger"
)

// Entitlement checks on the ingest API's listener (docs/entitlements.md):
// GET /v1/entitlements/{customer}/{meter}, and GET
// /v1/entitlements/{customer}?meter=A&meter=B for several meters at one
// instant (with &spend=true, the customer's spend too); GET
// /v1/spend/{customer} for the spend alone: a path of its own, so no meter
// name can be mistaken for it. They take an API key like POST /v1/events
// (and count against its rate limit), read the usage state the writer
// keeps, and write nothing.

// Entitlements answers entitlement checks (*entitle.Checker).
type Entitlements interface {
	Reply(ctx context.Context, customer string, meters []string, spend bool) (entitle.Reply, error)
}

// maxMeters bounds one batch check.
const maxMeters = 100

// checks is what one request asks: meters, the spend, or both.
type checks struct {
	meters []string
	spend  bool
	batch  bool
}

func (s *Server) serveEntitlement(w http.ResponseWriter, r *http.Request) {
	s.entitlements(w, r, checks{meters: []string{r.PathValue("meter")}})
}

func (s *Server) serveSpend(w http.ResponseWriter, r *http.Request) {
	s.entitlements(w, r, checks{spend: true})
}

func (s *Server) serveEntitlements(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	meters := q["meter"]
	spend := false
	switch v := q.Get("spend"); v {
	case "", "false":
	case "true":
		spend = true
	default:
		writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("spend=%q: true or false", v), Reason: "bad_request"})
		return
	}
	if len(meters) == 0 && !spend {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "name the meters: ?meter=A&meter=B (and &spend=true for the spend)", Reason: "bad_request"})
		return
	}
	if len(meters) > maxMeters {
		writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("%d meters at once; at most %d", len(meters), maxMeters), Reason: "bad_request"})
		return
	}
	s.entitlements(w, r, checks{meters: meters, spend: spend, batch: true})
}

func (s *Server) entitlements(w http.ResponseWriter, r *http.Request, ask checks) {
	key, rej := s.authenticateKey(r, &attempt{}) // the same answers as the ingest API's
	if rej != nil {
		if rej.code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookledger"`)
		}
		writeJSON(w, rej.code, rej.body)
		return
	}
	if ok, wait := s.API.Keys.Allow(key); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		writeJSON(w, http.StatusTooManyRequests, APIError{Error: fmt.Sprintf("API key %q is over its rate limit (%g requests/s)", key.Name, key.RateLimit), Reason: "rate_limited"})
		return
	}
	customer := r.PathValue("customer")
	for _, id := range append([]string{customer}, ask.meters...) {
		if id == "" || ledger.CheckIdentifier(id) != nil {
			writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("%q is not a customer id or meter name", id), Reason: "bad_request"})
			return
		}
	}
	reply, err := s.Entitlements.Reply(r.Context(), customer, ask.meters, ask.spend)
	switch {
	case errors.Is(err, entitle.ErrNotBuilt):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: err.Error(), Reason: "not_ready"})
	case err != nil:
		s.Log.Error("entitlement check failed", "customer", customer, "error", err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: "could not read the usage state, retry later", Reason: "storage_error"})
	case ask.batch:
		writeJSON(w, http.StatusOK, reply)
	case ask.spend:
		writeJSON(w, http.StatusOK, reply.Spend)
	default:
		writeJSON(w, http.StatusOK, reply.Entitlements[0])
	}
}
