package scheme

import (
	"errors"
	"fmt"
	"net/http"
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

func newHMAC(o HMACOptions) (Scheme, error) {
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

// parse reads the configured headers, the one place that knows the hmac scheme's format.
func (s *hmacScheme) parse(h http.Header, v *verifying) (p parsed, err error) {
	sig := h.Get(s.opts.Header)
	if sig == "" {
		return p, missing(s.opts.Header)
	}
	sig, ok := strings.CutPrefix(sig, s.opts.Prefix)
	if !ok {
		return p, fmt.Errorf("no %q prefix: %w", s.opts.Prefix, ErrMalformedSignature)
	}
	if err := p.sig(s.enc, sig, v); err != nil {
		return p, err
	}
	if s.opts.TimestampHeader != "" {
		t := h.Get(s.opts.TimestampHeader)
		if t == "" {
			return p, missing(s.opts.TimestampHeader)
		}
		if err := p.timestamp(t, v); err != nil {
			return p, err
		}
	}
	if s.signsID {
		if p.id = h.Get(s.opts.IDHeader); p.id == "" {
			return p, missing(s.opts.IDHeader)
		}
	}
	return p, nil
}

// signed expands the template around {body} into dst: one buffer for both sides, since each slice
// handed to the hash costs an allocation. newHMAC has checked the template, so expand cannot fail.
func (s *hmacScheme) signed(dst []byte, t, id string) (pre, post []byte) {
	b, _ := expand(dst, s.pre, t, id)
	n := len(b)
	b, _ = expand(b, s.post, t, id)
	return b[:n:n], b[n:]
}

func (s *hmacScheme) Verify(h http.Header, body []byte, keys [][]byte, now time.Time, tolerance time.Duration) (time.Time, bool, error) {
	v := verifying{now: now, tolerance: tolerance}
	p, err := s.parse(h, &v)
	var buf [96]byte
	pre, post := s.signed(buf[:0], p.t, p.id)
	return v.result(&p, err, keys, pre, body, post)
}

func (s *hmacScheme) Sign(h http.Header, body []byte, key []byte, id, eventType string, now time.Time) {
	var t string
	if s.opts.TimestampHeader != "" {
		t = unixString(now)
		h.Set(s.opts.TimestampHeader, t)
	}
	pre, post := s.signed(nil, t, id)
	h.Set(s.opts.Header, s.opts.Prefix+signature(s.enc, key, pre, body, post))
	setIf(h, s.opts.IDHeader, id)
	setIf(h, s.opts.TypeHeader, eventType)
}

func (s *hmacScheme) recipe(h http.Header) (Signed, error) {
	p, err := s.parse(h, nil)
	if err != nil {
		return Signed{}, err
	}
	pre, post := s.signed(nil, p.t, p.id)
	return Signed{Header: s.opts.Header, Encoding: s.opts.Encoding, Describe: s.opts.Template,
		Prefix: pre, Suffix: post, Signatures: p.sigs}, nil
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
