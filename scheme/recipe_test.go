package scheme

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// recipeMAC recomputes a signature from a recipe alone, the way the openssl commands of a dispute
// bundle do: nothing here calls the scheme's Key, Sign or Verify.
func recipeMAC(tb testing.TB, sg Signed, secret string, body []byte) string {
	tb.Helper()
	key := []byte(secret)
	if sg.KeyBase64 {
		var err error
		if key, err = base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_")); err != nil {
			tb.Fatalf("secret %q: %v", secret, err)
		}
	}
	m := hmac.New(sha256.New, key)
	m.Write(sg.Prefix)
	m.Write(body)
	m.Write(sg.Suffix)
	switch sg.Encoding {
	case "hex":
		return hex.EncodeToString(m.Sum(nil))
	case "base64":
		return base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	tb.Fatalf("encoding %q", sg.Encoding)
	return ""
}

// recipeSchemes is every scheme plus the hmac scheme's shapes of template: prefix only, suffix
// with an id, base64 without a timestamp.
func recipeSchemes(t *testing.T) map[string]Scheme {
	t.Helper()
	out := map[string]Scheme{}
	for _, name := range Names() {
		out[name] = newTestScheme(t, name)
	}
	for label, o := range map[string]HMACOptions{
		"hmac/suffix": {Header: "x-sig", TimestampHeader: "x-ts", IDHeader: "x-id", Template: "{id}:{body}:{timestamp}"},
		"hmac/base64": {Header: "X-Sig", Encoding: "base64", Prefix: "b64 ", IDPath: "id"},
	} {
		s, err := New("hmac", o)
		if err != nil {
			t.Fatal(err)
		}
		out[label] = s
	}
	return out
}

func TestRecipeAgreesWithSignAndVerify(t *testing.T) {
	now := time.Unix(1792497598, 0)
	body := []byte(`{"id":"evt_1","type":"usage.recorded","note":"it's {body}"}`)
	for label, s := range recipeSchemes(t) {
		t.Run(label, func(t *testing.T) {
			secret := testSecrets[s.Name()][0]
			key, err := s.Key(secret)
			if err != nil {
				t.Fatal(err)
			}
			h := http.Header{}
			s.Sign(h, body, key, "evt_1", "usage.recorded", now)
			sg, err := Recipe(s, h)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.Verify(h, body, [][]byte{key}, now, -1); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			got := recipeMAC(t, sg, secret, body)
			if !slices.Contains(sg.Signatures, got) {
				t.Fatalf("recipe HMAC %s is not among %v (prefix %q, suffix %q)", got, sg.Signatures, sg.Prefix, sg.Suffix)
			}
			if !strings.Contains(h.Get(sg.Header), got) {
				t.Errorf("signature %s is not in %s: %q", got, sg.Header, h.Get(sg.Header))
			}
			if sg.Describe == "" || !strings.Contains(sg.Describe, "body") {
				t.Errorf("Describe = %q, want the signed string", sg.Describe)
			}
			// A tampered body fails both ways.
			tampered := append(slices.Clone(body), ' ')
			if _, _, err := s.Verify(h, tampered, [][]byte{key}, now, -1); !errors.Is(err, ErrMismatch) {
				t.Errorf("Verify(tampered) = %v", err)
			}
			if slices.Contains(sg.Signatures, recipeMAC(t, sg, secret, tampered)) {
				t.Errorf("recipe accepts a tampered body")
			}
			// So does the wrong secret.
			if slices.Contains(sg.Signatures, recipeMAC(t, sg, testSecrets[s.Name()][1], body)) {
				t.Errorf("recipe accepts the wrong secret")
			}
		})
	}
}

// TestRecipeVectors holds the recipe to Verify's answer, with the clock check off as for a stored
// body, on every shared vector: Verify passes exactly when a recipe MAC is among the signatures.
func TestRecipeVectors(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			s := mustNew(t, v.Scheme)
			secrets := v.Secrets
			if len(secrets) == 0 {
				secrets = []string{v.Secret}
			}
			body := v.body(t)
			_, _, verr := s.Verify(v.header(), body, mustKeys(t, s, secrets...), time.Unix(v.NowUnix, 0), -1)
			sg, rerr := Recipe(s, v.header())
			matched := false
			if rerr == nil {
				for _, secret := range secrets {
					matched = matched || slices.Contains(sg.Signatures, recipeMAC(t, sg, secret, body))
				}
			} else {
				checkSentinel(t, rerr)
			}
			if matched != (verr == nil) {
				t.Fatalf("recipe matched %v (err %v), Verify err %v", matched, rerr, verr)
			}
			if rerr != nil && (verr == nil || !errors.Is(verr, sentinelOf(rerr))) {
				t.Errorf("Recipe error %v, Verify error %v: want the same sentinel", rerr, verr)
			}
		})
	}
}

func sentinelOf(err error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return nil
}

