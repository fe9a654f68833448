package scheme

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
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

func (slackScheme) Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	v, t := h.Get(slackSigHeader), h.Get(slackTSHeader)
	if v == "" {
		return time.Time{}, false, missing(slackSigHeader)
	}
	if t == "" {
		return time.Time{}, false, missing(slackTSHeader)
	}
	hexSig, ok := strings.CutPrefix(v, "v0=")
	if !ok {
		return time.Time{}, false, fmt.Errorf("no v0= prefix: %w", ErrMalformedSignature)
	}
	var sigs sigSet
	if err := sigs.add(hexEncoding, hexSig); err != nil {
		return time.Time{}, false, err
	}
	ts, signed, err := signedAt(t, now, tolerance)
	if err != nil {
		return ts, signed, err
	}
	var buf [32]byte
	pre := append(append(append(buf[:0], "v0:"...), t...), ':')
	return ts, true, matchAny(keys, pre, body, nil, &sigs)
}

func (slackScheme) Sign(h http.Header, body []byte, key []byte, _, _ string, now time.Time) {
	t := strconv.FormatInt(now.Unix(), 10)
	var mac [32]byte
	sum(&mac, key, []byte("v0:"+t+":"), body, nil)
	h.Set(slackTSHeader, t)
	h.Set(slackSigHeader, "v0="+encode(hexEncoding, mac[:]))
}

// Identify reads event_id from Events API callbacks. url_verification and other non-event bodies
// have none; the HTTP layer deals with those.
func (slackScheme) Identify(_ http.Header, body []byte) (id, eventType string) {
	eventType = bodyString(body, "event.type")
	if eventType == "" {
		eventType = bodyString(body, "type")
	}
	return bodyString(body, "event_id"), eventType
}
