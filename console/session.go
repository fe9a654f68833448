package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"time"
)

// DefaultSessionTTL is how long a sign-in lasts: a working day. It is an
// absolute limit, not renewed by activity, so a forgotten tab does not stay
// signed in for ever.
const DefaultSessionTTL = 8 * time.Hour

// CookieName is the session cookie.
const CookieName = "hookledger_console"

// maxSessions bounds the session table: signing in beyond it drops the
// session closest to expiring. Only token holders can create sessions, so
// this is a guard against a script signing in in a loop, not a quota.
const maxSessions = 1000

// session is one sign-in. The cookie holds a random id; the table holds its
// SHA-256, so the table itself (a heap dump, say) holds nothing that signs in.
type session struct {
	key     [32]byte
	Expires time.Time
	// CSRF is a second random value, put in the sign-out form: sign-out is
	// a POST, and SameSite=Strict plus the Origin check already stop a
	// cross-site one; the token makes a forged sign-out need the page.
	CSRF string
}

type sessions struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[[32]byte]*session
}

func newSessions(now func() time.Time) *sessions {
	return &sessions{now: now, m: map[[32]byte]*session{}}
}

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("console: crypto/rand: " + err.Error()) // never fails on Linux (Go 1.24+ crypto/rand does not return errors)
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// create starts a session lasting ttl and returns the cookie value.
func (ss *sessions) create(ttl time.Duration) (string, *session) {
	id := randomToken()
	s := &session{key: sha256.Sum256([]byte(id)), Expires: ss.now().Add(ttl), CSRF: randomToken()}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	for k, o := range ss.m {
		if !now.Before(o.Expires) {
			delete(ss.m, k)
		}
	}
	for len(ss.m) >= maxSessions {
		var first *session
		for _, o := range ss.m {
			if first == nil || o.Expires.Before(first.Expires) {
				first = o
			}
		}
		delete(ss.m, first.key)
	}
	ss.m[s.key] = s
	return id, s
}

// get returns the live session of a cookie value, or nil.
func (ss *sessions) get(id string) *session {
	if id == "" {
		return nil
	}
	k := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.m[k]
	if s == nil {
		return nil
	}
	if !ss.now().Before(s.Expires) {
		delete(ss.m, k)
		return nil
	}
	return s
}

func (ss *sessions) end(s *session) {
	ss.mu.Lock()
	delete(ss.m, s.key)
	ss.mu.Unlock()
}

// current is the request's live session, or nil.
func (c *Console) current(r *http.Request) *session {
	ck, err := r.Cookie(CookieName)
	if err != nil {
		return nil
	}
	return c.sessions.get(ck.Value)
}

