package console_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

func newJar(t *testing.T) http.CookieJar {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return jar
}

// Every page and asset needs a session: pages redirect to the sign-in page
// (which returns there), assets and downloads answer 401. The admin API
// beside it still wants its bearer token, and a bearer token is not a
// session.
func TestNoSession(t *testing.T) {
	e := newEnv(t, false)
	pages := []string{"/ui/", "/ui/?hours=24", "/ui/events", "/ui/events?status=failed&before=9", "/ui/event?provider=default&id=x",
		"/ui/usage", "/ui/usage?customer=c1", "/ui/invoices", "/ui/invoices/1", "/ui/dispute?target=invoice:1/1", "/ui/nope"}
	for _, p := range pages {
		resp := e.do(t, "GET", p, nil)
		resp.Body.Close()
		want := "/ui/signin?" + url.Values{"next": {p}}.Encode()
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("GET %s without a session: %d to %q, want 303 to %q", p, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
	for _, p := range []string{"/ui/static/console.css", "/ui/dispute/bundle?target=invoice:1/1"} {
		if code, body, _ := e.get(t, p); code != http.StatusUnauthorized || strings.Contains(body, "{") {
			t.Errorf("GET %s without a session: %d %q, want 401", p, code, body)
		}
	}
	// The bearer token opens the admin API, not the console.
	req, _ := http.NewRequest("GET", e.Admin.URL+"/ui/events", nil)
	req.Header.Set("Authorization", "Bearer "+Token)
	resp, err := e.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("console with a bearer token: %d, want 303 to sign-in", resp.StatusCode)
	}
	if code, _, _ := e.get(t, "/metrics"); code != http.StatusUnauthorized {
		t.Errorf("admin API without a token: %d", code)
	}
	// A session is not a bearer token either.
	e.signIn(t)
	if code, _, _ := e.get(t, "/metrics"); code != http.StatusUnauthorized {
		t.Errorf("admin API with a console session: %d, want 401", code)
	}
	if code, _, _ := e.get(t, "/ui/static/console.css"); code != http.StatusOK {
		t.Errorf("stylesheet with a session: %d", code)
	}
}

func TestSignIn(t *testing.T) {
	e := newEnv(t, false)
	if code, body, _ := e.get(t, "/ui/signin?next=/ui/events"); code != 200 || !strings.Contains(body, `name="next" value="/ui/events"`) {
		t.Fatalf("sign-in page: %d\n%s", code, body)
	}
	for _, c := range []struct {
		name  string
		form  url.Values
		hdr   map[string]string
		code  int
		where string
	}{
		{"wrong token", url.Values{"token": {"nope"}}, nil, 401, ""},
		{"empty token", url.Values{"token": {""}}, nil, 401, ""},
		{"token prefix", url.Values{"token": {Token[:len(Token)-1]}}, nil, 401, ""},
		{"cross-origin", url.Values{"token": {Token}}, map[string]string{"Origin": "http://evil.example"}, 403, ""},
		{"no origin nor referer", url.Values{"token": {Token}}, map[string]string{"Origin": ""}, 403, ""},
		{"referer of another site", url.Values{"token": {Token}}, map[string]string{"Origin": "", "Referer": "http://evil.example/ui/signin"}, 403, ""},
		{"referer of this site", url.Values{"token": {Token}, "next": {"/ui/usage"}}, map[string]string{"Origin": "", "Referer": "self"}, 303, "/ui/usage"},
		{"next off the console", url.Values{"token": {Token}, "next": {"//evil.example/"}}, nil, 303, "/ui/"},
		{"next elsewhere", url.Values{"token": {Token}, "next": {"https://evil.example/ui/"}}, nil, 303, "/ui/"},
		{"right token", url.Values{"token": {Token}, "next": {"/ui/events?status=failed"}}, nil, 303, "/ui/events?status=failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.Admin.URL+"/ui/signin", strings.NewReader(c.form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", e.Admin.URL)
			for k, v := range c.hdr {
				if v == "self" {
					v = e.Admin.URL + "/ui/signin"
				}
				req.Header.Set(k, v)
				if v == "" {
					req.Header.Del(k)
				}
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.code)
			}
			var ck *http.Cookie
			for _, k := range resp.Cookies() {
				if k.Name == "hookledger_console" {
					ck = k
				}
			}
			if c.code != 303 {
				if ck != nil {
					t.Errorf("a refused sign-in set a cookie")
				}
				return
			}
			if loc := resp.Header.Get("Location"); loc != c.where {
				t.Errorf("redirect to %q, want %q", loc, c.where)
			}
			if ck == nil {
				t.Fatal("no session cookie")
			}
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure || ck.Path != "/ui/" {
				t.Errorf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/ui/, not Secure over plain HTTP", ck)
			}
			if ck.MaxAge != int((8 * time.Hour).Seconds()) {
				t.Errorf("cookie Max-Age %d, want 8 h", ck.MaxAge)
			}
			if strings.Contains(ck.Value, Token) || len(ck.Value) < 40 {
				t.Errorf("cookie value %q: want a random id, not the token", ck.Value)
			}
		})
	}
}

