package redact

import (
	"encoding/base64"
	"encoding/json"
	"html"
	"net/url"
	"strings"
	"testing"
)

const (
	key    = "sk_test_51HookledgerSecretKeyThatMustNeverLeak"
	whsec  = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD/x=="
	custom = "plain-api-key-of-a-proxy/with+slash"
)

// Every form an echo realistically takes is scrubbed: as sent, in a JSON
// string (Go's encoder, a plain one, PHP's \/), HTML escaped, percent
// encoded (either case), and basic auth from a URL.
func TestEveryFormIsRedacted(t *testing.T) {
	s := New(key, whsec, custom).WithURL("https://hook:p4ss+w%2Frd@example.com/in")
	goJSON, _ := json.Marshal(map[string]string{"authorization": "Bearer " + custom, "secret": whsec})
	cases := map[string]string{
		"header dump":     "Authorization: Bearer " + key + "\r\nX-Other: 1",
		"go json":         string(goJSON),
		"php json":        `{"secret":"` + strings.ReplaceAll(whsec, "/", `\/`) + `"}`,
		"html page":       "<pre>Authorization: Bearer " + html.EscapeString(custom) + "</pre>",
		"query":           "GET /echo?key=" + url.QueryEscape(whsec),
		"query lower hex": "GET /echo?key=" + strings.ToLower(url.QueryEscape(whsec)),
		"basic auth":      "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("hook:p4ss+w/rd")),
		"url password":    "bad password p4ss+w/rd for hook",
	}
	for name, text := range cases {
		got := s.String(text)
		for _, secret := range []string{key, whsec, custom, "p4ss+w/rd", "aG9vazpwNHNzK3cvcmQ", "plain-api-key"} {
			if strings.Contains(got, secret) || strings.Contains(got, strings.ReplaceAll(secret, "/", `\/`)) {
				t.Errorf("%s: %q shows %q", name, got, secret)
			}
		}
		if !strings.Contains(got, Mark) {
			t.Errorf("%s: %q has no %s", name, got, Mark)
		}
	}
	token := New().WithURL("https://tok-3f9a1c2b7d@example.com/in") // a token as the user name, no password
	for _, text := range []string{"tok-3f9a1c2b7d", base64.StdEncoding.EncodeToString([]byte("tok-3f9a1c2b7d:"))} {
		if got := token.String("got " + text); got != "got "+Mark {
			t.Errorf("token URL: %q", got)
		}
	}
	if got := New().WithURL("https://api:pw-9d8c7b6a@example.com/").String("user api, password pw-9d8c7b6a"); got != "user api, password "+Mark {
		t.Errorf("a user name beside a password is not a secret: %q", got)
	}
	if got := s.String("HTTP 400: bad request"); got != "HTTP 400: bad request" {
		t.Errorf("a text without secrets changed: %q", got)
	}
}

// A text cut at a limit may end inside a secret: Cut scrubs before it cuts,
// and an end that is the start of a secret is redacted too (a row an older
// version cut without scrubbing).
func TestCutSecrets(t *testing.T) {
	s := New(key)
	body := strings.Repeat("x", 1000) + `"Bearer ` + key + `"`
	read := body[:min(len(body), 1024+s.Slack())] // what a reader with Slack reads
	got := string(s.Cut([]byte(read), 1024))
	if len(got) > 1024 || strings.Contains(got, key[8:20]) {
		t.Errorf("cut: %q", got[990:])
	}
	old := body[:1024] // as an older version stored it: cut inside the key
	if got := s.String(old); strings.Contains(got, key[:16]) || !strings.HasSuffix(got, Mark) {
		t.Errorf("an old cut row: %q", got[990:])
	}
}

// The nil set, and any set, removes what has the shape of a credential: a
// key rotated since, or one a command could not resolve.
func TestShapes(t *testing.T) {
	var none *Secrets
	for _, text := range []string{
		"Authorization: Bearer sk_live_aaaaBBBBccccDDDD1234",
		`{"authorization":"Bearer rk_test_Zx81aaaaBBBBccccDDDD"}`,
		"secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw did not verify",
		`"whsec_MfKQ9r8GKYqrTw\/PD8ILPZIo2LaLaSw"`,
		"authorization: bearer 0123456789abcdef0123456789",
		"Authorization: Basic dXNlcjpwYXNzd29yZDEyMzQ1Ng==",
	} {
		got := none.String(text)
		if !strings.Contains(got, Mark) || strings.Contains(got, "aaaaBBBB") || strings.Contains(got, "MfKQ9r8") ||
			strings.Contains(got, "0123456789abcdef") || strings.Contains(got, "dXNlcjpw") {
			t.Errorf("%q shown as %q", text, got)
		}
	}
	for _, text := range []string{
		"You did not provide an API key: use Bearer authentication",
		"Invalid API Key provided: sk_test_****1234",
		`WWW-Authenticate: Basic realm="app"`,
	} {
		if got := none.String(text); got != text {
			t.Errorf("%q changed to %q", text, got)
		}
	}
}

// Join and With make new sets; the old ones do not change (a destination's
// set is shared by its concurrent attempts).
func TestSetsAreImmutable(t *testing.T) {
	a := New("alpha-secret-value")
	b := a.With("beta-secret-value")
	if got := a.String("beta-secret-value"); got != "beta-secret-value" {
		t.Errorf("With changed its receiver: %q", got)
	}
	j := Join(a, nil, New("gamma-secret-value"))
	got := j.String("alpha-secret-value gamma-secret-value")
	if got != Mark+" "+Mark {
		t.Errorf("joined: %q", got)
	}
	if b.Slack() < len("alpha-secret-value") || New().Slack() != 0 || (*Secrets)(nil).Slack() != 0 {
		t.Error("Slack")
	}
	if got := New("").String("x"); got != "x" {
		t.Errorf("an empty secret redacted %q", got)
	}
}
