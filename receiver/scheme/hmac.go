package scheme

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/hookledger/hookledger/payload"
)

// hmacScheme covers providers without a dedicated scheme: HMAC-SHA256 over a configurable template,
// hex or base64, with optional prefix, timestamp and id headers.
type hmacScheme struct {
	opts      HMACOptions
	enc       encoding
	pre, post string // the template around {body}
	signsID   bool
}

func newHMAC(o HMACOptions) (*hmacScheme, error) {
	s := &hmacScheme{}
	if o.Header == "" {
		return nil, errors.New("hmac.header is required")
	}
	switch o.Encoding {
	case "", "hex":
		o.Encoding, s.enc = "hex", hexEncoding
	case "base64":
		s.enc = base64Encoding
	default:
		return nil, fmt.Errorf(`hmac.encoding must be "hex" or "base64", got %q`, o.Encoding)
	}
	if (o.IDHeader == "") == (o.IDPath == "") {
		return nil, errors.New("set exactly one of hmac.id_header and hmac.id_path")
	}
	if o.TypeHeader != "" && o.TypePath != "" {
		return nil, errors.New("set at most one of hmac.type_header and hmac.type_path")
	}
	if o.TypeHeader == "" && o.TypePath == "" {
		o.TypePath = "type"
	}
	for _, f := range []struct{ key, path string }{{"id_path", o.IDPath}, {"type_path", o.TypePath}} {
		if f.path != "" {
			if err := payload.CheckPath(f.path); err != nil {
				return nil, fmt.Errorf("hmac.%s: %w", f.key, err)
			}
		}
	}
	if o.Template == "" {
		o.Template = "{body}"
		if o.TimestampHeader != "" {
			o.Template = "{timestamp}.{body}"
		}
	}
	if n := strings.Count(o.Template, "{body}"); n != 1 {
		return nil, fmt.Errorf("hmac.template must contain {body} exactly once, has it %d times", n)
	}
	// A timestamp outside the signed string proves nothing: anyone could refresh it.
	if o.TimestampHeader != "" && !strings.Contains(o.Template, "{timestamp}") {
		return nil, errors.New("hmac.template must contain {timestamp} when hmac.timestamp_header is set")
	}
	if o.TimestampHeader == "" && strings.Contains(o.Template, "{timestamp}") {
		return nil, errors.New("hmac.template uses {timestamp} but hmac.timestamp_header is not set")
	}
	if o.IDHeader == "" && strings.Contains(o.Template, "{id}") {
		return nil, errors.New("hmac.template uses {id} but hmac.id_header is not set")
	}
	s.pre, s.post, _ = strings.Cut(o.Template, "{body}")
	s.signsID = strings.Contains(o.Template, "{id}")
	for _, side := range []string{s.pre, s.post} {
		if _, err := expand(nil, side, "", ""); err != nil {
			return nil, fmt.Errorf("hmac.template: %w", err)
		}
	}
	// Canonical names keep http.Header lookups on the hot path from allocating.
	for _, name := range []*string{&o.Header, &o.TimestampHeader, &o.IDHeader, &o.TypeHeader} {
		*name = http.CanonicalHeaderKey(*name)
	}
	s.opts = o
	return s, nil
}

// expand substitutes {timestamp} and {id} in one side of the template.
func expand(dst []byte, tmpl, ts, id string) ([]byte, error) {
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			return append(dst, tmpl...), nil
		}
		dst = append(dst, tmpl[:i]...)
		name, rest, ok := strings.Cut(tmpl[i+1:], "}")
		switch {
		case !ok:
			return nil, errors.New("unclosed {")
		case name == "timestamp":
			dst = append(dst, ts...)
		case name == "id":
			dst = append(dst, id...)
		default:
			return nil, fmt.Errorf("unknown placeholder {%s} (want {timestamp}, {body} or {id})", name)
		}
		tmpl = rest
	}
}

func (*hmacScheme) Name() string                      { return "hmac" }
func (*hmacScheme) Key(secret string) ([]byte, error) { return literalKey("hmac", secret) }

func (s *hmacScheme) Headers() []string {
	var names []string
	for _, n := range []string{s.opts.Header, s.opts.TimestampHeader, s.opts.IDHeader, s.opts.TypeHeader} {
		if n != "" {
			names = append(names, n)
		}
	}
	return names
}

func (s *hmacScheme) Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	v := h.Get(s.opts.Header)
	if v == "" {
		return time.Time{}, false, missing(s.opts.Header)
	}
	enc, ok := strings.CutPrefix(v, s.opts.Prefix)
	if !ok {
		return time.Time{}, false, fmt.Errorf("no %q prefix: %w", s.opts.Prefix, ErrMalformedSignature)
	}
	var sigs sigSet
	if err := sigs.add(s.enc, enc); err != nil {
		return time.Time{}, false, err
	}
	var ts time.Time
	var t, id string
	hasTS := s.opts.TimestampHeader != ""
	if hasTS {
		if t = h.Get(s.opts.TimestampHeader); t == "" {
			return time.Time{}, false, missing(s.opts.TimestampHeader)
		}
		var signed bool
		var err error
		if ts, signed, err = signedAt(t, now, tolerance); err != nil {
			return ts, signed, err
		}
	}
	if s.signsID {
		if id = h.Get(s.opts.IDHeader); id == "" {
			return ts, hasTS, missing(s.opts.IDHeader)
		}
	}
	// One buffer for both sides of {body}: each slice handed to the hash costs an allocation.
	var buf [96]byte
	b, _ := expand(buf[:0], s.pre, t, id)
	n := len(b)
	b, _ = expand(b, s.post, t, id)
	return ts, hasTS, matchAny(keys, b[:n:n], body, b[n:], &sigs)
}

func (s *hmacScheme) Sign(h http.Header, body []byte, key []byte, id, eventType string, now time.Time) {
	var t string
	if s.opts.TimestampHeader != "" {
		t = strconv.FormatInt(now.Unix(), 10)
		h.Set(s.opts.TimestampHeader, t)
	}
	pre, _ := expand(nil, s.pre, t, id)
	post, _ := expand(nil, s.post, t, id)
	var mac [32]byte
	sum(&mac, key, pre, body, post)
	h.Set(s.opts.Header, s.opts.Prefix+encode(s.enc, mac[:]))
	setIf(h, s.opts.IDHeader, id)
	setIf(h, s.opts.TypeHeader, eventType)
}

func (s *hmacScheme) Identify(h http.Header, body []byte) (id, eventType string) {
	if s.opts.IDHeader != "" {
		id = h.Get(s.opts.IDHeader)
	} else {
		id = bodyString(body, s.opts.IDPath)
	}
	if s.opts.TypeHeader != "" {
		eventType = h.Get(s.opts.TypeHeader)
	} else {
		eventType = bodyString(body, s.opts.TypePath)
	}
	return id, eventType
}
