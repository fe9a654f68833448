package scheme

import (
	"net/http"
	"time"
)

// Shopify signs the body alone, base64-encoded, with no timestamp. After a secret rotation it keeps
// signing with the old secret for a while, so both stay configured (keys) until that ends.
type shopifyScheme struct{}

const (
	shopifySigHeader   = "X-Shopify-Hmac-Sha256"
	shopifyIDHeader    = "X-Shopify-Webhook-Id"
	shopifyTopicHeader = "X-Shopify-Topic"
)

func (shopifyScheme) Name() string { return "shopify" }
func (shopifyScheme) Headers() []string {
	return []string{shopifySigHeader, shopifyIDHeader, shopifyTopicHeader}
}
func (shopifyScheme) Key(secret string) ([]byte, error) { return literalKey("shopify", secret) }

func (shopifyScheme) Verify(h http.Header, body []byte, keys [][]byte, _ time.Time, _ time.Duration) (time.Time, bool, error) {
	v := h.Get(shopifySigHeader)
	if v == "" {
		return time.Time{}, false, missing(shopifySigHeader)
	}
	var sigs sigSet
	if err := sigs.add(base64Encoding, v); err != nil {
		return time.Time{}, false, err
	}
	return time.Time{}, false, matchAny(keys, nil, body, nil, &sigs)
}

func (shopifyScheme) Sign(h http.Header, body []byte, key []byte, id, eventType string, _ time.Time) {
	var mac [32]byte
	sum(&mac, key, nil, body, nil)
	h.Set(shopifySigHeader, encode(base64Encoding, mac[:]))
	setIf(h, shopifyIDHeader, id)
	setIf(h, shopifyTopicHeader, eventType)
}

func (shopifyScheme) Identify(h http.Header, _ []byte) (id, eventType string) {
	return h.Get(shopifyIDHeader), h.Get(shopifyTopicHeader)
}