// Over TLS the cookie is Secure.
func TestSignInTLS(t *testing.T) {
	e := newEnv(t, true)
	resp := e.do(t, "POST", "/ui/signin", url.Values{"token": {Token}})
	resp.Body.Close()
	cks := resp.Cookies()
	if resp.StatusCode != 303 || len(cks) != 1 || !cks[0].Secure || !cks[0].HttpOnly || cks[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("TLS sign-in: %d %+v", resp.StatusCode, cks)
	}
	if code, _, _ := e.get(t, "/ui/"); code != 200 {
		t.Errorf("overview over TLS: %d", code)
	}
}

// A session ends when it expires and when its holder signs out; the old
// cookie value is then worthless even if a browser kept it.
func TestSessionExpiryAndSignOut(t *testing.T) {
	e := newEnv(t, false)
	e.signIn(t)
	if code, _, _ := e.get(t, "/ui/"); code != 200 {
		t.Fatalf("signed in: %d", code)
	}
	e.Clock.Add(8*time.Hour - time.Second)
	if code, _, _ := e.get(t, "/ui/"); code != 200 {
		t.Fatalf("a second before expiry: %d", code)
	}
	e.Clock.Add(time.Second)
	if code, _, _ := e.get(t, "/ui/"); code != http.StatusSeeOther {
		t.Fatalf("at expiry: %d, want 303 to sign-in", code)
	}

	e.signIn(t)
	u, _ := url.Parse(e.Admin.URL + "/ui/")
	old := e.Client.Jar.Cookies(u)
	doc := e.page(t, "/ui/")
	csrf := ""
	for _, in := range find(doc, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == "csrf" }) {
		csrf = attr(in, "value")
	}
	if csrf == "" {
		t.Fatal("no sign-out form with its csrf token")
	}
	// Without the form's token, or from another origin, sign-out is refused.
	resp := e.do(t, "POST", "/ui/signout", url.Values{"csrf": {"forged"}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without the csrf token: %d, want 403", resp.StatusCode)
	}
	resp = e.do(t, "POST", "/ui/signout", url.Values{"csrf": {csrf}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/signin" {
		t.Fatalf("sign-out: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if cks := resp.Cookies(); len(cks) != 1 || cks[0].MaxAge >= 0 || cks[0].Value != "" {
		t.Errorf("sign-out did not clear the cookie: %+v", cks)
	}
	if code, _, _ := e.get(t, "/ui/"); code != http.StatusSeeOther {
		t.Errorf("after sign-out: %d", code)
	}
	e.Client.Jar.SetCookies(u, old) // a browser that kept the old cookie
	if code, _, _ := e.get(t, "/ui/"); code != http.StatusSeeOther {
		t.Errorf("the old cookie still signs in after sign-out: %d", code)
	}
}

// Every response carries the security headers: pages, the sign-in page,
// refusals, assets.
func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t, false)
	check := func(path string, h http.Header) {
		t.Helper()
		csp := h.Get("Content-Security-Policy")
		for _, want := range []string{"default-src 'none'", "script-src 'self'", "frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
			if !strings.Contains(csp, want) {
				t.Errorf("%s: CSP %q lacks %q", path, csp, want)
			}
		}
		if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q allows inline code", path, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" || h.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", path, h)
		}
	}
	for _, p := range []string{"/ui/signin", "/ui/", "/ui/static/console.css"} {
		_, _, h := e.get(t, p)
		check(p, h)
	}
	e.signIn(t)
	for _, p := range []string{"/ui/", "/ui/events", "/ui/usage", "/ui/invoices", "/ui/nope", "/ui/static/console.css"} {
		_, _, h := e.get(t, p)
		check(p, h)
	}
	if _, _, h := e.get(t, "/ui/static/console.css"); !strings.HasPrefix(h.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet Content-Type %q", h.Get("Content-Type"))
	}
}

