package bench

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/payload"
	"github.com/hookledger/hookledger/receiver"
)

// Reference is the fastest honest receiver: it does everything hookledger does
// before the write — the same providers, the same signature verification over
// the raw body, the same JSON validation, event identification and usage
// mapping — then answers 200 and stores nothing. Throughput relative to it is
// the price of durability.
type Reference struct {
	Providers map[string]*receiver.Provider
	Mapper    *ledger.Mapper
	// Now is the clock for signature tolerance. Default time.Now.
	Now func() time.Time
}

// Routes registers POST /webhooks/{provider} on mux.
func (s *Reference) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /webhooks/{provider}", s.serveWebhook)
}

type referenceReply struct {
	Accepted  bool   `json:"accepted"`
	Duplicate bool   `json:"duplicate"`
	Status    string `json:"status,omitempty"`
	EventID   string `json:"event_id,omitempty"`
	Error     string `json:"error,omitempty"`
}

func (s *Reference) serveWebhook(w http.ResponseWriter, r *http.Request) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	received := now()
	p, ok := s.Providers[r.PathValue("provider")]
	if !ok {
		reply(w, http.StatusNotFound, referenceReply{Error: "unknown provider"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, p.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			reply(w, http.StatusRequestEntityTooLarge, referenceReply{Error: "body too large"})
		} else {
			reply(w, http.StatusBadRequest, referenceReply{Error: "could not read body"})
		}
		return
	}
	if _, _, err := p.Scheme.Verify(r.Header, body, p.Keys, received, p.Tolerance); err != nil {
		reply(w, http.StatusUnauthorized, referenceReply{Error: err.Error()})
		return
	}
	if payload.Check(body, p.MaxDepth) != nil {
		reply(w, http.StatusBadRequest, referenceReply{Error: "body is not valid JSON or nests too deep"})
		return
	}
	id, typ := p.Scheme.Identify(r.Header, body)
	if id == "" {
		reply(w, http.StatusBadRequest, referenceReply{Error: "delivery carries no event id"})
		return
	}
	d := &custody.Delivery{Provider: p.Name, EventID: id, EventType: typ, Body: body, ReceivedAt: received}
	d.Classify(s.Mapper)
	reply(w, http.StatusOK, referenceReply{Accepted: true, Status: d.Status, EventID: id})
}

func reply(w http.ResponseWriter, code int, v referenceReply) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
