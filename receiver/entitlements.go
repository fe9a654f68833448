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
// instant. They take an API key like POST /v1/events (and count against its
// rate limit), read the usage state the writer keeps, and write nothing.

// Entitlements answers entitlement checks (*entitle.Checker).
type Entitlements interface {
	CheckAll(ctx context.Context, customer string, meters []string) ([]entitle.Entitlement, error)
}

// maxMeters bounds one batch check.
const maxMeters = 100

// EntitlementsReply is the batch form's answer.
type EntitlementsReply struct {
	Entitlements []entitle.Entitlement `json:"entitlements"`
}

func (s *Server) serveEntitlement(w http.ResponseWriter, r *http.Request) {
	s.entitlements(w, r, []string{r.PathValue("meter")}, false)
}

func (s *Server) serveEntitlements(w http.ResponseWriter, r *http.Request) {
	meters := r.URL.Query()["meter"]
	if len(meters) == 0 {
		writeJSON(w, http.StatusBadRequest, APIError{Error: "name the meters: ?meter=A&meter=B", Reason: "bad_request"})
		return
	}
	if len(meters) > maxMeters {
		writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("%d meters at once; at most %d", len(meters), maxMeters), Reason: "bad_request"})
		return
	}
	s.entitlements(w, r, meters, true)
}

func (s *Server) entitlements(w http.ResponseWriter, r *http.Request, meters []string, batch bool) {
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
	for _, id := range append([]string{customer}, meters...) {
		if id == "" || ledger.CheckIdentifier(id) != nil {
			writeJSON(w, http.StatusBadRequest, APIError{Error: fmt.Sprintf("%q is not a customer id or meter name", id), Reason: "bad_request"})
			return
		}
	}
	es, err := s.Entitlements.CheckAll(r.Context(), customer, meters)
	switch {
	case errors.Is(err, entitle.ErrNotBuilt):
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: err.Error(), Reason: "not_ready"})
	case err != nil:
		s.Log.Error("entitlement check failed", "customer", customer, "error", err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, APIError{Error: "could not read the usage state, retry later", Reason: "storage_error"})
	case batch:
		writeJSON(w, http.StatusOK, EntitlementsReply{Entitlements: es})
	default:
		writeJSON(w, http.StatusOK, es[0])
	}
}
