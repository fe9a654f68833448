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

// parseShopify reads X-Shopify-Hmac-Sha256, the one place that knows its format: the bare base64.
func parseShopify(h http.Header, v *verifying) (p parsed, err error) {
	sig := h.Get(shopifySigHeader)
	if sig == "" {
		return p, missing(shopifySigHeader)
	}
	err = p.sig(base64Encoding, sig, v)
	return p, err
}

func (shopifyScheme) Verify(h http.Header, body []byte, keys [][]byte, _ time.Time, _ time.Duration) (time.Time, bool, error) {
	var v verifying
	p, err := parseShopify(h, &v)
	return v.result(&p, err, keys, nil, body, nil)
}

func (shopifyScheme) Sign(h http.Header, body []byte, key []byte, id, eventType string, _ time.Time) {
	h.Set(shopifySigHeader, signature(base64Encoding, key, nil, body, nil))
	setIf(h, shopifyIDHeader, id)
	setIf(h, shopifyTopicHeader, eventType)
}

func (shopifyScheme) recipe(h http.Header) (Signed, error) {
	p, err := parseShopify(h, nil)
	if err != nil {
		return Signed{}, err
	}
	return Signed{Header: shopifySigHeader, Encoding: "base64", Describe: "<body>", Signatures: p.sigs}, nil
}

func (shopifyScheme) Identify(h http.Header, _ []byte) (id, eventType string) {
	return h.Get(shopifyIDHeader), h.Get(shopifyTopicHeader)
}
