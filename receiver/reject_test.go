package receiver_test

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
)

// Every unauthenticated or unusable request is refused with a 4xx and writes
// nothing at all.
func TestRejectedRequestsWriteNothing(t *testing.T) {
	e := newEnv(t, func(c *config.Config) { c.Providers[0].MaxBody = 1024 })
	good := testenv.UsageBody("cus_1", "api_requests", "1")
	signed := func(mut func(h http.Header, body []byte) []byte) (http.Header, []byte) {
		body := append([]byte(nil), good...)
		h := e.SignDefault("msg_bad", body)
		return h, mut(h, body)
	}
	cases := []struct {
		name     string
		provider string
		build    func() (http.Header, []byte)
		code     int
	}{
		{"tampered byte", "default", func() (http.Header, []byte) {
			return signed(func(h http.Header, b []byte) []byte { b[len(b)-3] = '9'; return b })
		}, 401},
		{"wrong secret", "default", func() (http.Header, []byte) {
			return signed(func(h http.Header, b []byte) []byte {
				p := e.Server.Providers["default"]
				other, _ := p.Scheme.Key("whsec_" + base64.StdEncoding.EncodeToString([]byte("a different secret!!")))
				p.Scheme.Sign(h, b, other, "msg_bad", "", e.Now())
				return b
			})
		}, 401},
		{"stale timestamp", "default", func() (http.Header, []byte) {
			e.Clock.Add(-6 * time.Minute)
			defer e.Clock.Add(6 * time.Minute)
			return signed(func(h http.Header, b []byte) []byte { return b })
		}, 401},
		{"future timestamp", "default", func() (http.Header, []byte) {
			e.Clock.Add(6 * time.Minute)
			defer e.Clock.Add(-6 * time.Minute)
			return signed(func(h http.Header, b []byte) []byte { return b })
		}, 401},
		{"malformed signature header", "default", func() (http.Header, []byte) {
			return signed(func(h http.Header, b []byte) []byte { h.Set("Webhook-Signature", "v1"); return b })
		}, 400},
		{"malformed timestamp", "default", func() (http.Header, []byte) {
			return signed(func(h http.Header, b []byte) []byte { h.Set("Webhook-Timestamp", "soon"); return b })
		}, 400},
		{"missing signature header", "default", func() (http.Header, []byte) {
			return signed(func(h http.Header, b []byte) []byte { h.Del("Webhook-Signature"); return b })
		}, 400},
		{"no headers at all", "default", func() (http.Header, []byte) { return http.Header{}, good }, 400},
		{"oversize body", "default", func() (http.Header, []byte) {
			body := append([]byte(`{"pad":"`+strings.Repeat("x", 2048)), `"}`...)
			return e.SignDefault("msg_big", body), body
		}, 413},
		{"signed but not JSON", "default", func() (http.Header, []byte) {
			body := []byte("customer=cus_1&quantity=3")
			return e.SignDefault("msg_form", body), body
		}, 400},
		{"unknown provider", "nobody", func() (http.Header, []byte) { return e.SignDefault("msg_x", good), good }, 404},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, body := c.build()
			r := e.PostReply(c.provider, h, body)
			if r.Code != c.code || r.Body.Accepted || r.Body.Error == "" {
				t.Errorf("got %d %+v, want %d with an error message", r.Code, r.Body, c.code)
			}
			if got := e.Rows(); got != [3]int{0, 0, 0} {
				t.Errorf("receipts, attempts, usage = %v, want nothing written", got)
			}
		})
	}
}

func TestWrongMethodAndPathAreRefused(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/webhooks/default"},
		{http.MethodPost, "/webhooks/"},
		{http.MethodPost, "/webhooks/default/extra"},
	} {
		req, _ := http.NewRequest(c.method, e.HTTP.URL+c.path, bytes.NewReader(nil))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 4 {
			t.Errorf("%s %s: %d, want 4xx", c.method, c.path, resp.StatusCode)
		}
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("wrote %v", got)
	}
}

func TestSlackURLVerificationIsAnsweredNotStored(t *testing.T) {
	e := newEnv(t, func(c *config.Config) {
		c.Providers = append(c.Providers, config.Provider{Name: "slack", Scheme: "slack",
			Secrets: []config.Secret{{Value: "8f742231b10e8888abcd99yyyzzz85a5"}}, Tolerance: config.Duration{Duration: 5 * time.Minute}, MaxBody: 1 << 16})
	})
	body := []byte(`{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	ts := strconv.FormatInt(e.Now().Unix(), 10)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	e.Server.Providers["slack"].Scheme.Sign(h, body, e.Server.Providers["slack"].Keys[0], "", "", e.Now())
	req, _ := http.NewRequest(http.MethodPost, e.HTTP.URL+"/webhooks/slack", bytes.NewReader(body))
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(out.String(), "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P") {
		t.Errorf("got %d %s", resp.StatusCode, out.String())
	}
	if got := e.Rows(); got != [3]int{0, 0, 0} {
		t.Errorf("wrote %v", got)
	}
}
