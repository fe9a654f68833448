package scheme

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"testing"
	"time"
)

// vector is one entry of testdata/signatures.json (see /work/shared/vectors/README.md).
type vector struct {
	Name             string            `json:"name"`
	Scheme           string            `json:"scheme"`
	Secret           string            `json:"secret"`
	Secrets          []string          `json:"secrets"`
	NowUnix          int64             `json:"now_unix"`
	ToleranceSeconds int64             `json:"tolerance_seconds"`
	Headers          map[string]string `json:"headers"`
	BodyB64          string            `json:"body_b64"`
	Valid            bool              `json:"valid"`
	Reason           string            `json:"reason"`
	EventID          string            `json:"event_id"`
}

func (v vector) header() http.Header {
	h := http.Header{}
	for k, val := range v.Headers {
		h.Set(k, val)
	}
	return h
}

func (v vector) body(tb testing.TB) []byte {
	b, err := base64.StdEncoding.DecodeString(v.BodyB64)
	if err != nil {
		tb.Fatalf("%s: body_b64: %v", v.Name, err)
	}
	return b
}

// vectorsPath is the repo's own copy, so CI (which clones only the repo) runs every vector.
// sharedVectorsPath is the team's source of truth; when it is present the copy must match it.
const (
	vectorsPath       = "testdata/signatures.json"
	sharedVectorsPath = "../../shared/vectors/signatures.json"
)

func loadVectors(tb testing.TB) []vector {
	tb.Helper()
	data, err := os.ReadFile(vectorsPath)
	if err != nil {
		tb.Fatalf("signature vectors are required: %v (copy %s to scheme/%s)", err, sharedVectorsPath, vectorsPath)
	}
	if shared, err := os.ReadFile(sharedVectorsPath); err == nil && !bytes.Equal(shared, data) {
		tb.Fatalf("%s differs from %s: refresh the copy", vectorsPath, sharedVectorsPath)
	}
	var vs []vector
	if err := json.Unmarshal(data, &vs); err != nil {
		tb.Fatalf("parse %s: %v", vectorsPath, err)
	}
	if len(vs) < 48 {
		tb.Fatalf("%s holds %d vectors, want at least 48", vectorsPath, len(vs))
	}
	return vs
}

func mustNew(tb testing.TB, name string) Scheme {
	tb.Helper()
	s, err := New(name, HMACOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func mustKeys(tb testing.TB, s Scheme, secrets ...string) [][]byte {
	tb.Helper()
	var keys [][]byte
	for _, secret := range secrets {
		k, err := s.Key(secret)
		if err != nil {
			tb.Fatalf("%s key: %v", s.Name(), err)
		}
		keys = append(keys, k)
	}
	return keys
}

var sentinels = []error{ErrMissingSignature, ErrMalformedSignature, ErrTimestamp, ErrMismatch}

// checkSentinel asserts the contract that every Verify error wraps exactly one sentinel.
func checkSentinel(tb testing.TB, err error) {
	tb.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	if n != 1 {
		tb.Fatalf("error %q wraps %d sentinels, want exactly 1", err, n)
	}
}

// wantErr lists the acceptable sentinels for reasons whose class is obvious.
var wantErr = map[string][]error{
	"missing_header":   {ErrMissingSignature},
	"sha1_only":        {ErrMissingSignature},
	"malformed_header": {ErrMalformedSignature, ErrMissingSignature},
	"stale_timestamp":  {ErrTimestamp},
	"future_timestamp": {ErrTimestamp},
	"tampered_body":    {ErrMismatch},
	"wrong_secret":     {ErrMismatch},
	"v0_only":          {ErrMismatch},
}

func TestVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			s := mustNew(t, v.Scheme)
			secrets := v.Secrets
			if len(secrets) == 0 {
				secrets = []string{v.Secret}
			}
			keys := mustKeys(t, s, secrets...)
			h, body := v.header(), v.body(t)
			now := time.Unix(v.NowUnix, 0)
			tolerance := time.Duration(v.ToleranceSeconds) * time.Second

			_, _, err := s.Verify(h, body, keys, now, tolerance)
			if (err == nil) != v.Valid {
				t.Fatalf("Verify = %v, want valid=%v (%s)", err, v.Valid, v.Reason)
			}
			if !v.Valid {
				checkSentinel(t, err)
				if want, ok := wantErr[v.Reason]; ok && !isAny(err, want) {
					t.Fatalf("Verify = %v, want one of %v for %s", err, want, v.Reason)
				}
				return
			}
			if id, _ := s.Identify(h, body); id != v.EventID {
				t.Fatalf("Identify id = %q, want %q", id, v.EventID)
			}

			// A stored receipt keeps only Headers(); they must suffice to re-verify and re-identify.
			stored := http.Header{}
			for _, name := range s.Headers() {
				if val := h.Values(name); len(val) > 0 {
					stored[http.CanonicalHeaderKey(name)] = val
				}
			}
			if _, _, err := s.Verify(stored, body, keys, now.Add(365*24*time.Hour), -1); err != nil {
				t.Fatalf("re-verify from stored headers: %v", err)
			}
			if id, _ := s.Identify(stored, body); id != v.EventID {
				t.Fatalf("Identify from stored headers = %q, want %q", id, v.EventID)
			}
		})
	}
}

