package scheme

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	gh "github.com/google/go-github/v93/github"
	"github.com/slack-go/slack"
	"github.com/stripe/stripe-go/v82/webhook"
	svix "github.com/svix/svix-webhooks/go"
)

// The library-side checks below read the real clock (stripe-go, svix and slack-go offer no clock
// injection), so these tests sign at time.Now(); everything else in the package injects its clock.

var interopBody = []byte(`{"id":"evt_1","type":"invoice.paid","event_id":"Ev1","event":{"type":"message"},` +
	"\r\n\t" + `"name":"caf\u00e9 \/ é 😀","big":18446744073709551615}`)

func TestStripeInterop(t *testing.T) {
	const secret = "whsec_interopSecretForStripe0123"
	s := mustNew(t, "stripe")
	keys := mustKeys(t, s, secret)
	now := time.Now()

	t.Run("stripe-go signs, we verify", func(t *testing.T) {
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: interopBody, Secret: secret, Timestamp: now})
		h := http.Header{stripeHeader: {signed.Header}}
		ts, hasTS, err := s.Verify(h, interopBody, keys, now, 300*time.Second)
		if err != nil || !hasTS || ts.Unix() != now.Unix() {
			t.Fatalf("Verify = %v, %v, %v", ts, hasTS, err)
		}
	})
	t.Run("stripe-go v0 signature is ignored", func(t *testing.T) {
		signed := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: interopBody, Secret: secret, Timestamp: now, Scheme: "v0"})
		_, _, err := s.Verify(http.Header{stripeHeader: {signed.Header}}, interopBody, keys, now, 300*time.Second)
		if !errors.Is(err, ErrMismatch) {
			t.Fatalf("Verify = %v, want ErrMismatch", err)
		}
	})
	t.Run("we sign, stripe-go verifies", func(t *testing.T) {
		h := http.Header{}
		s.Sign(h, interopBody, keys[0], "ignored", "ignored", now)
		if err := webhook.ValidatePayloadWithTolerance(interopBody, h.Get(stripeHeader), secret, 300*time.Second); err != nil {
			t.Fatal(err)
		}
		ev, err := webhook.ConstructEventWithOptions(interopBody, h.Get(stripeHeader), secret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
		if err != nil {
			t.Fatal(err)
		}
		if id, typ := s.Identify(h, interopBody); id != ev.ID || typ != string(ev.Type) {
			t.Fatalf("Identify = %q, %q; stripe-go says %q, %q", id, typ, ev.ID, ev.Type)
		}
	})
	t.Run("duplicate keys: we read the id and type stripe-go reads", func(t *testing.T) {
		body := []byte(`{"id":"evt_first","type":"a.first","object":"event","type":"invoice.paid","id":"evt_last"}`)
		h := http.Header{}
		s.Sign(h, body, keys[0], "", "", now)
		ev, err := webhook.ConstructEventWithOptions(body, h.Get(stripeHeader), secret, webhook.ConstructEventOptions{IgnoreAPIVersionMismatch: true})
		if err != nil {
			t.Fatal(err)
		}
		if id, typ := s.Identify(h, body); id != ev.ID || typ != string(ev.Type) || id != "evt_last" {
			t.Fatalf("Identify = %q, %q; stripe-go says %q, %q", id, typ, ev.ID, ev.Type)
		}
	})
}

