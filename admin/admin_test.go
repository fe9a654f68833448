package admin

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNewRefusesNonLoopbackWithoutToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:9090", ":9090", "192.0.2.10:9090", "[::]:9090", "example.com:9090", "not-an-address"} {
		for _, tokens := range [][]string{nil, {""}, {"", ""}} {
			_, err := New(addr, tokens)
			if err == nil {
				t.Errorf("New(%q, %q) accepted an unauthenticated non-loopback listener", addr, tokens)
				continue
			}
			if !strings.Contains(err.Error(), "not a loopback address") || !strings.Contains(err.Error(), "HOOKLEDGER_ADMIN_TOKEN") {
				t.Errorf("New(%q): unhelpful message: %v", addr, err)
			}
		}
	}
}

// Off loopback, a token that is short or only whitespace is refused, not
// just warned about: it would be the only thing guarding the operator API.
func TestNewRefusesWeakTokensOffLoopback(t *testing.T) {
	long := "0123456789abcdef" // exactly MinTokenLength
	for _, tokens := range [][]string{
		{"x"},
		{" "},
		{"                    "}, // 20 spaces
		{"\t\n  \r"},             // whitespace of every kind
		{"  0123456789abcde  "},  // 15 characters once trimmed
		{"ééééééééééééééé"},      // 15 characters in 30 bytes
		{long, "short"},          // every token must be strong
		{"", "0123456789abcde"},
	} {
		for _, addr := range []string{"0.0.0.0:9090", ":9090", "[::]:9090", "192.0.2.10:9090"} {
			_, err := New(addr, tokens)
			if err == nil {
				t.Errorf("New(%q, %q) accepted a weak token on a non-loopback address", addr, tokens)
				continue
			}
			if !strings.Contains(err.Error(), "shorter than 16 characters or only whitespace") || !strings.Contains(err.Error(), addr) {
				t.Errorf("New(%q, %q): message does not name the rule and address: %v", addr, tokens, err)
			}
		}
	}
	// Loopback keeps the old rule: a weak token is allowed (serve warns).
	for _, tokens := range [][]string{{"x"}, {" "}} {
		if _, err := New("127.0.0.1:9090", tokens); err != nil {
			t.Errorf("loopback with %q: %v", tokens, err)
		}
	}
	for _, tokens := range [][]string{{long}, {"ééééééééééééééééé"}, {long + "-and-more", long}} {
		if _, err := New("0.0.0.0:9090", tokens); err != nil {
			t.Errorf("strong tokens %q refused: %v", tokens, err)
		}
	}
}

func TestWeakTokens(t *testing.T) {
	got := WeakTokens([]string{"0123456789abcdef", "x", "   ", " 0123456789abcdef "})
	if len(got) != 2 || got[0] != "x" || got[1] != "   " {
		t.Errorf("WeakTokens = %q, want [x, three spaces]", got)
	}
}

func TestNewAccepts(t *testing.T) {
	for _, c := range []struct {
		addr   string
		tokens []string
		want   string
		n      int
	}{
		{"", nil, DefaultListen, 0},
		{"127.0.0.1:9191", nil, "127.0.0.1:9191", 0},
		{"127.0.0.2:9191", nil, "127.0.0.2:9191", 0},
		{"[::1]:9191", nil, "[::1]:9191", 0},
		{"localhost:9191", nil, "localhost:9191", 0},
		{"0.0.0.0:9191", []string{"a-long-enough-admin-token"}, "0.0.0.0:9191", 1},
		{":9191", []string{"", "t1-xxxxxxxxxxxxxxxx", "t2-xxxxxxxxxxxxxxxx"}, ":9191", 2},
	} {
		s, err := New(c.addr, c.tokens)
		if err != nil {
			t.Errorf("New(%q, %q): %v", c.addr, c.tokens, err)
			continue
		}
		if s.Listen != c.want || len(s.Tokens) != c.n {
			t.Errorf("New(%q, %q) = listen %q with %d tokens, want %q and %d", c.addr, c.tokens, s.Listen, len(s.Tokens), c.want, c.n)
		}
	}
}

