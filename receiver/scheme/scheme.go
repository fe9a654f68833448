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
	"strconv"
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

// Names lists the supported scheme names.
func Names() []string {
	return []string{"stripe", "github", "shopify", "slack", "standard", "hmac"}
}

// New returns the scheme by name. opts configures "hmac" only; giving them to another scheme is a
// configuration mistake and is reported rather than silently ignored.
func New(name string, opts HMACOptions) (Scheme, error) {
	if name != "hmac" && opts != (HMACOptions{}) {
		return nil, fmt.Errorf("scheme %q does not take hmac options", name)
	}
	switch name {
	case "stripe":
		return stripeScheme{}, nil
	case "github":
		return githubScheme{}, nil
	case "shopify":
		return shopifyScheme{}, nil
	case "slack":
		return slackScheme{}, nil
	case "standard":
		return standardScheme{}, nil
	case "hmac":
		return newHMAC(opts)
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

// maxSigs bounds the candidate signatures one header may carry. Senders list one per active secret,
// so a handful is plenty; the bound keeps parsing allocation-free and caps a hostile header's cost.
const maxSigs = 8

type encoding int

const (
	hexEncoding encoding = iota
	base64Encoding
)

// strictBase64 rejects non-zero padding bits, which would give one MAC several spellings; the
// reference implementations compare the encoded text, so they reject those too.
var strictBase64 = base64.StdEncoding.Strict()

// sigSet holds the decoded candidate signatures of one delivery.
type sigSet struct {
	n int
	v [maxSigs][sha256.Size]byte
}

// add decodes one encoded HMAC-SHA256. Anything that is not exactly one digest is malformed, which
// is also the length check that makes the later hmac.Equal meaningful.
func (s *sigSet) add(enc encoding, src string) error {
	if s.n == maxSigs {
		return fmt.Errorf("more than %d signatures: %w", maxSigs, ErrMalformedSignature)
	}
	dst := &s.v[s.n]
	switch enc {
	case hexEncoding:
		if !decodeHex(dst, src) {
			return fmt.Errorf("signature is not %d hex digits: %w", 2*sha256.Size, ErrMalformedSignature)
		}
	case base64Encoding:
		var buf [sha256.Size + 1]byte // DecodedLen of 44 characters is 33
		if len(src) != base64.StdEncoding.EncodedLen(sha256.Size) {
			return fmt.Errorf("signature is not a base64 SHA-256 digest: %w", ErrMalformedSignature)
		}
		n, err := strictBase64.Decode(buf[:], []byte(src))
		if err != nil || n != sha256.Size {
			return fmt.Errorf("signature is not a base64 SHA-256 digest: %w", ErrMalformedSignature)
		}
		copy(dst[:], buf[:n])
	}
	s.n++
	return nil
}

// decodeHex works on the header string directly; hex.Decode would need a []byte copy of it.
func decodeHex(dst *[sha256.Size]byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := unhex(s[2*i])
		lo, ok2 := unhex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func encode(enc encoding, mac []byte) string {
	if enc == base64Encoding {
		return base64.StdEncoding.EncodeToString(mac)
	}
	return hex.EncodeToString(mac)
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

// parseUnix accepts plain decimal seconds, the only form providers send; strconv.ParseInt alone
// would also take a sign, and a negative or signed timestamp is a malformed header, not a stale one.
func parseUnix(s string) (time.Time, error) {
	if s == "" || len(s) > 18 {
		return time.Time{}, fmt.Errorf("timestamp %.20q is not unix seconds: %w", s, ErrMalformedSignature)
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, fmt.Errorf("timestamp %.20q is not unix seconds: %w", s, ErrMalformedSignature)
		}
	}
	n, _ := strconv.ParseInt(s, 10, 64) // cannot fail: at most 18 digits
	return time.Unix(n, 0), nil
}

// checkAge rejects timestamps too far in the past or the future: a delivery signed "ahead" would
// otherwise stay replayable for longer than the tolerance. time.Time.Sub saturates, so absurd
// timestamps cannot overflow into acceptance.
func checkAge(ts, now time.Time, tolerance time.Duration) error {
	if tolerance < 0 {
		return nil
	}
	switch age := now.Sub(ts); {
	case age > tolerance:
		return fmt.Errorf("signed %s ago: %w", age, ErrTimestamp)
	case age < -tolerance:
		return fmt.Errorf("signed %s in the future: %w", ts.Sub(now), ErrTimestamp)
	}
	return nil
}

// signedAt parses the signed timestamp t and checks its age: the time and
// "signed" results every timestamped scheme's Verify returns, and the error
// that ends it early (a malformed t, or a timestamp outside the tolerance).
func signedAt(t string, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	ts, err := parseUnix(t)
	if err != nil {
		return time.Time{}, false, err
	}
	return ts, true, checkAge(ts, now, tolerance)
}

// missing reports an absent required header.
func missing(header string) error {
	return fmt.Errorf("%s: %w", header, ErrMissingSignature)
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