func TestStandardInterop(t *testing.T) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	s := mustNew(t, "standard")
	wh, err := svix.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()

	t.Run("svix signs, we verify", func(t *testing.T) {
		sig, err := wh.Sign("msg_interop", now, interopBody)
		if err != nil {
			t.Fatal(err)
		}
		other, _ := svix.NewWebhook("whsec_" + base64.StdEncoding.EncodeToString([]byte("an older, rotated secret")))
		oldSig, _ := other.Sign("msg_interop", now, interopBody)
		for _, prefix := range []string{"webhook-", "svix-"} {
			h := http.Header{}
			h.Set(prefix+"id", "msg_interop")
			h.Set(prefix+"timestamp", formatUnix(now))
			h.Set(prefix+"signature", oldSig+" "+sig)
			// With or without the prefix, the secret is the same key.
			for _, sec := range []string{secret, strings.TrimPrefix(secret, "whsec_")} {
				if _, _, err := s.Verify(h, interopBody, mustKeys(t, s, sec), now, 300*time.Second); err != nil {
					t.Fatalf("%s headers, secret %q: %v", prefix, sec, err)
				}
			}
			if id, typ := s.Identify(h, interopBody); id != "msg_interop" || typ != "invoice.paid" {
				t.Fatalf("Identify = %q, %q", id, typ)
			}
		}
	})
	t.Run("we sign, svix verifies", func(t *testing.T) {
		h := http.Header{}
		s.Sign(h, interopBody, mustKeys(t, s, secret)[0], "msg_ours", "ignored", now)
		if err := wh.Verify(interopBody, h); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("signed id wins over an unsigned one", func(t *testing.T) {
		// svix-* is what was signed; a stray webhook-id must not become the dedupe key.
		sig, _ := wh.Sign("msg_signed", now, interopBody)
		h := http.Header{}
		h.Set("svix-id", "msg_signed")
		h.Set("svix-timestamp", formatUnix(now))
		h.Set("svix-signature", sig)
		h.Set("webhook-id", "msg_forged")
		if _, _, err := s.Verify(h, interopBody, mustKeys(t, s, secret), now, 300*time.Second); err != nil {
			t.Fatal(err)
		}
		if id, _ := s.Identify(h, interopBody); id != "msg_signed" {
			t.Fatalf("Identify = %q, want msg_signed", id)
		}
	})
}

func TestGitHubInterop(t *testing.T) {
	const secret = "it's a secret to everybody"
	s := mustNew(t, "github")
	h := http.Header{}
	s.Sign(h, interopBody, mustKeys(t, s, secret)[0], "72d3162e-cc78-11e3-81ab-4c9367dc0958", "push", time.Time{})

	if err := gh.ValidateSignature(h.Get(githubSigHeader), interopBody, []byte(secret)); err != nil {
		t.Fatalf("ValidateSignature: %v", err)
	}
	payload, err := gh.ValidatePayloadFromBody("application/json", bytes.NewReader(interopBody), h.Get(githubSigHeader), []byte(secret))
	if err != nil || !bytes.Equal(payload, interopBody) {
		t.Fatalf("ValidatePayloadFromBody: %v", err)
	}
	r, _ := http.NewRequest(http.MethodPost, "/webhooks/github", bytes.NewReader(interopBody))
	r.Header = h.Clone()
	r.Header.Set("Content-Type", "application/json")
	if _, err := gh.ValidatePayload(r, []byte(secret)); err != nil {
		t.Fatalf("ValidatePayload: %v", err)
	}
	if id, typ := s.Identify(h, interopBody); id != gh.DeliveryID(r) || typ != gh.WebHookType(r) {
		t.Fatalf("Identify = %q, %q; go-github says %q, %q", id, typ, gh.DeliveryID(r), gh.WebHookType(r))
	}
}

func TestSlackInterop(t *testing.T) {
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	s := mustNew(t, "slack")
	h := http.Header{}
	s.Sign(h, interopBody, mustKeys(t, s, secret)[0], "", "", time.Now())
	sv, err := slack.NewSecretsVerifier(h, secret)
	if err != nil {
		t.Fatal(err)
	}
	sv.Write(interopBody)
	if err := sv.Ensure(); err != nil {
		t.Fatal(err)
	}
}

func TestShopifyInterop(t *testing.T) {
	const secret = "shpss_0123456789abcdef"
	s := mustNew(t, "shopify")
	keys := mustKeys(t, s, secret)
	h := http.Header{}
	s.Sign(h, interopBody, keys[0], "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043", "orders/create", time.Time{})

	// There is no Shopify Go library; this is the computation from Shopify's documentation.
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(interopBody)
	if want := base64.StdEncoding.EncodeToString(m.Sum(nil)); h.Get(shopifySigHeader) != want {
		t.Fatalf("signature %q, want %q", h.Get(shopifySigHeader), want)
	}
	if _, _, err := s.Verify(h, interopBody, keys, time.Time{}, 0); err != nil {
		t.Fatal(err)
	}
	if id, typ := s.Identify(h, interopBody); id != "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043" || typ != "orders/create" {
		t.Fatalf("Identify = %q, %q", id, typ)
	}
}

func TestHMACRoundTrip(t *testing.T) {
	now := time.Unix(1782000000, 0)
	tests := []struct {
		name string
		opts HMACOptions
		hdr  string // header expected to carry the signature
		pfx  string // and its value's prefix
	}{
		{"hex", HMACOptions{Header: "X-Signature", IDPath: "id"}, "X-Signature", ""},
		{"base64 with prefix", HMACOptions{Header: "X-Sig", Encoding: "base64", Prefix: "sha256=", IDHeader: "X-Id"}, "X-Sig", "sha256="},
		{"timestamp", HMACOptions{Header: "X-Sig", TimestampHeader: "X-Ts", IDPath: "id", TypeHeader: "X-Type"}, "X-Sig", ""},
		{"template with id", HMACOptions{Header: "X-Sig", Encoding: "base64", TimestampHeader: "X-Ts", IDHeader: "X-Id",
			Template: "v1:{id}:{timestamp}:{body}:end"}, "X-Sig", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New("hmac", tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			keys := mustKeys(t, s, "generic secret")
			h := http.Header{}
			s.Sign(h, interopBody, keys[0], "id-42", "invoice.paid", now)
			if !strings.HasPrefix(h.Get(tc.hdr), tc.pfx) {
				t.Fatalf("%s = %q, want prefix %q", tc.hdr, h.Get(tc.hdr), tc.pfx)
			}
			withTS := tc.opts.TimestampHeader != ""

			ts, hasTS, err := s.Verify(h, interopBody, keys, now, 300*time.Second)
			if err != nil || hasTS != withTS || (withTS && !ts.Equal(now)) {
				t.Fatalf("Verify = %v, %v, %v", ts, hasTS, err)
			}
			wantID := "evt_1"
			if tc.opts.IDHeader != "" {
				wantID = "id-42"
			}
			if id, typ := s.Identify(h, interopBody); id != wantID || typ != "invoice.paid" {
				t.Fatalf("Identify = %q, %q", id, typ)
			}

			tampered := bytes.Replace(interopBody, []byte("invoice"), []byte("Invoice"), 1)
			if _, _, err := s.Verify(h, tampered, keys, now, 300*time.Second); !errors.Is(err, ErrMismatch) {
				t.Fatalf("tampered body: %v, want ErrMismatch", err)
			}
			if !withTS {
				return
			}
			for _, skew := range []time.Duration{-301 * time.Second, 301 * time.Second} {
				if _, _, err := s.Verify(h, interopBody, keys, now.Add(skew), 300*time.Second); !errors.Is(err, ErrTimestamp) {
					t.Fatalf("now%+v: %v, want ErrTimestamp", skew, err)
				}
			}
			// Moving the timestamp to pass the tolerance check breaks the signature.
			h.Set(tc.opts.TimestampHeader, formatUnix(now.Add(time.Second)))
			if _, _, err := s.Verify(h, interopBody, keys, now, 300*time.Second); !errors.Is(err, ErrMismatch) {
				t.Fatalf("refreshed timestamp: %v, want ErrMismatch", err)
			}
			h.Del(tc.opts.TimestampHeader)
			if _, _, err := s.Verify(h, interopBody, keys, now, 300*time.Second); !errors.Is(err, ErrMissingSignature) {
				t.Fatalf("no timestamp header: %v, want ErrMissingSignature", err)
			}
		})
	}
}

func formatUnix(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