// adminServer serves s over real HTTP with one route that says who got in.
func adminServer(t *testing.T, tokens ...string) *httptest.Server {
	t.Helper()
	s, err := New("127.0.0.1:0", tokens)
	if err != nil {
		t.Fatal(err)
	}
	s.Mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secret operator data\n")
	})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = s.HTTPServer()
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func request(t *testing.T, url, authorization string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestBearerAuth(t *testing.T) {
	const tok1, tok2 = "tok-one-0123456789abcdef", "tok-two-0123456789abcdef"
	srv := adminServer(t, tok1, tok2)
	for _, c := range []struct {
		name, auth string
		want       int
	}{
		{"no header", "", 401},
		{"wrong token", "Bearer nope", 401},
		{"token prefix", "Bearer " + tok1[:len(tok1)-1], 401},
		{"token with suffix", "Bearer " + tok1 + "x", 401},
		{"empty token", "Bearer ", 401},
		{"scheme only", "Bearer", 401},
		{"basic auth", "Basic " + tok1, 401},
		{"token without scheme", tok1, 401},
		{"both tokens joined", "Bearer " + tok1 + tok2, 401},
		{"first token", "Bearer " + tok1, 200},
		{"second token (rotation)", "Bearer " + tok2, 200},
		{"scheme is case-insensitive", "bearer " + tok1, 200},
		{"token is case-sensitive", "Bearer " + strings.ToUpper(tok1), 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, body, h := request(t, srv.URL+"/metrics", c.auth)
			if code != c.want {
				t.Fatalf("status %d, want %d", code, c.want)
			}
			if c.want == 401 {
				if strings.Contains(body, "secret operator data") {
					t.Error("401 leaked the route's body")
				}
				if h.Get("WWW-Authenticate") != `Bearer realm="hookledger-admin"` {
					t.Errorf("WWW-Authenticate = %q", h.Get("WWW-Authenticate"))
				}
			} else if body != "secret operator data\n" {
				t.Errorf("body %q", body)
			}
		})
	}
	// Unknown routes are also behind the token: no route discovery without it.
	if code, _, _ := request(t, srv.URL+"/nope", ""); code != 401 {
		t.Errorf("unknown route without token: %d, want 401", code)
	}
	if code, _, _ := request(t, srv.URL+"/nope", "Bearer "+tok1); code != 404 {
		t.Errorf("unknown route with token: %d, want 404", code)
	}
}

// With no token configured there is no anonymous access at all.
func TestNoTokenRefusesEverything(t *testing.T) {
	srv := adminServer(t)
	for _, auth := range []string{"", "Bearer ", "Bearer x"} {
		if code, _, _ := request(t, srv.URL+"/metrics", auth); code != 401 {
			t.Errorf("no tokens configured, Authorization %q: %d", auth, code)
		}
	}
}

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:1": true, "127.9.9.9:1": true, "[::1]:1": true, "localhost:1": true,
		"0.0.0.0:1": false, ":1": false, "[::]:1": false, "10.0.0.1:1": false, "127.0.0.1": false,
		"localhost.example.com:1": false,
	} {
		if got := isLoopback(addr); got != want {
			t.Errorf("isLoopback(%q) = %v", addr, got)
		}
	}
	// The loopback guard holds for what the listener really binds to.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !isLoopback(ln.Addr().String()) {
		t.Errorf("bound address %s not seen as loopback", ln.Addr())
	}
}

// The console is mounted beside the API without the bearer check (it has
// its own sessions); everything else still needs the token, and Authorized
// accepts exactly the tokens the bearer check does.
func TestConsoleMount(t *testing.T) {
	const tok = "tok-one-0123456789abcdef"
	s, err := New("127.0.0.1:0", []string{tok})
	if err != nil {
		t.Fatal(err)
	}
	s.Mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "metrics") })
	s.Console = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "console "+r.URL.Path) })
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	for path, want := range map[string]int{"/ui": 200, "/ui/": 200, "/ui/events": 200, "/uix": 401, "/metrics": 401, "/": 401} {
		if code, _, _ := request(t, srv.URL+path, ""); code != want {
			t.Errorf("GET %s without a token: %d, want %d", path, code, want)
		}
	}
	if code, body, _ := request(t, srv.URL+"/ui/events", ""); code != 200 || body != "console /ui/events" {
		t.Errorf("console: %d %q", code, body)
	}
	for token, want := range map[string]bool{tok: true, "": false, tok + "x": false, tok[:len(tok)-1]: false, strings.ToUpper(tok): false} {
		if got := s.Authorized(token); got != want {
			t.Errorf("Authorized(%q) = %v", token, got)
		}
	}
	none, _ := New("127.0.0.1:0", nil)
	if none.Authorized("") {
		t.Error("no tokens: the empty token signs in")
	}
}