func TestRecipeErrors(t *testing.T) {
	ss := recipeSchemes(t)
	tests := []struct {
		scheme  string
		headers map[string]string
		want    error
		text    string
	}{
		{"stripe", nil, ErrMissingSignature, "Stripe-Signature"},
		{"stripe", map[string]string{"Stripe-Signature": "t=1,v1"}, ErrMalformedSignature, "without '='"},
		{"stripe", map[string]string{"Stripe-Signature": "t=1,t=2,v1=ab"}, ErrMalformedSignature, "more than one t="},
		{"stripe", map[string]string{"Stripe-Signature": "v1=ab"}, ErrMalformedSignature, "no t="},
		{"stripe", map[string]string{"Stripe-Signature": "t=-1,v1=ab"}, ErrMalformedSignature, "not unix seconds"},
		{"stripe", map[string]string{"Stripe-Signature": "t=1,v0=ab"}, ErrMismatch, "carries no signature"},
		{"github", nil, ErrMissingSignature, "X-Hub-Signature-256"},
		{"github", map[string]string{"X-Hub-Signature-256": "sha1=ab"}, ErrMalformedSignature, "sha256="},
		{"shopify", nil, ErrMissingSignature, "X-Shopify-Hmac-Sha256"},
		{"slack", map[string]string{"X-Slack-Request-Timestamp": "1"}, ErrMissingSignature, "X-Slack-Signature"},
		{"slack", map[string]string{"X-Slack-Signature": "v0=ab"}, ErrMissingSignature, "X-Slack-Request-Timestamp"},
		{"slack", map[string]string{"X-Slack-Signature": "v1=ab", "X-Slack-Request-Timestamp": "1"}, ErrMalformedSignature, "v0="},
		{"slack", map[string]string{"X-Slack-Signature": "v0=ab", "X-Slack-Request-Timestamp": "x"}, ErrMalformedSignature, "not unix seconds"},
		{"standard", map[string]string{"Webhook-Timestamp": "1", "Webhook-Signature": "v1,ab"}, ErrMissingSignature, "Webhook-Id"},
		{"standard", map[string]string{"Webhook-Id": "a", "Webhook-Signature": "v1,ab"}, ErrMissingSignature, "Webhook-Timestamp"},
		{"standard", map[string]string{"Webhook-Id": "a", "Webhook-Timestamp": "1"}, ErrMissingSignature, "Webhook-Signature"},
		{"standard", map[string]string{"Webhook-Id": "a", "Webhook-Timestamp": "1", "Webhook-Signature": "ab"}, ErrMalformedSignature, "without version"},
		{"standard", map[string]string{"Webhook-Id": "a", "Webhook-Timestamp": "1.5", "Webhook-Signature": "v1,ab"}, ErrMalformedSignature, "not unix seconds"},
		{"standard", map[string]string{"Webhook-Id": "a", "Webhook-Timestamp": "1", "Webhook-Signature": "v1a,ab"}, ErrMismatch, "Webhook-Signature carries no signature"},
		{"hmac", map[string]string{"X-Timestamp": "1", "X-Event-Id": "e"}, ErrMissingSignature, "X-Signature"},
		{"hmac", map[string]string{"X-Signature": "ab", "X-Timestamp": "1", "X-Event-Id": "e"}, ErrMalformedSignature, `"sha256=" prefix`},
		{"hmac", map[string]string{"X-Signature": "sha256=ab", "X-Event-Id": "e"}, ErrMissingSignature, "X-Timestamp"},
		{"hmac", map[string]string{"X-Signature": "sha256=ab", "X-Timestamp": "now", "X-Event-Id": "e"}, ErrMalformedSignature, "not unix seconds"},
		{"hmac/suffix", map[string]string{"X-Sig": "ab", "X-Ts": "1"}, ErrMissingSignature, "X-Id"},
	}
	for _, tc := range tests {
		t.Run(tc.scheme+"/"+tc.text, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tc.headers {
				h.Set(k, v)
			}
			sg, err := Recipe(ss[tc.scheme], h)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Recipe = %+v, %v; want %v containing %q", sg, err, tc.want, tc.text)
			}
			checkSentinel(t, err)
		})
	}
}

// foreignScheme is a Scheme from outside this package, which cannot say what it signs.
type foreignScheme struct{ Scheme }

func TestRecipeForeignScheme(t *testing.T) {
	_, err := Recipe(foreignScheme{newTestScheme(t, "github")}, http.Header{"X-Hub-Signature-256": {"sha256=ab"}})
	if err == nil || !strings.Contains(err.Error(), `scheme "github"`) {
		t.Fatalf("Recipe(foreign) = %v", err)
	}
}

// TestRecipeBoundsSignatures: the recipe reads headers with Verify's parser, so a header with more
// candidate signatures than Verify takes has no recipe either.
func TestRecipeBoundsSignatures(t *testing.T) {
	h := http.Header{"Stripe-Signature": {"t=1782000000" + strings.Repeat(",v1=ab", maxSigs+1)}}
	if _, err := Recipe(newTestScheme(t, "stripe"), h); !errors.Is(err, ErrMalformedSignature) {
		t.Fatalf("Recipe(%d signatures) = %v, want ErrMalformedSignature", maxSigs+1, err)
	}
	h = http.Header{"Stripe-Signature": {"t=1782000000" + strings.Repeat(",v1=ab", maxSigs)}}
	if sg, err := Recipe(newTestScheme(t, "stripe"), h); err != nil || len(sg.Signatures) != maxSigs {
		t.Fatalf("Recipe(%d signatures) = %+v, %v", maxSigs, sg, err)
	}
}
