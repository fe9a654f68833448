// Package scheme is the one place that knows how each webhook provider signs a delivery: which
// headers carry the signature, timestamp and event id, which bytes are signed and how the MAC is
// encoded. Everything else in hookledger talks to the Scheme interface.
package scheme

import (
	"crypto/fips140"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/hookledger/hookledger/payload"
)

// Sentinel outcomes of Verify; every error from Verify wraps exactly one of them so the HTTP layer
// can map it to a status code with errors.Is.
var (
	ErrMissingSignature   = errors.New("missing signature header")    // 400
	ErrMalformedSignature = errors.New("malformed signature header")  // 400
	ErrTimestamp          = errors.New("timestamp outside tolerance") // 401
	ErrMismatch           = errors.New("signature does not match")    // 401
)

// Scheme verifies (and, for the send/bench tools, produces) one provider's signatures.
type Scheme interface {
	// Name is the configured scheme name, one of Names().
	Name() string
	// Key turns a configured secret into the HMAC key. Called at startup, so a bad secret fails
	// loudly there instead of as a stream of 401s.
	Key(secret string) ([]byte, error)
	// Verify checks the signature over the exact raw body with any of keys (secret rotation) at time
	// now. The timestamp check is abs(now-ts) <= tolerance; tolerance < 0 disables it, for
	// re-verifying stored bodies. ts/hasTS report the signed timestamp of schemes that carry one,
	// also alongside an error once the header's timestamp could be parsed (useful for logging skew).
	Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (ts time.Time, hasTS bool, err error)
	// Sign sets on h the headers the provider would send for body signed with key at now. id and
	// eventType go into headers only for schemes that carry them in headers.
	Sign(h http.Header, body []byte, key []byte, id, eventType string, now time.Time)
	// Identify returns the dedupe event id and the event type of an authenticated delivery; an
	// empty id means the delivery carries none.
	Identify(h http.Header, body []byte) (id, eventType string)
	// Headers lists the request headers to store with a receipt so the body can be re-verified and
	// re-identified later.
	Headers() []string
}

// Provider quirks are optional interfaces: a scheme implements the ones its provider needs, and the
// caller checks for them with a type assertion, so nothing outside this package names a scheme.

// A Handshaker's provider sends signed requests that are not events, to check the endpoint (Slack's
// url_verification). Handshake recognises one in an authenticated delivery that carries no event
// id and returns the JSON document to answer it with (200, nothing stored).
type Handshaker interface {
	Handshake(h http.Header, body []byte) (reply []byte, ok bool)
}

// A BodyIdentified scheme's provider names each event by a top-level field of the body rather than
// by a header. Identify reads it there; tools that make provider-shaped bodies (send, bench) put
// the event id there too.
type BodyIdentified interface {
	IDField() string
}

// A Reconcilable scheme's provider has an API that lists past events, so reconcile can find the
// ones its webhooks missed. ReconcileSource names the reconcile source that reads it; it is the
// default for a provider's reconcile.source.
type Reconcilable interface {
	ReconcileSource() string
}

// A Redeliverer's provider may deliver an event again for a known time (retries, redelivery on
// request, events reconcile can list). ReplayHorizon is that time; it is the default for a
// provider's replay_horizon, which retention.keys must cover.
type Redeliverer interface {
	ReplayHorizon() time.Duration
}

// HMACOptions configures the generic "hmac" scheme; it is embedded in the YAML config.
type HMACOptions struct {
	Header          string `yaml:"header"`           // signature header, required, e.g. X-Signature
	Encoding        string `yaml:"encoding"`         // "hex" (default) or "base64"
	Prefix          string `yaml:"prefix"`           // stripped from the header value before decoding, e.g. "sha256="
	TimestampHeader string `yaml:"timestamp_header"` // optional; unix seconds; enables tolerance
	Template        string `yaml:"template"`         // signed string; placeholders {timestamp}, {body}, {id}; default "{body}" (or "{timestamp}.{body}" when TimestampHeader is set)
	IDHeader        string `yaml:"id_header"`        // where the event id comes from: a header ...
	IDPath          string `yaml:"id_path"`          // ... or a path into the body, as in usage mappings (one of the two is required)
	TypeHeader      string `yaml:"type_header"`
	TypePath        string `yaml:"type_path"` // default "type" when TypeHeader is empty
}

