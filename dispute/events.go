package dispute

import (
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/custody"
)

// wantEvent adds an event to the trace; loadEvents reads it.
func (b *builder) wantEvent(provider, eventID string) *EventView {
	k := eventKey{provider, eventID}
	ev := b.events[k]
	if ev == nil {
		ev = &EventView{Provider: provider, EventID: eventID, Attempts: []AttemptView{}, RowIDs: []int64{}}
		b.events[k] = ev
		b.eventSeq = append(b.eventSeq, k)
	}
	return ev
}

type receiptRow struct {
	Provider       string `db:"provider"`
	EventID        string `db:"event_id"`
	Type           string `db:"event_type"`
	Status         string `db:"status"`
	Error          string `db:"error"`
	Source         string `db:"source"`
	HandlerVersion string `db:"handler_version"`
	ReceivedAt     int64  `db:"received_at"`
	ProcessedAt    int64  `db:"processed_at"`
	Body           []byte `db:"body"`
	Pruned         bool   `db:"pruned"`
	SHA            []byte `db:"body_sha256"`
	Headers        string `db:"signature_headers"`
}

type attemptRow struct {
	Provider   string        `db:"provider"`
	EventID    string        `db:"event_id"`
	ID         int64         `db:"id"`
	ReceivedAt int64         `db:"received_at"`
	RemoteAddr string        `db:"remote_addr"`
	UserAgent  string        `db:"user_agent"`
	RequestID  string        `db:"request_id"`
	SHA        []byte        `db:"body_sha256"`
	Headers    string        `db:"signature_headers"`
	Age        sql.NullInt64 `db:"signature_age_ms"`
	Outcome    string        `db:"outcome"`
	StatusCode int           `db:"status_code"`
}

// eventChunk bounds the ids per query, well under SQLite's variable limit.
const eventChunk = 500

// loadEvents reads the receipts and attempts of the events added since the
// last call, a provider and a chunk of ids per query, and re-verifies them.
func (b *builder) loadEvents() error {
	keys := b.eventSeq[b.loaded:]
	b.loaded = len(b.eventSeq)
	byProvider := map[string][]string{}
	var providers []string
	for _, k := range keys {
		if byProvider[k.provider] == nil {
			providers = append(providers, k.provider)
		}
		byProvider[k.provider] = append(byProvider[k.provider], k.id)
	}
	receipts := map[eventKey]*receiptRow{}
	attempts := map[eventKey][]attemptRow{}
	for _, p := range providers {
		ids := byProvider[p]
		for len(ids) > 0 {
			n := min(eventChunk, len(ids))
			args := make([]any, 0, n+1)
			args = append(args, p)
			for _, id := range ids[:n] {
				args = append(args, id)
			}
			in := `provider = ? AND event_id IN (?` + strings.Repeat(", ?", n-1) + `)`
			var rs []receiptRow
			if err := sqlx.SelectContext(b.ctx, b.q, &rs, `SELECT provider, event_id, event_type, status, error, source, handler_version,
				received_at, processed_at, body, body IS NULL AS pruned, body_sha256, signature_headers FROM receipts WHERE `+in, args...); err != nil {
				return fmt.Errorf("read receipts of %s: %w", p, err)
			}
			for i := range rs {
				receipts[eventKey{rs[i].Provider, rs[i].EventID}] = &rs[i]
			}
			var as []attemptRow
			if err := sqlx.SelectContext(b.ctx, b.q, &as, `SELECT provider, event_id, id, received_at, remote_addr, user_agent, request_id,
				body_sha256, signature_headers, signature_age_ms, outcome, status_code FROM delivery_attempts WHERE `+in+` ORDER BY id`, args...); err != nil {
				return fmt.Errorf("read delivery attempts of %s: %w", p, err)
			}
			for _, a := range as {
				k := eventKey{a.Provider, a.EventID}
				attempts[k] = append(attempts[k], a)
			}
			ids = ids[n:]
		}
	}
	for _, k := range keys {
		b.fillEvent(b.events[k], receipts[k], attempts[k])
	}
	return nil
}

// fillEvent puts a receipt and its attempts on ev and re-verifies them.
func (b *builder) fillEvent(ev *EventView, rc *receiptRow, attempts []attemptRow) {
	var st *stored
	headers := ""
	if rc != nil {
		st = &stored{provider: ev.Provider, source: rc.Source, body: rc.Body, pruned: rc.Pruned, sha: rc.SHA}
		if !rc.Pruned && st.body == nil {
			st.body = []byte{} // an empty body is not a pruned one
		}
		headers = rc.Headers
		ev.Receipt = &ReceiptView{Type: rc.Type, Status: rc.Status, Error: rc.Error, Source: rc.Source, HandlerVersion: rc.HandlerVersion,
			ReceivedAt: utc(rc.ReceivedAt), ProcessedAt: utc(rc.ProcessedAt), BodySHA256: hex.EncodeToString(rc.SHA),
			BodyPruned: rc.Pruned, SignatureHeaders: rc.Headers}
		if !rc.Pruned {
			n := len(st.body)
			ev.Receipt.BodyBytes = &n
			ev.body = st.body
		}
	}
	var inserted []byte
	for _, a := range attempts {
		av := AttemptView{ID: a.ID, ReceivedAt: utc(a.ReceivedAt), RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent, RequestID: a.RequestID,
			Outcome: a.Outcome, StatusCode: a.StatusCode, BodySHA256: hex.EncodeToString(a.SHA), SignatureHeaders: a.Headers,
			Signature: b.v.attempt(st, a.Headers, a.Outcome, a.SHA)}
		if a.Age.Valid {
			age := a.Age.Int64
			av.SignatureAgeMS = &age
		}
		if custody.Outcome(a.Outcome) == custody.OutcomeInserted && inserted == nil {
			inserted = a.SHA
		}
		ev.Attempts = append(ev.Attempts, av)
	}
	ev.Verification = b.v.receipt(st, headers, inserted)
}
