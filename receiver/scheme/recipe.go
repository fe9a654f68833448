package scheme

import (
	"fmt"
	"net/http"
	"strings"
)

// Signed says, for people and for tools outside hookledger, what a delivery's signature covers:
// HMAC-SHA256 over Prefix + body + Suffix with the key derived from the secret, encoded as Encoding,
// must be among Signatures. dispute bundles turn it into openssl commands.
type Signed struct {
	Prefix, Suffix []byte   // the bytes signed before and after the body
	KeyBase64      bool     // key = base64-decode(secret without whsec_) instead of the secret's bytes
	Encoding       string   // "hex" or "base64"
	Header         string   // the header holding the signatures
	Signatures     []string // the encoded signatures the header carries, prefixes removed
	Describe       string   // the signed string, e.g. "<t>.<body>"
}

// recipeScheme is implemented by every scheme in this package; it is unexported so the knowledge
// of each header format stays here.
type recipeScheme interface {
	recipe(h http.Header) (Signed, error)
}

// Recipe reads the stored headers h of a delivery the way s.Verify does and returns what was
// signed. Errors wrap the same sentinels as Verify: ErrMissingSignature when a header is absent,
// ErrMalformedSignature when it cannot be parsed, ErrMismatch when it carries no signature the
// scheme checks. The signatures themselves are not decoded: whether one matches is for whoever
// recomputes the MAC to decide.
func Recipe(s Scheme, h http.Header) (Signed, error) {
	r, ok := s.(recipeScheme)
	if !ok {
		return Signed{}, fmt.Errorf("scheme %q (%T) has no recipe", s.Name(), s)
	}
	sg, err := r.recipe(h)
	if err == nil && len(sg.Signatures) == 0 {
		err = fmt.Errorf("%s carries no signature this scheme checks: %w", sg.Header, ErrMismatch)
	}
	if err != nil {
		return Signed{}, err
	}
	return sg, nil
}

func (stripeScheme) recipe(h http.Header) (Signed, error) {
	sg := Signed{Header: stripeHeader, Encoding: "hex", Describe: "<t>.<body>: t from the header, a dot, the body"}
	v := h.Get(stripeHeader)
	if v == "" {
		return sg, missing(stripeHeader)
	}
	var t string
	for item := range strings.SplitSeq(v, ",") {
		k, val, ok := strings.Cut(item, "=")
		if !ok {
			return sg, fmt.Errorf("element without '=': %w", ErrMalformedSignature)
		}
		switch k {
		case "t":
			if t != "" {
				return sg, fmt.Errorf("more than one t=: %w", ErrMalformedSignature)
			}
			t = val
		case "v1":
			sg.Signatures = append(sg.Signatures, val)
		}
	}
	if t == "" {
		return sg, fmt.Errorf("no t= timestamp: %w", ErrMalformedSignature)
	}
	if _, err := parseUnix(t); err != nil {
		return sg, err
	}
	sg.Prefix = []byte(t + ".")
	return sg, nil
}

func (githubScheme) recipe(h http.Header) (Signed, error) {
	sg := Signed{Header: githubSigHeader, Encoding: "hex", Describe: "<body>"}
	v := h.Get(githubSigHeader)
	if v == "" {
		return sg, missing(githubSigHeader)
	}
	sig, ok := strings.CutPrefix(v, "sha256=")
	if !ok {
		return sg, fmt.Errorf("no sha256= prefix: %w", ErrMalformedSignature)
	}
	sg.Signatures = []string{sig}
	return sg, nil
}

func (shopifyScheme) recipe(h http.Header) (Signed, error) {
	sg := Signed{Header: shopifySigHeader, Encoding: "base64", Describe: "<body>"}
	v := h.Get(shopifySigHeader)
	if v == "" {
		return sg, missing(shopifySigHeader)
	}
	sg.Signatures = []string{v}
	return sg, nil
}

func (slackScheme) recipe(h http.Header) (Signed, error) {
	sg := Signed{Header: slackSigHeader, Encoding: "hex", Describe: "v0:<" + slackTSHeader + ">:<body>"}
	v, t := h.Get(slackSigHeader), h.Get(slackTSHeader)
	if v == "" {
		return sg, missing(slackSigHeader)
	}
	if t == "" {
		return sg, missing(slackTSHeader)
	}
	sig, ok := strings.CutPrefix(v, "v0=")
	if !ok {
		return sg, fmt.Errorf("no v0= prefix: %w", ErrMalformedSignature)
	}
	if _, err := parseUnix(t); err != nil {
		return sg, err
	}
	sg.Signatures, sg.Prefix = []string{sig}, []byte("v0:"+t+":")
	return sg, nil
}

func (standardScheme) recipe(h http.Header) (Signed, error) {
	names, id, t, v := standardHeaders(h)
	sg := Signed{Header: names[2], Encoding: "base64", KeyBase64: true,
		Describe: fmt.Sprintf("<%s>.<%s>.<body>", names[0], names[1])}
	switch {
	case id == "":
		return sg, missing(names[0])
	case t == "":
		return sg, missing(names[1])
	case v == "":
		return sg, missing(names[2])
	}
	for item := range strings.FieldsSeq(v) {
		version, sig, ok := strings.Cut(item, ",")
		if !ok {
			return sg, fmt.Errorf("signature without version: %w", ErrMalformedSignature)
		}
		if version == "v1" {
			sg.Signatures = append(sg.Signatures, sig)
		}
	}
	if _, err := parseUnix(t); err != nil {
		return sg, err
	}
	sg.Prefix = []byte(id + "." + t + ".")
	return sg, nil
}

func (s *hmacScheme) recipe(h http.Header) (Signed, error) {
	sg := Signed{Header: s.opts.Header, Encoding: s.opts.Encoding, Describe: s.opts.Template}
	v := h.Get(s.opts.Header)
	if v == "" {
		return sg, missing(s.opts.Header)
	}
	sig, ok := strings.CutPrefix(v, s.opts.Prefix)
	if !ok {
		return sg, fmt.Errorf("no %q prefix: %w", s.opts.Prefix, ErrMalformedSignature)
	}
	var t, id string
	if s.opts.TimestampHeader != "" {
		if t = h.Get(s.opts.TimestampHeader); t == "" {
			return sg, missing(s.opts.TimestampHeader)
		}
		if _, err := parseUnix(t); err != nil {
			return sg, err
		}
	}
	if s.signsID {
		if id = h.Get(s.opts.IDHeader); id == "" {
			return sg, missing(s.opts.IDHeader)
		}
	}
	// newHMAC has checked the template, so expand cannot fail here.
	sg.Prefix, _ = expand(nil, s.pre, t, id)
	sg.Suffix, _ = expand(nil, s.post, t, id)
	sg.Signatures = []string{sig}
	return sg, nil
}