// registry is every scheme, in the order Names lists them. A new scheme is one file and one line
// here: the file holds its type, its one header parser (used by Verify and by recipe, which dispute
// bundles render) and whichever optional interfaces its provider's quirks need.
var registry = []struct {
	name string
	new  func(HMACOptions) (Scheme, error)
}{
	{"stripe", fixed(stripeScheme{})},
	{"github", fixed(githubScheme{})},
	{"shopify", fixed(shopifyScheme{})},
	{"slack", fixed(slackScheme{})},
	{"standard", fixed(standardScheme{})},
	{"hmac", newHMAC},
}

// fixed is the constructor of a scheme that takes no options.
func fixed(s Scheme) func(HMACOptions) (Scheme, error) {
	return func(HMACOptions) (Scheme, error) { return s, nil }
}

// Names lists the supported scheme names.
func Names() []string {
	names := make([]string, len(registry))
	for i, r := range registry {
		names[i] = r.name
	}
	return names
}

// New returns the scheme by name. opts configures "hmac" only; giving them to another scheme is a
// configuration mistake and is reported rather than silently ignored.
func New(name string, opts HMACOptions) (Scheme, error) {
	if name != "hmac" && opts != (HMACOptions{}) {
		return nil, fmt.Errorf("scheme %q does not take hmac options", name)
	}
	for _, r := range registry {
		if r.name == name {
			return r.new(opts)
		}
	}
	return nil, fmt.Errorf("unknown signature scheme %q (want one of %s)", name, strings.Join(Names(), ", "))
}

// literalKey is the key of every scheme that uses the secret's bytes as they are.
func literalKey(scheme, secret string) ([]byte, error) {
	// A trailing newline from a secrets file would otherwise turn into a silent stream of 401s.
	if strings.TrimSpace(secret) != secret {
		return nil, fmt.Errorf("%s secret has leading or trailing whitespace", scheme)
	}
	return checkKey(scheme, []byte(secret))
}

// checkKey refuses keys crypto/hmac would panic on: with GODEBUG=fips140=only it rejects keys
// shorter than 112 bits, and Verify must not panic.
func checkKey(scheme string, key []byte) ([]byte, error) {
	if len(key) == 0 {
		return nil, fmt.Errorf("%s secret is empty", scheme)
	}
	if fips140.Enforced() && len(key) < 112/8 {
		return nil, fmt.Errorf("%s secret is shorter than 112 bits, which FIPS 140-only mode refuses", scheme)
	}
	return key, nil
}

// signature is the encoded HMAC-SHA256(key, pre || body || post), as Sign puts it in a header.
func signature(enc encoding, key, pre, body, post []byte) string {
	var mac [sha256.Size]byte
	sum(&mac, key, pre, body, post)
	if enc == base64Encoding {
		return base64.StdEncoding.EncodeToString(mac[:])
	}
	return hex.EncodeToString(mac[:])
}

// sum computes HMAC-SHA256(key, pre || body || post). The parts go into the hash one by one so the
// body, the only large part, is never copied into a signed string.
func sum(out *[sha256.Size]byte, key, pre, body, post []byte) {
	m := hmac.New(sha256.New, key)
	m.Write(pre)
	m.Write(body)
	m.Write(post)
	m.Sum(out[:0])
}

// matchAny accepts when any key's MAC over pre || body || post equals any candidate signature:
// several keys during a secret rotation on our side, several signatures during one on theirs.
func matchAny(keys [][]byte, pre, body, post []byte, sigs *sigSet) error {
	var mac [sha256.Size]byte
	for _, key := range keys {
		sum(&mac, key, pre, body, post)
		for i := range sigs.n {
			if hmac.Equal(mac[:], sigs.v[i][:]) {
				return nil
			}
		}
	}
	return fmt.Errorf("no signature matches a configured secret: %w", ErrMismatch)
}

// bodyString reads an id or type from the raw body, the last of duplicate keys winning as in the
// providers' own libraries (payload.Get). Only strings and numbers count: an object or boolean at
// that path is not an identifier. Integers keep their exact digits (ids above 2^53).
func bodyString(body []byte, path string) string {
	r := payload.Get(body, path)
	if r.Type != gjson.String && r.Type != gjson.Number {
		return ""
	}
	return r.String()
}
