package scheme

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Stripe signs "<t>.<body>" with the whole whsec_ secret as the key and lists one v1 signature per
// active secret while the account rotates: "t=<unix>,v1=<hex>[,v1=<hex>…]".
type stripeScheme struct{}

const stripeHeader = "Stripe-Signature"

func (stripeScheme) Name() string      { return "stripe" }
func (stripeScheme) Headers() []string { return []string{stripeHeader} }

// Key keeps the whsec_ prefix: Stripe's HMAC key is the secret string as shown in the dashboard.
func (stripeScheme) Key(secret string) ([]byte, error) { return literalKey("stripe", secret) }

func (stripeScheme) Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	v := h.Get(stripeHeader)
	if v == "" {
		return time.Time{}, false, missing(stripeHeader)
	}
	var t string
	var sigs sigSet
	for item := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(item, "=")
		if !ok {
			return time.Time{}, false, fmt.Errorf("element without '=': %w", ErrMalformedSignature)
		}
		switch k {
		case "t":
			if t != "" {
				return time.Time{}, false, fmt.Errorf("more than one t=: %w", ErrMalformedSignature)
			}
			t = val
		case "v1":
			if err := sigs.add(hexEncoding, val); err != nil {
				return time.Time{}, false, err
			}
		}
		// v0 and unknown schemes are ignored, as stripe-go does: accepting them would allow a downgrade.
	}
	if t == "" {
		return time.Time{}, false, fmt.Errorf("no t= timestamp: %w", ErrMalformedSignature)
	}
	ts, signed, err := signedAt(t, now, tolerance)
	if err != nil {
		return ts, signed, err
	}
	if sigs.n == 0 {
		return ts, true, fmt.Errorf("no v1 signature: %w", ErrMismatch)
	}
	var buf [24]byte
	pre := append(append(buf[:0], t...), '.')
	return ts, true, matchAny(keys, pre, body, nil, &sigs)
}

func (stripeScheme) Sign(h http.Header, body []byte, key []byte, _, _ string, now time.Time) {
	t := strconv.FormatInt(now.Unix(), 10)
	var mac [32]byte
	sum(&mac, key, []byte(t+"."), body, nil)
	h.Set(stripeHeader, "t="+t+",v1="+encode(hexEncoding, mac[:]))
}

func (stripeScheme) Identify(_ http.Header, body []byte) (id, eventType string) {
	return bodyString(body, "id"), bodyString(body, "type")
}
