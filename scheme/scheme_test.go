package scheme

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// testSecrets are valid secrets for each scheme, for tests that do not come from vectors.
var testSecrets = map[string][3]string{
	"stripe":   {"whsec_first_secret", "whsec_second_secret", "whsec_third_secret"},
	"github":   {"first github secret", "second github secret", "third github secret"},
	"shopify":  {"first shopify secret", "second shopify secret", "third shopify secret"},
	"slack":    {"first slack secret", "second slack secret", "third slack secret"},
	"standard": {"whsec_Zmlyc3Qgc3RhbmRhcmQgc2VjcmV0", "whsec_c2Vjb25kIHN0YW5kYXJkIHNlY3JldA==", "dGhpcmQgc3RhbmRhcmQgc2VjcmV0LCBubyBwcmVmaXg="},
	"hmac":     {"first hmac secret", "second hmac secret", "third hmac secret"},
}

var testHMAC = HMACOptions{Header: "X-Signature", Prefix: "sha256=", TimestampHeader: "X-Timestamp", IDHeader: "X-Event-Id"}

func newTestScheme(tb testing.TB, name string) Scheme {
	tb.Helper()
	var opts HMACOptions
	if name == "hmac" {
		opts = testHMAC
	}
	s, err := New(name, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func hasTimestamp(name string) bool { return name != "github" && name != "shopify" }

func TestNew(t *testing.T) {
	for _, name := range Names() {
		if s := newTestScheme(t, name); s.Name() != name {
			t.Errorf("New(%q).Name() = %q", name, s.Name())
		}
	}
	tests := []struct {
		name    string
		scheme  string
		opts    HMACOptions
		wantErr string
	}{
		{"unknown scheme", "paypal", HMACOptions{}, `unknown signature scheme "paypal"`},
		{"options on stripe", "stripe", HMACOptions{Header: "X-Sig"}, "does not take hmac options"},
		{"no header", "hmac", HMACOptions{IDPath: "id"}, "hmac.header is required"},
		{"bad encoding", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", Encoding: "HEX"}, `hmac.encoding must be "hex" or "base64"`},
		{"no id", "hmac", HMACOptions{Header: "X-Sig"}, "hmac.id_header and hmac.id_path"},
		{"two ids", "hmac", HMACOptions{Header: "X-Sig", IDHeader: "X-Id", IDPath: "id"}, "hmac.id_header and hmac.id_path"},
		{"wildcard id_path", "hmac", HMACOptions{Header: "X-Sig", IDPath: "events.*"}, "hmac.id_path: path \"events.*\""},
		{"query type_path", "hmac", HMACOptions{Header: "X-Sig", IDHeader: "X-Id", TypePath: "a|b"}, "hmac.type_path: path \"a|b\""},
		{"two types", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", TypeHeader: "X-T", TypePath: "type"}, "hmac.type_header and hmac.type_path"},
		{"template without body", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", Template: "{id}"}, "{body} exactly once"},
		{"template with body twice", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", Template: "{body}{body}"}, "{body} exactly once"},
		{"unsigned timestamp", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", TimestampHeader: "X-Ts", Template: "{body}"}, "must contain {timestamp}"},
		{"timestamp without header", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", Template: "{timestamp}.{body}"}, "hmac.timestamp_header is not set"},
		{"id without header", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", Template: "{id}.{body}"}, "hmac.id_header is not set"},
		{"unknown placeholder", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", Template: "{nonce}.{body}"}, "unknown placeholder {nonce}"},
		{"unclosed brace", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", Template: "{body}.{"}, "unclosed {"},
		{"placeholder split by body", "hmac", HMACOptions{Header: "X-Sig", IDPath: "id", Template: "{id{body}}"}, "unclosed {"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.scheme, tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestKey(t *testing.T) {
	tests := []struct {
		scheme, secret string
		want           string // "" means an error is expected
	}{
		{"stripe", "whsec_0123456789", "whsec_0123456789"},
		{"github", "sixteen byte key", "sixteen byte key"},
		{"standard", "whsec_c2l4dGVlbiBieXRlIGtleQ==", "sixteen byte key"},
		{"standard", "c2l4dGVlbiBieXRlIGtleQ==", "sixteen byte key"},
		{"standard", "whsec_not base64!", ""},
		{"standard", "whsec_", ""},
		{"standard", "", ""},
		{"stripe", "", ""},
		{"slack", "abc\n", ""},
		{"hmac", " abc", ""},
	}
	for _, tc := range tests {
		t.Run(tc.scheme+"/"+tc.secret, func(t *testing.T) {
			key, err := newTestScheme(t, tc.scheme).Key(tc.secret)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("Key = %q, want an error", key)
			case tc.want != "" && (err != nil || string(key) != tc.want):
				t.Fatalf("Key = %q, %v; want %q", key, err, tc.want)
			}
		})
	}
}

func TestRotation(t *testing.T) {
	now := time.Unix(1782000000, 0)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s := newTestScheme(t, name)
			sec := testSecrets[name]
			keys := mustKeys(t, s, sec[:]...)
			h := http.Header{}
			s.Sign(h, interopBody, keys[1], "evt_1", "invoice.paid", now)

			if _, _, err := s.Verify(h, interopBody, keys[:2], now, 300*time.Second); err != nil {
				t.Fatalf("second of two keys: %v", err)
			}
			for _, ks := range [][][]byte{keys[:1], keys[2:], nil} {
				if _, _, err := s.Verify(h, interopBody, ks, now, 300*time.Second); !errors.Is(err, ErrMismatch) {
					t.Fatalf("%d non-matching keys: %v, want ErrMismatch", len(ks), err)
				}
			}
		})
	}
}

func TestTolerance(t *testing.T) {
	signedAt := time.Unix(1782000000, 0)
	const tol = 300 * time.Second
	tests := []struct {
		name      string
		skew      time.Duration // now - signedAt
		tolerance time.Duration
		ok        bool
	}{
		{"exact", 0, tol, true},
		{"old edge", tol, tol, true},
		{"future edge", -tol, tol, true},
		{"too old", tol + time.Second, tol, false},
		{"too new", -tol - time.Second, tol, false},
		{"just past old edge", tol + time.Nanosecond, tol, false},
		{"zero tolerance", time.Second, 0, false},
		{"disabled, years old", 3 * 365 * 24 * time.Hour, -1, true},
		{"disabled, far future", -3 * 365 * 24 * time.Hour, -1, true},
	}
	for _, name := range Names() {
		if !hasTimestamp(name) {
			continue
		}
		s := newTestScheme(t, name)
		keys := mustKeys(t, s, testSecrets[name][0])
		h := http.Header{}
		s.Sign(h, interopBody, keys[0], "evt_1", "", signedAt)
		for _, tc := range tests {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				ts, hasTS, err := s.Verify(h, interopBody, keys, signedAt.Add(tc.skew), tc.tolerance)
				if !hasTS || !ts.Equal(signedAt) {
					t.Fatalf("ts = %v, %v; want %v", ts, hasTS, signedAt)
				}
				if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrTimestamp)) {
					t.Fatalf("Verify = %v, want ok=%v", err, tc.ok)
				}
			})
		}
	}
}

// TestHostileHeaders covers inputs the vectors do not: they must be a clean 4xx, never a panic.
func TestHostileHeaders(t *testing.T) {
	hex64 := strings.Repeat("ab", 32)
	b64 := "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="
	tests := []struct {
		scheme string
		header map[string]string
		want   error
	}{
		{"stripe", map[string]string{"Stripe-Signature": "t=1782000000"}, ErrMismatch},
		{"stripe", map[string]string{"Stripe-Signature": "t=1,t=2,v1=" + hex64}, ErrMalformedSignature},
		{"stripe", map[string]string{"Stripe-Signature": "t=+1782000000,v1=" + hex64}, ErrMalformedSignature},
		{"stripe", map[string]string{"Stripe-Signature": "t=99999999999999999999,v1=" + hex64}, ErrMalformedSignature},
		{"stripe", map[string]string{"Stripe-Signature": "t=1782000000,v1=" + hex64[:62]}, ErrMalformedSignature},
		{"stripe", map[string]string{"Stripe-Signature": "t=1782000000" + strings.Repeat(",v1="+hex64, maxSigs+1)}, ErrMalformedSignature},
		{"stripe", map[string]string{"Stripe-Signature": ","}, ErrMalformedSignature},
		{"github", map[string]string{"X-Hub-Signature-256": "sha1=" + hex64}, ErrMalformedSignature},
		{"github", map[string]string{"X-Hub-Signature-256": "sha256=" + hex64 + "00"}, ErrMalformedSignature},
		{"shopify", map[string]string{"X-Shopify-Hmac-Sha256": b64[:43] + "!"}, ErrMalformedSignature},
		{"slack", map[string]string{"X-Slack-Signature": "v0=" + hex64}, ErrMissingSignature},
		{"slack", map[string]string{"X-Slack-Signature": "v0=" + hex64, "X-Slack-Request-Timestamp": "-5"}, ErrMalformedSignature},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1782000000", "webhook-signature": "v1a,xyz"}, ErrMismatch},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "1782000000", "webhook-signature": "v1," + b64[:40]}, ErrMalformedSignature},
		{"standard", map[string]string{"webhook-id": "m", "webhook-timestamp": "soon", "webhook-signature": "v1," + b64}, ErrMalformedSignature},
		{"hmac", map[string]string{"X-Signature": hex64, "X-Timestamp": "1782000000"}, ErrMalformedSignature},
		{"hmac", map[string]string{"X-Signature": "sha256=" + hex64}, ErrMissingSignature},
	}
	for _, tc := range tests {
		t.Run(tc.scheme, func(t *testing.T) {
			s := newTestScheme(t, tc.scheme)
			h := http.Header{}
			for k, v := range tc.header {
				h.Set(k, v)
			}
			_, _, err := s.Verify(h, interopBody, mustKeys(t, s, testSecrets[tc.scheme][0]), time.Unix(1782000000, 0), 300*time.Second)
			checkSentinel(t, err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s := newTestScheme(t, name)
			got := s.Headers()
			got[0] = "mutated"
			if slices.Contains(s.Headers(), "mutated") {
				t.Fatal("Headers shares its slice with the caller")
			}
		})
	}
}

func TestIdentify(t *testing.T) {
	tests := []struct {
		scheme, body   string
		wantID, wantTy string
	}{
		{"slack", `{"type":"url_verification","challenge":"x"}`, "", "url_verification"},
		{"slack", `{"type":"event_callback","event_id":"Ev1","event":{"type":"app_mention"}}`, "Ev1", "app_mention"},
		{"stripe", `{"id":{"nested":true},"type":"x"}`, "", "x"},
		{"stripe", `{"id":18446744073709551615}`, "18446744073709551615", ""},
		{"standard", `{"type":"usage.recorded"}`, "", "usage.recorded"},
	}
	for _, tc := range tests {
		t.Run(tc.scheme+"/"+tc.wantID, func(t *testing.T) {
			id, typ := newTestScheme(t, tc.scheme).Identify(http.Header{}, []byte(tc.body))
			if id != tc.wantID || typ != tc.wantTy {
				t.Fatalf("Identify = %q, %q; want %q, %q", id, typ, tc.wantID, tc.wantTy)
			}
		})
	}
}

// signedDelivery is the scheme by name, its key for the first test secret, and the headers it
// signs body with at now.
func signedDelivery(tb testing.TB, name string, body []byte, now time.Time) (Scheme, [][]byte, http.Header) {
	tb.Helper()
	s := newTestScheme(tb, name)
	keys := mustKeys(tb, s, testSecrets[name][0])
	h := http.Header{}
	s.Sign(h, body, keys[0], "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "usage.recorded", now)
	return s, keys, h
}

func BenchmarkVerify(b *testing.B) {
	body := bytes.Repeat([]byte(`{"id":"evt_1","type":"usage.recorded","qty":12}`), 9)[:400]
	now := time.Unix(1782000000, 0)
	for _, name := range Names() {
		b.Run(name, func(b *testing.B) {
			s, keys, h := signedDelivery(b, name, body, now)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := s.Verify(h, body, keys, now, 300*time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestNonCanonicalBase64 flips a padding bit of a genuine base64 signature: it decodes to the same
// MAC, but the reference implementations compare the text and reject it, and so do we.
func TestNonCanonicalBase64(t *testing.T) {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for _, tc := range []struct{ scheme, header string }{
		{"shopify", shopifySigHeader},
		{"standard", standardNames[2]},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			s := newTestScheme(t, tc.scheme)
			keys := mustKeys(t, s, testSecrets[tc.scheme][0])
			now := time.Unix(1782000000, 0)
			h := http.Header{}
			s.Sign(h, interopBody, keys[0], "msg_1", "", now)
			sig := []byte(h.Get(tc.header))
			last := len(sig) - 2 // the character before the single '='
			sig[last] = alphabet[strings.IndexByte(alphabet, sig[last])^1]
			h.Set(tc.header, string(sig))
			if _, _, err := s.Verify(h, interopBody, keys, now, 300*time.Second); !errors.Is(err, ErrMalformedSignature) {
				t.Fatalf("Verify(%s) = %v, want ErrMalformedSignature", sig, err)
			}
		})
	}
}

// TestVerifyAllocs holds every header parser, decoding included, to no allocations: Verify with
// one key allocates exactly what its MAC step alone does (crypto/hmac's state, and the digest and
// the signed prefix, which escape through hash.Hash), nothing more.
func TestVerifyAllocs(t *testing.T) {
	macAllocs := func(keys [][]byte, prefixed bool) float64 {
		var sigs sigSet
		sigs.n = 1
		var prefix []byte
		if prefixed {
			prefix = []byte("1782000000.")
		}
		sum(&sigs.v[0], keys[0], prefix, interopBody, nil)
		mac := func() {
			if err := matchAny(keys, nil, interopBody, nil, &sigs); err != nil {
				t.Fatal(err)
			}
		}
		if prefixed {
			mac = func() {
				var buf [24]byte
				if err := matchAny(keys, append(buf[:0], prefix...), interopBody, nil, &sigs); err != nil {
					t.Fatal(err)
				}
			}
		}
		return testing.AllocsPerRun(100, mac)
	}
	now := time.Unix(1782000000, 0)
	for _, name := range Names() {
		t.Run(name, func(t *testing.T) {
			s, keys, h := signedDelivery(t, name, interopBody, now)
			allocs := testing.AllocsPerRun(100, func() {
				if _, _, err := s.Verify(h, interopBody, keys, now, 300*time.Second); err != nil {
					t.Fatal(err)
				}
			})
			if want := macAllocs(keys, hasTimestamp(name)); allocs != want {
				t.Fatalf("Verify allocates %v times, its MAC step %v times: the header parse allocates", allocs, want)
			}
		})
	}
}

func TestHandshake(t *testing.T) {
	s := newTestScheme(t, "slack").(Handshaker)
	tests := []struct {
		body, reply string
		ok          bool
	}{
		{`{"token":"x","challenge":"3eZbrw1aBm2r","type":"url_verification"}`, `{"challenge":"3eZbrw1aBm2r"}`, true},
		{`{"type":"event_callback","challenge":"first","type":"url_verification","challenge":"<last>"}`, `{"challenge":"\u003clast\u003e"}`, true},
		{`{"type":"url_verification"}`, "", false},
		{`{"type":"event_callback","challenge":"x"}`, "", false},
	}
	for _, tc := range tests {
		reply, ok := s.Handshake(http.Header{}, []byte(tc.body))
		if ok != tc.ok || string(reply) != tc.reply {
			t.Errorf("Handshake(%s) = %s, %v; want %s, %v", tc.body, reply, ok, tc.reply, tc.ok)
		}
	}
}

// TestQuirks pins which schemes declare which provider quirk; callers find them by type assertion.
func TestQuirks(t *testing.T) {
	for _, name := range Names() {
		s := newTestScheme(t, name)
		_, handshakes := s.(Handshaker)
		var idField, source string
		var horizon time.Duration
		if b, ok := s.(BodyIdentified); ok {
			idField = b.IDField()
		}
		if r, ok := s.(Reconcilable); ok {
			source = r.ReconcileSource()
		}
		if r, ok := s.(Redeliverer); ok {
			horizon = r.ReplayHorizon()
		}
		want := map[string]struct {
			handshakes bool
			idField    string
			source     string
			horizon    time.Duration
		}{
			"stripe": {false, "id", "stripe", 30 * 24 * time.Hour},
			"github": {false, "", "github", 3 * 24 * time.Hour},
			"slack":  {true, "event_id", "", 0},
		}[name]
		if handshakes != want.handshakes || idField != want.idField || source != want.source || horizon != want.horizon {
			t.Errorf("%s: handshake %v, id field %q, reconcile source %q, replay horizon %v; want %+v",
				name, handshakes, idField, source, horizon, want)
		}
	}
}
