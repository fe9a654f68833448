package console

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"unicode/utf8"

	"github.com/hookledger/hookledger/dispute"
	"github.com/hookledger/hookledger/forward"
	"github.com/hookledger/hookledger/schema"
)

type eventView struct {
	Target string // the dispute target naming the event
	Trace  *dispute.Trace
	Event  dispute.EventView
	// Pretty is the body indented when it is JSON; Raw is the body as
	// text when it is UTF-8 (else empty, RawNote says why).
	Pretty, Raw, RawNote string
	// Messages are the event's outbox messages, one per destination it was
	// forwarded to, each with its attempts (what `hookledger forward list`
	// and `forward attempts` show).
	Messages []message
}

type message struct {
	forward.Message
	Attempts []forward.AttemptView
}

// event shows one event as `hookledger dispute PROVIDER:EVENT_ID` traces
// it: the receipt, every delivery attempt with its signature re-verified
// against the current secrets, and the ledger rows it produced with their
// hash-chain check (dispute.Tracer, so the console and the CLI agree).
func (c *Console) event(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	provider, id := q.Get("provider"), q.Get("id")
	if provider == "" || id == "" {
		c.fail(w, r, s, http.StatusBadRequest, "An event is named by provider and id: /ui/event?provider=P&id=EVENT_ID.")
		return
	}
	target := dispute.Target{Kind: dispute.KindEvent, Provider: provider, EventID: id}.String()
	tr, err := c.Tracer.Trace(r.Context(), target)
	if errors.Is(err, dispute.ErrNotFound) {
		c.fail(w, r, s, http.StatusNotFound, "No receipt and no ledger row for event "+id+" of provider "+provider+".")
		return
	}
	if err != nil {
		c.internal(w, r, s, err)
		return
	}
	v := eventView{Target: target, Trace: tr}
	for _, ev := range tr.Events {
		if ev.Provider == provider && ev.EventID == id {
			v.Event = ev
		}
	}
	body := v.Event.Body()
	if body != nil {
		var b bytes.Buffer
		if json.Indent(&b, body, "", "  ") == nil {
			v.Pretty = b.String()
		}
		if utf8.Valid(body) {
			v.Raw = string(body)
		} else {
			v.RawNote = "the body is not UTF-8 text; the evidence bundle holds its exact bytes (body.raw)"
		}
	}
	if v.Messages, err = c.messages(r, provider, id); err != nil {
		c.internal(w, r, s, err)
		return
	}
	c.render(w, r, s, http.StatusOK, "event", "Event "+id, v)
}

// messages reads an event's outbox messages and their attempts through
// package forward, as the forward CLI does.
func (c *Console) messages(r *http.Request, provider, id string) ([]message, error) {
	ids, err := c.DB.ReceiptMessages(r.Context(), provider, id)
	if err != nil {
		return nil, err
	}
	var out []message
	for _, mid := range ids {
		ms, err := forward.List(r.Context(), c.DB, schema.OutboxFilter{MessageID: mid, Limit: 1}, c.Secrets)
		if err != nil {
			return nil, err
		}
		if len(ms) == 0 {
			continue // delivered and pruned since
		}
		as, err := forward.Attempts(r.Context(), c.DB, mid, c.Secrets)
		if errors.Is(err, forward.ErrUnknownMessage) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, message{Message: ms[0], Attempts: as})
	}
	return out, nil
}
