package dispute

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/scheme"
)

// Verification statuses.
const (
	Valid         = "valid"          // a current secret verifies the stored body
	Invalid       = "invalid"        // the stored bytes changed after they were received
	NotVerifiable = "not_verifiable" // the body is intact but no current secret can speak for it
	Pruned        = "pruned"         // retention deleted the body (or the whole receipt)
	// APIKey: an ingest API event, which carries no provider signature; the
	// body hashes to the digest recorded on arrival, and the API key
	// recorded as having sent it is a stored key of the event's scope.
	APIKey = "api_key"
)

// Verification is the re-verification of a stored body against the
// provider's secrets as configured now.
//
// The rule, in order:
//  1. no body stored (retention.payload pruned it, or retention.keys the
//     receipt) -> pruned;
//  2. the body's SHA-256 differs from the body_sha256 the receipt recorded on
//     arrival, or from the digest the attempt recorded -> invalid: the stored
//     body was altered;
//  3. a current secret verifies the stored signature headers over the body,
//     timestamps ignored -> valid;
//  4. an ingest API event (source api) whose recorded API key is a stored
//     key of its scope -> api_key: the key and the body digest are what
//     can be checked; there is no provider signature;
//  5. otherwise -> not verifiable. The body still hashes to what arrived, so
//     the likeliest cause is a secret rotated out of the configuration; a
//     secret nobody holds any more cannot tell rotation from tampering that
//     also rewrote every recorded digest, and this says so rather than guess.
//     Reconciled events (fetched from the provider's API, never signed),
//     providers no longer configured and ingest API events whose key is not
//     in the database are not verifiable too.
type Verification struct {
	Status string `json:"status"`
	// Text is the status as people read it, e.g. "not verifiable (no current secret matches)".
	Text   string `json:"text"`
	Detail string `json:"detail"`
	Scheme string `json:"scheme,omitempty"`
	// Secret is the position (from 1) of the configured secret that verified.
	Secret int `json:"secret,omitempty"`
}

func verdict(status, text, detail string, args ...any) Verification {
	return Verification{Status: status, Text: text, Detail: fmt.Sprintf(detail, args...)}
}

// Verifier re-verifies stored bodies with the providers' current secrets.
type Verifier struct {
	providers map[string]*receiver.Provider
	configs   map[string]config.Provider
}

// apiKeys are the ingest API's stored keys by id, revoked ones too: what an
// API event's recorded key is checked against.
type apiKeys map[int64]schema.APIKey

// NewVerifier builds the configured providers and decodes their secrets.
func NewVerifier(ps []config.Provider) (*Verifier, error) {
	built, err := receiver.NewProviders(ps)
	if err != nil {
		return nil, err
	}
	v := &Verifier{providers: built, configs: make(map[string]config.Provider, len(ps))}
	for _, p := range ps {
		v.configs[p.Name] = p
	}
	return v, nil
}