// Failed sign-ins are limited per source address: after ten in a minute
// even the right token waits from that address (answering it would tell a
// guesser which guess was right), while the right token from another
// address signs in: a guesser locks out only itself.
func TestSignInFailureLimit(t *testing.T) {
	e := newEnv(t, false)
	for i := range 10 {
		resp := e.do(t, "POST", "/ui/signin", url.Values{"token": {fmt.Sprintf("guess-%d", i)}})
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d", i, resp.StatusCode)
		}
	}
	resp := e.do(t, "POST", "/ui/signin", url.Values{"token": {Token}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("eleventh sign-in in a minute from the guesser's address: %d, want 429 with Retry-After", resp.StatusCode)
	}

	// Another address (127.0.0.2 is loopback too) signs in with the right
	// token, and its session opens a page; the guesser's address is still
	// refused.
	other := &http.Client{Jar: newJar(t), CheckRedirect: e.Client.CheckRedirect,
		Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}).DialContext}}
	req, _ := http.NewRequest("POST", e.Admin.URL+"/ui/signin", strings.NewReader(url.Values{"token": {Token}, "next": {"/ui/"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.Admin.URL)
	resp, err := other.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("right token from another address while one guesses: %d with %d cookies, want 303 and a session", resp.StatusCode,
			len(resp.Cookies()))
	}
	if resp, err := other.Get(e.Admin.URL + "/ui/"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("the other address's session: %v %v, want 200", resp, err)
	} else {
		resp.Body.Close()
	}
	resp = e.do(t, "POST", "/ui/signin", url.Values{"token": {Token}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the guesser's address after another signed in: %d, want 429", resp.StatusCode)
	}

	e.Clock.Add(time.Minute)
	e.signIn(t)
}

// Behind a reverse proxy that terminates TLS (X-Forwarded-Proto: https), the
// cookie is Secure and the browser's https Origin is this console's.
func TestSignInBehindProxy(t *testing.T) {
	e := newEnv(t, false)
	host := strings.TrimPrefix(e.Admin.URL, "http://")
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		code   int
		secure bool
	}{
		{"https origin without the proxy's header", map[string]string{"Origin": "https://" + host}, 403, false},
		{"proxy terminating TLS", map[string]string{"Origin": "https://" + host, "X-Forwarded-Proto": "https"}, 303, true},
		{"proxy renaming the host", map[string]string{"Origin": "https://console.example", "X-Forwarded-Proto": "https",
			"X-Forwarded-Host": "console.example"}, 303, true},
		{"http origin through a TLS proxy", map[string]string{"Origin": "http://" + host, "X-Forwarded-Proto": "https"}, 403, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", e.Admin.URL+"/ui/signin", strings.NewReader(url.Values{"token": {Token}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			for k, v := range c.hdr {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != c.code {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.code)
			}
			if cks := resp.Cookies(); c.code == 303 && (len(cks) != 1 || cks[0].Secure != c.secure) {
				t.Errorf("cookies %+v, want one with Secure %v", cks, c.secure)
			}
		})
	}
}
