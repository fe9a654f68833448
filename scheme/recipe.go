package scheme

import (
	"fmt"
	"net/http"
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

// recipeScheme is implemented by every scheme in this package, each with its own header parser
// (the one Verify uses); it is unexported so the knowledge of each header format stays here.
type recipeScheme interface {
	recipe(h http.Header) (Signed, error)
}

// Recipe reads the stored headers h of a delivery with the parser s.Verify uses and returns what was
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