// Providers lists the configured provider names, sorted.
func (v *Verifier) Providers() []string {
	names := make([]string, 0, len(v.providers))
	for n := range v.providers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// stored is what re-verification reads of one receipt.
type stored struct {
	provider, source string
	body             []byte // nil when pruned
	pruned           bool
	missing          bool    // body NULL but not pruned: empty, or deleted
	sha              []byte  // body_sha256 recorded on arrival
	keys             apiKeys // the stored API keys, for an ingest API event
	// link is the receipt's link in the receipts chain, nil on a receipt
	// that was never chained (a database from before the chain).
	link *ledger.ReceiptLink
}

// receipt re-verifies a receipt's body with the signature headers it arrived
// with. inserted is the body digest recorded by the attempt that inserted the
// receipt (nil if there is none).
func (v *Verifier) receipt(s *stored, headers string, inserted []byte) Verification {
	if s == nil {
		return verdict(Pruned, "receipt pruned by retention", "the receipt and its body were deleted by retention.keys; the ledger rows remain")
	}
	if s.pruned {
		return verdict(Pruned, "body pruned by retention", "the body was deleted by retention.payload; its SHA-256 %x remains", s.sha)
	}
	if sum := sha256.Sum256(s.body); !bytes.Equal(sum[:], s.sha) {
		if s.missing {
			return missingBody()
		}
		return verdict(Invalid, "invalid", "the stored body hashes to %x but the receipt recorded %x on arrival: the body was changed after it was received", sum, s.sha)
	}
	if inserted != nil && !bytes.Equal(inserted, s.sha) {
		return verdict(Invalid, "invalid", "the receipt's body_sha256 %x differs from the %x the delivery that inserted it recorded: the receipt was rewritten", s.sha, inserted)
	}
	// A receipt keeps the attempt that inserted it in its own row (there is
	// then no second digest to compare with), and its chain link covers its
	// digest: a body and digest rewritten together fail here.
	if s.link != nil && !bytes.Equal(s.link.Hash(s.link.PrevHash), s.link.RowHash) {
		return verdict(Invalid, "invalid", "the receipt's custody facts (body_sha256 %x, type, status as stored, source, time) do not match its row_hash in the receipts chain: the receipt was rewritten", s.sha)
	}
	return v.signature(s, headers)
}

// missingBody is the verdict on a body gone without a prune.
func missingBody() Verification {
	return verdict(Invalid, "body missing", "the receipt has no body, and no retention.payload prune covers it "+
		"(a prune clears the signature headers too, and records how far it went): the body was deleted after it was received")
}

// attempt re-verifies one delivery attempt's own signature headers over the
// stored body (a retry is signed afresh, so each attempt has its own).
func (v *Verifier) attempt(s *stored, headers, outcome string, sha []byte) Verification {
	if s == nil || s.pruned {
		return verdict(Pruned, "body pruned by retention", "the body this attempt carried is no longer stored")
	}
	if custody.Outcome(outcome) == custody.OutcomePayloadMismatch {
		return verdict(NotVerifiable, "not verifiable (different body, not stored)",
			"this attempt carried a different body (SHA-256 %x) under the same event id; only the first body is kept", sha)
	}
	if sum := sha256.Sum256(s.body); !bytes.Equal(sum[:], sha) {
		if s.missing {
			return missingBody()
		}
		return verdict(Invalid, "invalid", "the stored body hashes to %x but this attempt recorded %x: the body was changed after it was received", sum, sha)
	}
	return v.signature(s, headers)
}

// apiEvent is the verdict on an intact body of the ingest API: an API key,
// not a provider's signature, authenticated it. What can be checked is
// checked: the body hashes to the digest recorded on arrival (the caller
// did that), and the key recorded as having sent it (receiver/events.go
// keeps its id and prefix, never the key) is a stored key of the event's
// scope. A recorded key that names another key is a rewritten record.
func apiEvent(s *stored, headers string) Verification {
	const text = "no provider signature to re-verify (ingest API event)"
	digest := fmt.Sprintf("its body hashes to the SHA-256 recorded on arrival, %x", s.sha)
	recorded := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(headers), "Hookledger-Api-Key:"))
	idText, prefix, _ := strings.Cut(recorded, " ")
	id, err := strconv.ParseInt(idText, 10, 64)
	if recorded == "" || err != nil {
		return verdict(NotVerifiable, "not verifiable (no API key recorded)",
			"the event arrived on the ingest API (POST /v1/events) under scope %q, but which API key sent it was not recorded (%q); %s", s.provider, recorded, digest)
	}
	k, ok := s.keys[id]
	if !ok {
		return verdict(NotVerifiable, "not verifiable (API key not in the database)",
			"the event arrived on the ingest API under scope %q from API key %d (%s…), which this database's api_keys does not hold "+
				"(keys are revoked, never deleted); %s", s.provider, id, prefix, digest)
	}
	if k.Prefix != prefix || ingest.Scope(k.Name) != s.provider {
		return verdict(Invalid, "invalid",
			"the receipt records API key %d (%s…) of scope %q, but key %d is %s… of scope %q: the receipt was rewritten", id, prefix, s.provider, id, k.Prefix, ingest.Scope(k.Name))
	}
	revoked := ""
	if k.RevokedAt != nil {
		revoked = ", revoked since " + stamp(utc(*k.RevokedAt))
	}
	return Verification{Status: APIKey, Text: text,
		Detail: fmt.Sprintf("verified: the API key recorded on arrival, %d (%s…), is a stored key of scope %q (created %s%s), "+
			"and the body hashes to the SHA-256 recorded on arrival. The event came through the ingest API (POST /v1/events) and carries no provider signature",
			id, k.Prefix, s.provider, stamp(utc(k.CreatedAt)), revoked)}
}

// signature checks headers over an intact body with each current secret in turn.
func (v *Verifier) signature(s *stored, headers string) Verification {
	if custody.Source(s.source) == custody.SourceAPI {
		return apiEvent(s, headers)
	}
	p := v.providers[s.provider]
	if p == nil {
		return verdict(NotVerifiable, "not verifiable (provider not configured)",
			"provider %q is not in the current configuration, so there is no secret to check with", s.provider)
	}
	if strings.TrimSpace(headers) == "" {
		if custody.Source(s.source) == custody.SourceReconcile {
			return Verification{Status: NotVerifiable, Text: "not verifiable (fetched by reconciliation, unsigned)", Scheme: p.Scheme.Name(),
				Detail: "the event was fetched from the provider's API by reconciliation, authenticated by the API key; it carries no webhook signature"}
		}
		return Verification{Status: NotVerifiable, Text: "not verifiable (no signature headers stored)", Scheme: p.Scheme.Name(),
			Detail: "no signature headers were stored with this delivery"}
	}
	h := receiver.ParseSignatureHeaders(headers)
	for i, key := range p.Keys {
		// Tolerance < 0: a stored delivery is old by design; the signature,
		// not its age, is the question here.
		_, _, err := p.Scheme.Verify(h, s.body, [][]byte{key}, time.Time{}, -1)
		if err == nil {
			return Verification{Status: Valid, Text: "valid", Scheme: p.Scheme.Name(), Secret: i + 1,
				Detail: fmt.Sprintf("secret %d of %d of provider %q verifies the stored body with the stored signature headers", i+1, len(p.Keys), s.provider)}
		}
		if !errors.Is(err, scheme.ErrMismatch) {
			return Verification{Status: NotVerifiable, Text: "not verifiable (signature headers unreadable)", Scheme: p.Scheme.Name(),
				Detail: fmt.Sprintf("the stored signature headers do not parse under the current %s scheme: %v", p.Scheme.Name(), err)}
		}
	}
	return Verification{Status: NotVerifiable, Text: "not verifiable (no current secret matches)", Scheme: p.Scheme.Name(),
		Detail: fmt.Sprintf("the body still hashes to the digest recorded on arrival, but none of the %d current secret(s) of provider %q "+
			"verifies its signature: the secret that signed it was most likely rotated out of the configuration", len(p.Keys), s.provider)}
}