// page wraps a page handler: without a session the browser is sent to the
// sign-in page, which brings it back here afterwards.
func (c *Console) page(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.current(r)
		if s == nil {
			http.Redirect(w, r, withQuery("/ui/signin", "next", r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		h(w, r, s)
	})
}

// asset wraps what is not a page (the stylesheet, a bundle download): no
// session is a plain 401.
func (c *Console) asset(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c.current(r) == nil {
			http.Error(w, "sign in at /ui/signin first", http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}

// download wraps a page's download (usage.csv, invoices.json): like an
// asset, no session is a plain 401. The page's handler finds the format in
// the request's "format" path value ("" for the page itself).
func (c *Console) download(format string, h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := c.current(r)
		if s == nil {
			http.Error(w, "sign in at /ui/signin first", http.StatusUnauthorized)
			return
		}
		r.SetPathValue("format", format)
		h(w, r, s)
	})
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, value string, expires time.Time) {
	ck := &http.Cookie{Name: CookieName, Value: value, Path: "/ui/", HttpOnly: true, Secure: secure(r),
		SameSite: http.SameSiteStrictMode}
	if value == "" {
		ck.MaxAge = -1
	} else {
		ck.Expires = expires
		ck.MaxAge = int(expires.Sub(c.Now()).Seconds())
	}
	http.SetCookie(w, ck)
}

// secure reports whether the browser reached the console over HTTPS: TLS
// here, or a reverse proxy in front that terminated it and says so with
// X-Forwarded-Proto (a header a cross-site page cannot make a browser send).
func secure(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// sameOrigin is the CSRF check of the two POSTs (sign-in, sign-out): the
// Origin header (or, from a browser that sends none, the Referer) must be
// this server as the browser addressed it (its Host, or the
// X-Forwarded-Host a reverse proxy set). SameSite=Strict already keeps the
// cookie off cross-site requests; this also refuses a cross-site sign-in
// (login CSRF), which needs no cookie. A request naming neither is refused:
// every browser sends Origin on a form POST.
func sameOrigin(r *http.Request) bool {
	scheme := "http"
	if secure(r) {
		scheme = "https"
	}
	got := r.Header.Get("Origin")
	if got == "" {
		ref := r.Header.Get("Referer")
		if ref == "" {
			return false
		}
		u, err := url.Parse(ref)
		if err != nil {
			return false
		}
		got = u.Scheme + "://" + u.Host
	}
	for _, host := range []string{r.Host, r.Header.Get("X-Forwarded-Host")} {
		if host != "" && got == scheme+"://"+host {
			return true
		}
	}
	return false
}

// safeNext keeps a post-sign-in redirect on the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "/ui//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

type signInView struct {
	Next, Error string
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	if c.current(r) != nil {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	w.Header().Set("Content-Security-Policy", signInCSP)
	c.render(w, r, nil, http.StatusOK, "signin", "Sign in", signInView{Next: safeNext(r.URL.Query().Get("next"))})
}

// Failed sign-ins are limited per source address: a token is long and
// random (at least 16 characters off loopback, admin.MinTokenLength), and
// this keeps guessing at a few tries a minute on top. The limit is per
// address, not per process, so a guesser locks out only itself: a process
// wide limit let anyone who reaches the admin port keep everyone from
// signing in with ten wrong tokens a minute.
const (
	maxFailures   = 10
	failureWindow = time.Minute
	// maxSources bounds the table of addresses with recent failures
	// (about 100 bytes each): when it is full, expired windows go first,
	// then the oldest. A guesser who owns that many addresses gets that
	// many windows of guesses, which the token's length makes worthless.
	maxSources = 10_000
)

// failureLimit counts failed sign-ins per source address in windows of
// failureWindow. Only failures add an entry: signing in costs no memory.
type failureLimit struct {
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*failureWindowCount
}

// failureWindowCount is one source's failures since start.
type failureWindowCount struct {
	start time.Time
	n     int
}

func newFailureLimit(now func() time.Time) *failureLimit {
	return &failureLimit{now: now, m: map[string]*failureWindowCount{}}
}

// source is the address a sign-in is counted against: the connection's IP
// (not X-Forwarded-For, which any client can set to get a fresh count), an
// IPv6 address by its /64, which one host usually holds whole.
func source(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	ip = ip.Unmap()
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}

// blocked reports whether src has used up its failures in its window.
func (f *failureLimit) blocked(src string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.m[src]
	if w == nil {
		return false
	}
	if f.now().Sub(w.start) >= failureWindow {
		delete(f.m, src)
		return false
	}
	return w.n >= maxFailures
}

// fail counts a failed sign-in from src.
func (f *failureLimit) fail(src string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	if w := f.m[src]; w != nil && now.Sub(w.start) < failureWindow {
		w.n++
		return
	}
	if len(f.m) >= maxSources {
		f.evict(now)
	}
	f.m[src] = &failureWindowCount{start: now, n: 1}
}

// evict makes room in a full table: every expired window, or else the
// oldest.
func (f *failureLimit) evict(now time.Time) {
	var oldest string
	for k, w := range f.m {
		if now.Sub(w.start) >= failureWindow {
			delete(f.m, k)
		} else if oldest == "" || w.start.Before(f.m[oldest].start) {
			oldest = k
		}
	}
	if len(f.m) >= maxSources {
		delete(f.m, oldest)
	}
}

// signIn checks the token (admin.Server.Authorized: constant time, the
// admin API's tokens) and starts a session.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-origin sign-in refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	src := source(r)
	if c.failures.blocked(src) {
		w.Header().Set("Retry-After", "60")
		http.Error(w, "too many failed sign-ins; try again in a minute", http.StatusTooManyRequests)
		return
	}
	token := strings.TrimSpace(r.PostForm.Get("token"))
	if token == "" || c.Authorized == nil || !c.Authorized(token) {
		c.failures.fail(src)
		c.Log.Warn("console: sign-in refused", "remote", r.RemoteAddr)
		w.Header().Set("Content-Security-Policy", signInCSP)
		c.render(w, r, nil, http.StatusUnauthorized, "signin", "Sign in", signInView{Next: next, Error: "That is not an admin token."})
		return
	}
	id, s := c.sessions.create(c.SessionTTL)
	c.setCookie(w, r, id, s.Expires)
	c.Log.Info("console: signed in", "remote", r.RemoteAddr, "expires", s.Expires.UTC().Format(time.RFC3339))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) signOut(w http.ResponseWriter, r *http.Request, s *session) {
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if !sameOrigin(r) || r.ParseForm() != nil || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.CSRF)) != 1 {
		http.Error(w, "cross-origin sign-out refused", http.StatusForbidden)
		return
	}
	c.sessions.end(s)
	c.setCookie(w, r, "", time.Time{})
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
}
