package scheme

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// GitHub signs the body alone, so there is no timestamp and a captured delivery stays valid forever;
// dedupe by X-GitHub-Delivery is the only replay protection.
type githubScheme struct{}

// X-GitHub-Delivery and X-GitHub-Event in canonical form, so lookups do not allocate.
const (
	githubSigHeader   = "X-Hub-Signature-256"
	githubIDHeader    = "X-Github-Delivery"
	githubEventHeader = "X-Github-Event"
)

func (githubScheme) Name() string { return "github" }
func (githubScheme) Headers() []string {
	return []string{githubSigHeader, githubIDHeader, githubEventHeader}
}
func (githubScheme) Key(secret string) ([]byte, error) { return literalKey("github", secret) }

// Verify requires the SHA-256 header; the legacy SHA-1 X-Hub-Signature is not accepted even though
// go-github falls back to it.
func (githubScheme) Verify(h http.Header, body []byte, keys [][]byte, _ time.Time, _ time.Duration) (time.Time, bool, error) {
	v := h.Get(githubSigHeader)
	if v == "" {
		return time.Time{}, false, missing(githubSigHeader)
	}
	hexSig, ok := strings.CutPrefix(v, "sha256=")
	if !ok {
		return time.Time{}, false, fmt.Errorf("no sha256= prefix: %w", ErrMalformedSignature)
	}
	var sigs sigSet
	if err := sigs.add(hexEncoding, hexSig); err != nil {
		return time.Time{}, false, err
	}
	return time.Time{}, false, matchAny(keys, nil, body, nil, &sigs)
}

func (githubScheme) Sign(h http.Header, body []byte, key []byte, id, eventType string, _ time.Time) {
	var mac [32]byte
	sum(&mac, key, nil, body, nil)
	h.Set(githubSigHeader, "sha256="+encode(hexEncoding, mac[:]))
	setIf(h, githubIDHeader, id)
	setIf(h, githubEventHeader, eventType)
}

func (githubScheme) Identify(h http.Header, _ []byte) (id, eventType string) {
	return h.Get(githubIDHeader), h.Get(githubEventHeader)
}

// setIf leaves a header out rather than sending it empty.
func setIf(h http.Header, name, value string) {
	if name != "" && value != "" {
		h.Set(name, value)
	}
}
