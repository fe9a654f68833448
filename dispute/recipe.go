package dispute

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/receiver"
)

// Recipe says how anyone holding the webhook secret recomputes a stored
// body's signature without hookledger: HMAC-SHA256 over Prefix + body +
// Suffix with the key derived from the secret, encoded, compared with
// Signatures. Commands do it with openssl in a POSIX shell, reading the
// secret from $SECRET.
//
// It restates, for people, what receiver/scheme verifies; the tests hold
// both to the same answer for every scheme.
type Recipe struct {
	Scheme     string   `json:"scheme"`
	Signed     string   `json:"signed"` // what the provider signs, e.g. "<t>.<body>"
	Prefix     string   `json:"prefix"` // the bytes signed before the body
	Suffix     string   `json:"suffix"` // the bytes signed after it
	Key        string   `json:"key"`    // KeySecret or KeyBase64
	Encoding   string   `json:"encoding"`
	Header     string   `json:"header"`     // the header holding the signatures
	Signatures []string `json:"signatures"` // what the provider sent; the recomputed one must be among them
	Commands   []string `json:"commands"`
}

// Key derivations.
const (
	KeySecret = "secret"              // the secret's bytes as configured
	KeyBase64 = "base64_after_whsec_" // the base64 decoding of the secret without its whsec_ prefix
)

// errNoRecipe means the stored headers lack what the scheme signs.
var errNoRecipe = errors.New("no recipe")

// recipe builds the recipe for a body stored at bodyPath (relative to the
// bundle's root), signed as headers say, under the provider's current scheme.
func recipe(p config.Provider, headers, bodyPath string) (*Recipe, error) {
	h := receiver.ParseSignatureHeaders(headers)
	need := func(name string) (string, error) {
		if v := h.Get(name); v != "" {
			return v, nil
		}
		return "", fmt.Errorf("%w: the stored signature headers have no %s", errNoRecipe, name)
	}
	r := &Recipe{Scheme: p.Scheme, Key: KeySecret, Encoding: "hex"}
	switch p.Scheme {
	case "stripe":
		r.Header, r.Signed = "Stripe-Signature", "<t>.<body>: t from the header, a dot, the body"
		v, err := need(r.Header)
		if err != nil {
			return nil, err
		}
		var t string
		for item := range strings.SplitSeq(v, ",") {
			k, val, _ := strings.Cut(item, "=")
			switch k {
			case "t":
				t = val
			case "v1":
				r.Signatures = append(r.Signatures, val)
			}
		}
		if t == "" {
			return nil, fmt.Errorf("%w: Stripe-Signature has no t=", errNoRecipe)
		}
		r.Prefix = t + "."
	case "github":
		r.Header, r.Signed = "X-Hub-Signature-256", "<body>"
		v, err := need(r.Header)
		if err != nil {
			return nil, err
		}
		r.Signatures = []string{strings.TrimPrefix(v, "sha256=")}
	case "shopify":
		r.Header, r.Signed, r.Encoding = "X-Shopify-Hmac-Sha256", "<body>", "base64"
		v, err := need(r.Header)
		if err != nil {
			return nil, err
		}
		r.Signatures = []string{v}
	case "slack":
		r.Header, r.Signed = "X-Slack-Signature", "v0:<X-Slack-Request-Timestamp>:<body>"
		v, err := need(r.Header)
		if err != nil {
			return nil, err
		}
		t, err := need("X-Slack-Request-Timestamp")
		if err != nil {
			return nil, err
		}
		r.Signatures, r.Prefix = []string{strings.TrimPrefix(v, "v0=")}, "v0:"+t+":"
	case "standard":
		// As the scheme does: the svix-* set wins when all three are present.
		names := [3]string{"Svix-Id", "Svix-Timestamp", "Svix-Signature"}
		if h.Get(names[0]) == "" || h.Get(names[1]) == "" || h.Get(names[2]) == "" {
			names = [3]string{"Webhook-Id", "Webhook-Timestamp", "Webhook-Signature"}
		}
		r.Header, r.Encoding, r.Key = names[2], "base64", KeyBase64
		r.Signed = fmt.Sprintf("<%s>.<%s>.<body>", names[0], names[1])
		var vals [3]string
		for i, n := range names {
			v, err := need(n)
			if err != nil {
				return nil, err
			}
			vals[i] = v
		}
		for item := range strings.FieldsSeq(vals[2]) {
			if version, sig, ok := strings.Cut(item, ","); ok && version == "v1" {
				r.Signatures = append(r.Signatures, sig)
			}
		}
		r.Prefix = vals[0] + "." + vals[1] + "."
	case "hmac":
		o := p.HMAC
		r.Header, r.Signed = http.CanonicalHeaderKey(o.Header), o.Template
		if r.Signed == "" {
			r.Signed = "{body}"
			if o.TimestampHeader != "" {
				r.Signed = "{timestamp}.{body}"
			}
		}
		if o.Encoding == "base64" {
			r.Encoding = "base64"
		}
		v, err := need(r.Header)
		if err != nil {
			return nil, err
		}
		r.Signatures = []string{strings.TrimPrefix(v, o.Prefix)}
		var ts, id string
		if strings.Contains(r.Signed, "{timestamp}") {
			if ts, err = need(o.TimestampHeader); err != nil {
				return nil, err
			}
		}
		if strings.Contains(r.Signed, "{id}") {
			if id, err = need(o.IDHeader); err != nil {
				return nil, err
			}
		}
		pre, post, _ := strings.Cut(r.Signed, "{body}")
		fill := strings.NewReplacer("{timestamp}", ts, "{id}", id)
		r.Prefix, r.Suffix = fill.Replace(pre), fill.Replace(post)
	default:
		return nil, fmt.Errorf("%w: unknown scheme %q", errNoRecipe, p.Scheme)
	}
	if len(r.Signatures) == 0 {
		return nil, fmt.Errorf("%w: %s carries no signature this scheme checks", errNoRecipe, r.Header)
	}
	r.Commands = r.commands(bodyPath)
	return r, nil
}

// commands are POSIX sh lines printing the recomputed signature.
func (r *Recipe) commands(bodyPath string) []string {
	var lines []string
	mac := `openssl dgst -sha256 -hmac "$SECRET"`
	if r.Key == KeyBase64 {
		lines = append(lines, `KEY_HEX=$(printf '%s' "${SECRET#whsec_}" | openssl base64 -d -A | od -An -v -tx1 | tr -d ' \n')`)
		mac = `openssl dgst -sha256 -mac HMAC -macopt "hexkey:$KEY_HEX"`
	}
	input := "cat " + shellQuote(bodyPath)
	if r.Prefix != "" || r.Suffix != "" {
		parts := []string{}
		if r.Prefix != "" {
			parts = append(parts, "printf '%s' "+shellQuote(r.Prefix))
		}
		parts = append(parts, input)
		if r.Suffix != "" {
			parts = append(parts, "printf '%s' "+shellQuote(r.Suffix))
		}
		input = "{ " + strings.Join(parts, "; ") + "; }"
	}
	if r.Encoding == "base64" {
		lines = append(lines, input+" | "+mac+" -binary | openssl base64 -A; echo")
	} else {
		// dgst prints "HMAC-SHA2-256(stdin)= <hex>"; sed keeps the hex.
		lines = append(lines, input+" | "+mac+" | sed 's/^.*= //'")
	}
	return lines
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