// TestVectorsIgnoringTolerance re-verifies the clock-decided vectors with the check disabled, as a
// later re-verification of a stored body does: they are correctly signed, so they must pass.
func TestVectorsIgnoringTolerance(t *testing.T) {
	for _, v := range loadVectors(t) {
		if v.Reason != "stale_timestamp" && v.Reason != "future_timestamp" {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			s := mustNew(t, v.Scheme)
			ts, hasTS, err := s.Verify(v.header(), v.body(t), mustKeys(t, s, v.Secret), time.Unix(v.NowUnix, 0), -1)
			if err != nil || !hasTS {
				t.Fatalf("Verify(tolerance -1) = %v, %v", hasTS, err)
			}
			if d := time.Unix(v.NowUnix, 0).Sub(ts).Abs(); d <= 300*time.Second {
				t.Fatalf("timestamp only %s off; vector should be outside tolerance", d)
			}
		})
	}
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// parserOf is the header parser of a scheme of this package.
func parserOf(tb testing.TB, s Scheme) func(http.Header, *verifying) (parsed, error) {
	tb.Helper()
	switch s := s.(type) {
	case stripeScheme:
		return parseStripe
	case githubScheme:
		return parseGitHub
	case shopifyScheme:
		return parseShopify
	case slackScheme:
		return parseSlack
	case standardScheme:
		return func(h http.Header, v *verifying) (parsed, error) {
			_, p, err := parseStandard(h, v)
			return p, err
		}
	case *hmacScheme:
		return s.parse
	}
	tb.Fatalf("no parser for %T", s)
	return nil
}

// TestSignVectors holds Sign to the providers' own signatures: re-signing each valid vector's body
// with its secret, timestamp and id gives a signature the provider sent. Forwarding signs Standard
// Webhooks with this Sign.
func TestSignVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		if !v.Valid {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			s := mustNew(t, v.Scheme)
			parse := parserOf(t, s)
			want, err := parse(v.header(), nil)
			if err != nil {
				t.Fatalf("parse the vector's header: %v", err)
			}
			secrets := v.Secrets
			if len(secrets) == 0 {
				secrets = []string{v.Secret}
			}
			for _, key := range mustKeys(t, s, secrets...) {
				h := http.Header{}
				s.Sign(h, v.body(t), key, want.id, "", want.ts)
				got, err := parse(h, nil)
				if err != nil || len(got.sigs) != 1 || got.t != want.t || got.id != want.id {
					t.Fatalf("parse the signed header %v: %+v, %v", h, got, err)
				}
				for _, sig := range want.sigs {
					if sig == got.sigs[0] {
						return
					}
				}
			}
			t.Fatalf("no secret signs as the provider did (%v)", v.Headers)
		})
	}
}
