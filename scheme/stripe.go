package scheme

import (
	"fmt"
	"net/http"
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

// parseStripe reads Stripe-Signature, the one place that knows its format.
func parseStripe(h http.Header, v *verifying) (p parsed, err error) {
	val := h.Get(stripeHeader)
	if val == "" {
		return p, missing(stripeHeader)
	}
	var t string
	for item := range strings.SplitSeq(val, ",") {
		k, x, ok := strings.Cut(item, "=")
		if !ok {
			return p, fmt.Errorf("element without '=': %w", ErrMalformedSignature)
		}
		switch k {
		case "t":
			if t != "" {
				return p, fmt.Errorf("more than one t=: %w", ErrMalformedSignature)
			}
			t = x
		case "v1":
			if err := p.sig(hexEncoding, x, v); err != nil {
				return p, err
			}
		}
		// v0 and unknown schemes are ignored, as stripe-go does: accepting them would allow a downgrade.
	}
	if t == "" {
		return p, fmt.Errorf("no t= timestamp: %w", ErrMalformedSignature)
	}
	if err := p.timestamp(t, v); err != nil {
		return p, err
	}
	if v != nil && p.n == 0 {
		return p, fmt.Errorf("no v1 signature: %w", ErrMismatch)
	}
	return p, nil
}

// stripeSigned is what comes before the body in the signed bytes.
func stripeSigned(dst []byte, t string) []byte { return append(append(dst, t...), '.') }

func (stripeScheme) Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	v := verifying{now: now, tolerance: tolerance}
	p, err := parseStripe(h, &v)
	var buf [24]byte
	return v.result(&p, err, keys, stripeSigned(buf[:0], p.t), body, nil)
}

func (stripeScheme) Sign(h http.Header, body []byte, key []byte, _, _ string, now time.Time) {
	t := unixString(now)
	h.Set(stripeHeader, "t="+t+",v1="+signature(hexEncoding, key, stripeSigned(nil, t), body, nil))
}

func (stripeScheme) recipe(h http.Header) (Signed, error) {
	p, err := parseStripe(h, nil)
	if err != nil {
		return Signed{}, err
	}
	return Signed{Header: stripeHeader, Encoding: "hex", Describe: "<t>.<body>: t from the header, a dot, the body",
		Prefix: stripeSigned(nil, p.t), Signatures: p.sigs}, nil
}

const stripeIDField = "id"

func (stripeScheme) IDField() string { return stripeIDField }

func (stripeScheme) Identify(_ http.Header, body []byte) (id, eventType string) {
	return bodyString(body, stripeIDField), bodyString(body, "type")
}

// Stripe's events API lists events for 30 days, so reconcile can bring back any of them.
func (stripeScheme) ReconcileSource() string      { return "stripe" }
func (stripeScheme) ReplayHorizon() time.Duration { return 30 * 24 * time.Hour }
