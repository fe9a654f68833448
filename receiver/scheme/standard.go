package scheme

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
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
func standardHeaders(h http.Header) (names [3]string, id, ts, sig string) {
	id, ts, sig = h.Get(svixNames[0]), h.Get(svixNames[1]), h.Get(svixNames[2])
	if id != "" && ts != "" && sig != "" {
		return svixNames, id, ts, sig
	}
	return standardNames, h.Get(standardNames[0]), h.Get(standardNames[1]), h.Get(standardNames[2])
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

func (standardScheme) Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	names, id, t, v := standardHeaders(h)
	switch {
	case id == "":
		return time.Time{}, false, missing(names[0])
	case t == "":
		return time.Time{}, false, missing(names[1])
	case v == "":
		return time.Time{}, false, missing(names[2])
	}
	var sigs sigSet
	for item := range strings.FieldsSeq(v) {
		version, sig, ok := strings.Cut(item, ",")
		if !ok {
			return time.Time{}, false, fmt.Errorf("signature without version: %w", ErrMalformedSignature)
		}
		// Other versions (v1a is ed25519) are skipped, as in svix.
		if version == "v1" {
			if err := sigs.add(base64Encoding, sig); err != nil {
				return time.Time{}, false, err
			}
		}
	}
	ts, signed, err := signedAt(t, now, tolerance)
	if err != nil {
		return ts, signed, err
	}
	if sigs.n == 0 {
		return ts, true, fmt.Errorf("no v1 signature: %w", ErrMismatch)
	}
	var buf [96]byte
	pre := append(append(append(append(buf[:0], id...), '.'), t...), '.')
	return ts, true, matchAny(keys, pre, body, nil, &sigs)
}

func (standardScheme) Sign(h http.Header, body []byte, key []byte, id, _ string, now time.Time) {
	t := strconv.FormatInt(now.Unix(), 10)
	var mac [32]byte
	sum(&mac, key, []byte(id+"."+t+"."), body, nil)
	h.Set(standardNames[0], id)
	h.Set(standardNames[1], t)
	h.Set(standardNames[2], "v1,"+encode(base64Encoding, mac[:]))
}

func (standardScheme) Identify(h http.Header, body []byte) (id, eventType string) {
	_, id, _, _ = standardHeaders(h)
	return id, bodyString(body, "type")
}
