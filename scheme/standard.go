package scheme

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Standard Webhooks (and Svix, which wrote the spec) sign "<id>.<timestamp>.<body>" with the
// base64-decoded secret and send "v1,<base64>" signatures, space-separated during a rotation.
type standardScheme struct{}

// Svix sends svix-* headers, the spec names them webhook-*. As in svix's own Verify, the svix-* set
// wins when all three are present. The names are in canonical form so lookups do not allocate.
var (
	standardNames = [3]string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
	svixNames     = [3]string{"Svix-Id", "Svix-Timestamp", "Svix-Signature"}
)

// standardHeaders picks the header set once for both Verify and Identify. The dedupe id must be the
// id that was signed, or a captured delivery could be replayed under a fresh id.
func standardHeaders(h http.Header) (names *[3]string, id, ts, sig string) {
	id, ts, sig = h.Get(svixNames[0]), h.Get(svixNames[1]), h.Get(svixNames[2])
	if id != "" && ts != "" && sig != "" {
		return &svixNames, id, ts, sig
	}
	return &standardNames, h.Get(standardNames[0]), h.Get(standardNames[1]), h.Get(standardNames[2])
}

func (standardScheme) Name() string { return "standard" }

func (standardScheme) Headers() []string {
	return append(standardNames[:], svixNames[:]...)
}

// Key accepts the secret with or without its whsec_ prefix, as svix does.
func (standardScheme) Key(secret string) ([]byte, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return nil, fmt.Errorf("standard secret must be base64 after the whsec_ prefix: %w", err)
	}
	return checkKey("standard", key)
}

// parseStandard reads the id, timestamp and signature headers, the one place that knows their
// format. names is the header set it read (webhook-* or svix-*).
func parseStandard(h http.Header, v *verifying) (names *[3]string, p parsed, err error) {
	names, id, t, sigs := standardHeaders(h)
	switch {
	case id == "":
		return names, p, missing(names[0])
	case t == "":
		return names, p, missing(names[1])
	case sigs == "":
		return names, p, missing(names[2])
	}
	p.id = id
	for item := range strings.FieldsSeq(sigs) {
		version, sig, ok := strings.Cut(item, ",")
		if !ok {
			return names, p, fmt.Errorf("signature without version: %w", ErrMalformedSignature)
		}
		// Other versions (v1a is ed25519) are skipped, as in svix.
		if version == "v1" {
			if err := p.sig(base64Encoding, sig, v); err != nil {
				return names, p, err
			}
		}
	}
	if err := p.timestamp(t, v); err != nil {
		return names, p, err
	}
	if v != nil && p.n == 0 {
		return names, p, fmt.Errorf("no v1 signature: %w", ErrMismatch)
	}
	return names, p, nil
}

// standardSigned is what comes before the body in the signed bytes.
func standardSigned(dst []byte, id, t string) []byte {
	return append(append(append(append(dst, id...), '.'), t...), '.')
}

func (standardScheme) Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	v := verifying{now: now, tolerance: tolerance}
	_, p, err := parseStandard(h, &v)
	var buf [96]byte
	return v.result(&p, err, keys, standardSigned(buf[:0], p.id, p.t), body, nil)
}

func (standardScheme) Sign(h http.Header, body []byte, key []byte, id, _ string, now time.Time) {
	t := unixString(now)
	h.Set(standardNames[0], id)
	h.Set(standardNames[1], t)
	h.Set(standardNames[2], "v1,"+signature(base64Encoding, key, standardSigned(nil, id, t), body, nil))
}

func (standardScheme) recipe(h http.Header) (Signed, error) {
	names, p, err := parseStandard(h, nil)
	if err != nil {
		return Signed{}, err
	}
	return Signed{Header: names[2], Encoding: "base64", KeyBase64: true,
		Describe: fmt.Sprintf("<%s>.<%s>.<body>", names[0], names[1]),
		Prefix:   standardSigned(nil, p.id, p.t), Signatures: p.sigs}, nil
}

func (standardScheme) Identify(h http.Header, body []byte) (id, eventType string) {
	_, id, _, _ = standardHeaders(h)
	return id, bodyString(body, "type")
}
