package bench

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
)

// Reference is the fastest honest receiver: hookledger's own webhook handler
// (receiver.Server) — the same providers, body limits, signature
// verification over the raw body, JSON validation, event identification,
// usage mapping and replies — with custody replaced: by default by a
// submitter that stores nothing (throughput relative to it is the price of
// durability), or by a DurableLog (relative to that, the price of a queryable
// ledger over the disk's own limit).
type Reference struct {
	Providers map[string]*receiver.Provider
	Mapper    *ledger.Mapper
	// Custody takes the deliveries. Default: stored nowhere.
	Custody receiver.Submitter
	// Now is the clock for signature tolerance. Default time.Now.
	Now func() time.Time
	// Log receives the handler's line per delivery. Default: discarded.
	Log *slog.Logger
}

// Routes registers POST /webhooks/{provider} on mux.
func (s *Reference) Routes(mux *http.ServeMux) {
	h := &receiver.Server{
		Providers:      s.Providers,
		Mapper:         s.Mapper,
		Custody:        s.Custody,
		HandlerVersion: "hookledger/reference+" + s.Mapper.Version(),
		Log:            s.Log,
		Now:            s.Now,
	}
	if h.Custody == nil {
		h.Custody = discard{}
	}
	if h.Now == nil {
		h.Now = time.Now
	}
	if h.Log == nil {
		h.Log = slog.New(slog.DiscardHandler)
	}
	h.Routes(mux)
}

// discard is custody that keeps nothing: every delivery is new, with the
// status its mapping gave it.
type discard struct{}

func (discard) Submit(_ context.Context, op custody.Op) error {
	if d, ok := op.(*custody.Delivery); ok {
		d.Outcome, d.StoredStatus = custody.OutcomeInserted, d.Status
	}
	return nil
}
