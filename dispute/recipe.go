package dispute

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/scheme"
)

// Recipe says how anyone holding the webhook secret recomputes a stored
// body's signature without hookledger: HMAC-SHA256 over Prefix + body +
// Suffix with the key derived from the secret, encoded, compared with
// Signatures. Commands do it with openssl in a POSIX shell, reading the
// secret from $SECRET.
//
// The signed bytes, header and signatures come from scheme.Recipe, so the
// format of each provider's headers is known in one place; the tests hold
// the recipe and the verifier to the same answer for every scheme.
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
// What each scheme signs is scheme's to say; this only renders it.
func recipe(p config.Provider, headers, bodyPath string) (*Recipe, error) {
	s, err := scheme.New(p.Scheme, p.HMAC)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoRecipe, err)
	}
	sg, err := scheme.Recipe(s, receiver.ParseSignatureHeaders(headers))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNoRecipe, err)
	}
	r := &Recipe{
		Scheme:     p.Scheme,
		Signed:     sg.Describe,
		Prefix:     string(sg.Prefix),
		Suffix:     string(sg.Suffix),
		Key:        KeySecret,
		Encoding:   sg.Encoding,
		Header:     sg.Header,
		Signatures: sg.Signatures,
	}
	if sg.KeyBase64 {
		r.Key = KeyBase64
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
