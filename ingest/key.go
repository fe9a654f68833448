// Package ingest is the first-party ingest API's domain: API keys (their
// format, hash and the keyring serve authenticates with), and the accepted
// bodies (CloudEvents 1.0 structured and batch, and the generic usage event)
// turned into events with their receipt keys. The HTTP side is
// receiver/events.go; every event goes through custody like a webhook.
package ingest

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/hookledger/hookledger/ledger"
)

// KeyPrefix starts every API key, so a leaked one is recognisable (secret
// scanners match on it) and a webhook secret is never mistaken for one.
const KeyPrefix = "hl_"

// ScopePrefix starts the provider of every API event: the key named billing
// stores its events under provider "api:billing". A configured provider's
// name cannot contain ':' (config's provider names are [a-z0-9_-]), so an API
// scope never collides with a webhook provider, whatever keys are created
// later or providers configured later.
const ScopePrefix = ledger.APIScopePrefix

// keyBytes is the key's randomness: 256 bits, so the SHA-256 stored is as
// hard to invert as the key is to guess, and no slow hash is needed.
const keyBytes = 32

// KeyChars is how many characters follow KeyPrefix in a key: keyBytes in
// unpadded base64url.
const KeyChars = (keyBytes*8 + 5) / 6

// shownPrefix is how much of a key `keys list` shows (hl_ and 8 characters):
// enough to tell keys apart, far too little to guess the rest.
const shownPrefix = len(KeyPrefix) + 8

var keyName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// CheckName refuses a key name that cannot be a scope.
func CheckName(name string) error {
	if !keyName.MatchString(name) {
		return fmt.Errorf("key name %q must be 1-63 lowercase letters, digits, - or _, starting with a letter or digit", name)
	}
	return nil
}

// Scope is the provider an API key's events are stored under.
func Scope(name string) string { return ScopePrefix + name }

// IsScope reports whether provider is an API scope rather than a webhook provider.
func IsScope(provider string) bool { return strings.HasPrefix(provider, ScopePrefix) }

// NewKey returns a fresh key, its SHA-256 and the prefix that may be shown.
func NewKey() (key string, sum [32]byte, prefix string, err error) {
	var b [keyBytes]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", sum, "", err
	}
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	return key, sha256.Sum256([]byte(key)), key[:shownPrefix], nil
}

// Key errors a caller branches on (all are 401 at the API).
var (
	ErrNoKey      = errors.New("no API key: send Authorization: Bearer hl_…")
	ErrBadKey     = errors.New("not an API key")
	ErrUnknownKey = errors.New("unknown API key")
	ErrRevokedKey = errors.New("API key revoked")
)

// ParseBearer is the key in an Authorization header value.
func ParseBearer(header string) (string, error) {
	if header == "" {
		return "", ErrNoKey
	}
	scheme, key, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", ErrBadKey
	}
	key = strings.TrimSpace(key)
	// Only the exact shape NewKey makes is looked up: a flood of malformed
	// keys costs a string check each, not a database probe.
	if len(key) != keyLen || !strings.HasPrefix(key, KeyPrefix) || strings.IndexFunc(key[len(KeyPrefix):], notBase64URL) >= 0 {
		return "", ErrBadKey
	}
	return key, nil
}

// keyLen is the length of every key NewKey makes.
var keyLen = len(KeyPrefix) + base64.RawURLEncoding.EncodedLen(keyBytes)

func notBase64URL(r rune) bool {
	return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_')
}
