package dispute

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
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

// loadEvents reads the receipts and attempts of the events added since the
// last call, a provider at a time, and re-verifies them.
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
	receipts := map[eventKey]*schema.Receipt{}
	attempts := map[eventKey][]schema.Attempt{}
	for _, p := range providers {
		rs, err := b.q.EventReceipts(b.ctx, p, byProvider[p])
		if err != nil {
			return fmt.Errorf("read receipts of %s: %w", p, err)
		}
		for i := range rs {
			receipts[eventKey{rs[i].Provider, rs[i].EventID}] = &rs[i]
		}
		as, err := b.q.EventAttempts(b.ctx, p, byProvider[p])
		if err != nil {
			return fmt.Errorf("read delivery attempts of %s: %w", p, err)
		}
		for _, a := range as {
			k := eventKey{a.Provider, a.EventID}
			attempts[k] = append(attempts[k], a)
		}
	}
	for _, k := range keys {
		b.fillEvent(b.events[k], receipts[k], attempts[k])
	}
	return nil
}

// fillEvent puts a receipt and its attempts on ev and re-verifies them.
func (b *builder) fillEvent(ev *EventView, rc *schema.Receipt, attempts []schema.Attempt) {
	var st *stored
	headers := ""
	if rc != nil {
		st = &stored{provider: ev.Provider, source: rc.Source, body: rc.Body, pruned: rc.Pruned, sha: rc.BodySHA256, keys: b.keys}
		if len(rc.RowHash) > 0 {
			st.link = &ledger.ReceiptLink{ID: rc.ID, Provider: rc.Provider, EventID: rc.EventID, EventType: rc.EventType, BodySHA256: rc.BodySHA256,
				Status: rc.FirstStatus, Source: rc.Source, ReceivedAt: rc.ReceivedAt, PrevHash: rc.PrevHash, RowHash: rc.RowHash}
		}
		if !rc.Pruned && st.body == nil {
			// Gone without a prune (EventReceipts), or an empty body stored
			// as NULL: that one hashes as empty.
			empty := sha256.Sum256(nil)
			st.body, st.missing = []byte{}, !bytes.Equal(rc.BodySHA256, empty[:])
		}
		headers = rc.SignatureHeaders
		ev.Receipt = &ReceiptView{Type: rc.EventType, Status: rc.Status, Error: rc.Error, Source: rc.Source, HandlerVersion: rc.HandlerVersion,
			ReceivedAt: utc(rc.ReceivedAt), ProcessedAt: utc(rc.ProcessedAt), BodySHA256: hex.EncodeToString(rc.BodySHA256),
			BodyPruned: rc.Pruned, SignatureHeaders: rc.SignatureHeaders}
		ev.Receipt.BodyMissing = st.missing
		if !rc.Pruned && !st.missing {
			n := len(st.body)
			ev.Receipt.BodyBytes = &n
			ev.body = st.body
		}
	}
	var inserted []byte
	for _, a := range attempts {
		av := AttemptView{ID: a.ID, ReceivedAt: utc(a.ReceivedAt), RemoteAddr: a.RemoteAddr, UserAgent: a.UserAgent, RequestID: a.RequestID,
			Outcome: a.Outcome, StatusCode: a.StatusCode, BodySHA256: hex.EncodeToString(a.BodySHA256), SignatureHeaders: a.SignatureHeaders,
			Signature: b.v.attempt(st, a.SignatureHeaders, a.Outcome, a.BodySHA256), SignatureAgeMS: a.SignatureAgeMS}
		if a.Outcome == string(custody.OutcomeInserted) && inserted == nil {
			inserted = a.BodySHA256
		}
		ev.Attempts = append(ev.Attempts, av)
	}
	ev.Verification = b.v.receipt(st, headers, inserted)
}
