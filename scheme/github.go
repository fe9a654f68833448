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

// parseGitHub reads X-Hub-Signature-256, the one place that knows its format. The legacy SHA-1
// X-Hub-Signature is not accepted even though go-github falls back to it.
func parseGitHub(h http.Header, v *verifying) (p parsed, err error) {
	sig := h.Get(githubSigHeader)
	if sig == "" {
		return p, missing(githubSigHeader)
	}
	sig, ok := strings.CutPrefix(sig, "sha256=")
	if !ok {
		return p, fmt.Errorf("no sha256= prefix: %w", ErrMalformedSignature)
	}
	err = p.sig(hexEncoding, sig, v)
	return p, err
}

func (githubScheme) Verify(h http.Header, body []byte, keys [][]byte, _ time.Time, _ time.Duration) (time.Time, bool, error) {
	var v verifying
	p, err := parseGitHub(h, &v)
	return v.result(&p, err, keys, nil, body, nil)
}

func (githubScheme) Sign(h http.Header, body []byte, key []byte, id, eventType string, _ time.Time) {
	h.Set(githubSigHeader, "sha256="+signature(hexEncoding, key, nil, body, nil))
	setIf(h, githubIDHeader, id)
	setIf(h, githubEventHeader, eventType)
}

func (githubScheme) recipe(h http.Header) (Signed, error) {
	p, err := parseGitHub(h, nil)
	if err != nil {
		return Signed{}, err
	}
	return Signed{Header: githubSigHeader, Encoding: "hex", Describe: "<body>", Signatures: p.sigs}, nil
}

func (githubScheme) Identify(h http.Header, _ []byte) (id, eventType string) {
	return h.Get(githubIDHeader), h.Get(githubEventHeader)
}

// GitHub keeps webhook deliveries, and redelivers them on request, for 3 days; reconcile lists
// them through the hook deliveries API.
func (githubScheme) ReconcileSource() string      { return "github" }
func (githubScheme) ReplayHorizon() time.Duration { return 3 * 24 * time.Hour }

// setIf leaves a header out rather than sending it empty.
func setIf(h http.Header, name, value string) {
	if name != "" && value != "" {
		h.Set(name, value)
	}
}
