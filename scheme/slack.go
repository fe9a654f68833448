package scheme

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hookledger/hookledger/payload"
)

// Slack signs "v0:<timestamp>:<body>" and sends the timestamp in its own header.
type slackScheme struct{}

const (
	slackSigHeader = "X-Slack-Signature"
	slackTSHeader  = "X-Slack-Request-Timestamp"
)

func (slackScheme) Name() string                      { return "slack" }
func (slackScheme) Headers() []string                 { return []string{slackSigHeader, slackTSHeader} }
func (slackScheme) Key(secret string) ([]byte, error) { return literalKey("slack", secret) }

// parseSlack reads the signature and timestamp headers, the one place that knows their format.
func parseSlack(h http.Header, v *verifying) (p parsed, err error) {
	sig, t := h.Get(slackSigHeader), h.Get(slackTSHeader)
	if sig == "" {
		return p, missing(slackSigHeader)
	}
	if t == "" {
		return p, missing(slackTSHeader)
	}
	sig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return p, fmt.Errorf("no v0= prefix: %w", ErrMalformedSignature)
	}
	if err := p.sig(hexEncoding, sig, v); err != nil {
		return p, err
	}
	err = p.timestamp(t, v)
	return p, err
}

// slackSigned is what comes before the body in the signed bytes.
func slackSigned(dst []byte, t string) []byte {
	return append(append(append(dst, "v0:"...), t...), ':')
}

func (slackScheme) Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	v := verifying{now: now, tolerance: tolerance}
	p, err := parseSlack(h, &v)
	var buf [32]byte
	return v.result(&p, err, keys, slackSigned(buf[:0], p.t), body, nil)
}

func (slackScheme) Sign(h http.Header, body []byte, key []byte, _, _ string, now time.Time) {
	t := unixString(now)
	h.Set(slackTSHeader, t)
	h.Set(slackSigHeader, "v0="+signature(hexEncoding, key, slackSigned(nil, t), body, nil))
}

func (slackScheme) recipe(h http.Header) (Signed, error) {
	p, err := parseSlack(h, nil)
	if err != nil {
		return Signed{}, err
	}
	return Signed{Header: slackSigHeader, Encoding: "hex", Describe: "v0:<" + slackTSHeader + ">:<body>",
		Prefix: slackSigned(nil, p.t), Signatures: p.sigs}, nil
}

const slackIDField = "event_id"

// IDField: Events API callbacks carry their id in the body, as event_id.
func (slackScheme) IDField() string { return slackIDField }

// Identify reads event_id from Events API callbacks. url_verification and other non-event bodies
// have none; Handshake answers the one that needs an answer.
func (slackScheme) Identify(_ http.Header, body []byte) (id, eventType string) {
	eventType = bodyString(body, "event.type")
	if eventType == "" {
		eventType = bodyString(body, "type")
	}
	return bodyString(body, slackIDField), eventType
}

// Handshake answers Slack's url_verification, sent (signed) when the request URL is configured:
// Slack expects its challenge back.
func (slackScheme) Handshake(_ http.Header, body []byte) ([]byte, bool) {
	if payload.Get(body, "type").String() != "url_verification" {
		return nil, false
	}
	c := payload.Get(body, "challenge")
	if !c.Exists() {
		return nil, false
	}
	reply, err := json.Marshal(map[string]string{"challenge": c.String()})
	return reply, err == nil
}
