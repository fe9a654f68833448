package scheme

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// Every fuzz target verifies arbitrary header values against this fixed delivery and key.
var (
	fuzzBody = []byte(`{"id":"evt_fuzz","type":"usage.recorded","event_id":"Ev_fuzz"}`)
	fuzzNow  = time.Unix(1782000000, 0)
	fuzzID   = "msg_fuzz"
)

// fuzzVerify fails if Verify panics, returns an error outside the sentinels, or accepts a header
// that does not carry the genuine MAC for its own timestamp and id. It runs once with the timestamp
// check disabled, so random timestamps still reach the MAC comparison, and once with it enabled.
func fuzzVerify(t *testing.T, s Scheme, key []byte, h http.Header, sigHeader, sigPrefix string, fold bool) {
	keys := [][]byte{key}
	if _, _, err := s.Verify(h, fuzzBody, keys, fuzzNow, 300*time.Second); err != nil {
		checkSentinel(t, err)
	}
	ts, _, err := s.Verify(h, fuzzBody, keys, fuzzNow, -1)
	if err != nil {
		checkSentinel(t, err)
		return
	}
	id, _ := s.Identify(h, fuzzBody)
	genuine := http.Header{}
	s.Sign(genuine, fuzzBody, key, id, "", ts)
	want := strings.TrimPrefix(genuine.Get(sigHeader), sigPrefix)
	got := h.Get(sigHeader)
	if fold {
		got = strings.ToLower(got)
	}
	if !strings.Contains(got, want) {
		t.Fatalf("accepted %s %q, but the genuine signature is %q", sigHeader, h.Get(sigHeader), want)
	}
}

// fuzzSetup returns the scheme, its key, the vectors of that scheme as seeds, and the genuine headers
// for the fixed delivery (seeded too, so the accepting path is exercised).
func fuzzSetup(f *testing.F, s Scheme, secret string) ([]byte, []http.Header, http.Header) {
	key, err := s.Key(secret)
	if err != nil {
		f.Fatal(err)
	}
	var seeds []http.Header
	for _, v := range loadVectors(f) {
		if v.Scheme == s.Name() {
			seeds = append(seeds, v.header())
		}
	}
	genuine := http.Header{}
	s.Sign(genuine, fuzzBody, key, fuzzID, "usage.recorded", fuzzNow)
	return key, seeds, genuine
}

func FuzzStripeHeader(f *testing.F) {
	s := mustNew(f, "stripe")
	key, seeds, genuine := fuzzSetup(f, s, "whsec_fuzz_secret")
	for _, h := range append(seeds, genuine) {
		f.Add(h.Get(stripeHeader))
	}
	f.Add("t=1782000000,v1=,v0=zz,=,t")
	f.Fuzz(func(t *testing.T, v string) {
		fuzzVerify(t, s, key, http.Header{stripeHeader: {v}}, stripeHeader, "", true)
	})
}

func FuzzGitHubHeader(f *testing.F) {
	s := mustNew(f, "github")
	key, seeds, genuine := fuzzSetup(f, s, "fuzzing secret")
	for _, h := range append(seeds, genuine) {
		f.Add(h.Get(githubSigHeader))
		f.Add(h.Get("X-Hub-Signature"))
	}
	f.Fuzz(func(t *testing.T, v string) {
		fuzzVerify(t, s, key, http.Header{githubSigHeader: {v}}, githubSigHeader, "sha256=", true)
	})
}

func FuzzShopifyHeader(f *testing.F) {
	s := mustNew(f, "shopify")
	key, seeds, genuine := fuzzSetup(f, s, "fuzzing secret")
	for _, h := range append(seeds, genuine) {
		f.Add(h.Get(shopifySigHeader))
	}
	f.Fuzz(func(t *testing.T, v string) {
		fuzzVerify(t, s, key, http.Header{shopifySigHeader: {v}}, shopifySigHeader, "", false)
	})
}

func FuzzSlackHeader(f *testing.F) {
	s := mustNew(f, "slack")
	key, seeds, genuine := fuzzSetup(f, s, "fuzzing secret")
	for _, h := range append(seeds, genuine) {
		f.Add(h.Get(slackSigHeader), h.Get(slackTSHeader))
	}
	f.Fuzz(func(t *testing.T, sig, ts string) {
		h := http.Header{slackSigHeader: {sig}, slackTSHeader: {ts}}
		fuzzVerify(t, s, key, h, slackSigHeader, "v0=", true)
	})
}

func FuzzStandardHeader(f *testing.F) {
	s := mustNew(f, "standard")
	key, seeds, genuine := fuzzSetup(f, s, "whsec_ZnV6emluZyBzZWNyZXQ=")
	for _, h := range append(seeds, genuine) {
		_, id, ts, sig := standardHeaders(h)
		f.Add(id, ts, sig)
	}
	f.Add(fuzzID, "1782000000", "v1a,x v1, v2,"+strings.Repeat("A", 44))
	f.Fuzz(func(t *testing.T, id, ts, sig string) {
		h := http.Header{standardNames[0]: {id}, standardNames[1]: {ts}, standardNames[2]: {sig}}
		fuzzVerify(t, s, key, h, standardNames[2], "v1,", false)
	})
}

func FuzzHMACHeader(f *testing.F) {
	hexScheme, err := New("hmac", HMACOptions{Header: "X-Signature", Prefix: "sha256=", TimestampHeader: "X-Timestamp", IDPath: "id"})
	if err != nil {
		f.Fatal(err)
	}
	b64Scheme, err := New("hmac", HMACOptions{Header: "X-Signature", Encoding: "base64", TimestampHeader: "X-Timestamp",
		IDHeader: "X-Id", Template: "{id}.{timestamp}.{body}"})
	if err != nil {
		f.Fatal(err)
	}
	key := []byte("fuzzing secret")
	for _, s := range []Scheme{hexScheme, b64Scheme} {
		h := http.Header{}
		s.Sign(h, fuzzBody, key, fuzzID, "", fuzzNow)
		f.Add(h.Get("X-Signature"), h.Get("X-Timestamp"), fuzzID, s == b64Scheme)
	}
	// The other providers' vectors are the shapes a generic HMAC header takes in the wild.
	for _, v := range loadVectors(f) {
		h := v.header()
		for _, name := range []string{githubSigHeader, shopifySigHeader, slackSigHeader} {
			if sig := h.Get(name); sig != "" {
				f.Add(sig, h.Get(slackTSHeader), h.Get(githubIDHeader), name == shopifySigHeader)
			}
		}
	}
	f.Fuzz(func(t *testing.T, sig, ts, id string, b64 bool) {
		h := http.Header{"X-Signature": {sig}, "X-Timestamp": {ts}, "X-Id": {id}}
		if b64 {
			fuzzVerify(t, b64Scheme, key, h, "X-Signature", "", false)
		} else {
			fuzzVerify(t, hexScheme, key, h, "X-Signature", "sha256=", true)
		}
	})
}
