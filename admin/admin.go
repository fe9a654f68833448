// Package admin serves the operator endpoints (usage queries, metrics) on a
// separate listener that binds to loopback by default and always requires a
// bearer token.
package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultListen keeps the admin API off the network unless asked.
const DefaultListen = "127.0.0.1:9090"

// MinTokenLength is the shortest admin token accepted on a non-loopback
// listener, counted in characters after trimming whitespace: a token anyone
// on the network can guess in a few tries is no authentication. Loopback
// listeners only warn (see WeakTokens), since a local user could read the
// token from the environment anyway.
const MinTokenLength = 16

// Server is the admin HTTP server. Register routes on Mux before Serve.
type Server struct {
	Listen string
	Tokens []string
	Mux    *http.ServeMux
	// Console, when set, serves /ui and everything under /ui/ instead of
	// Mux and without the bearer check: a browser cannot send the header,
	// so the console signs in with the same tokens (Authorized) and keeps
	// a session cookie of its own (see package console).
	Console http.Handler
}

// New returns an admin server. It refuses a configuration that would expose
// the admin API without authentication.
func New(listen string, tokens []string) (*Server, error) {
	if listen == "" {
		listen = DefaultListen
	}
	var nonEmpty []string
	for _, t := range tokens {
		if t != "" {
			nonEmpty = append(nonEmpty, t)
		}
	}
	if !isLoopback(listen) {
		if len(nonEmpty) == 0 {
			return nil, fmt.Errorf("admin listener %s is not a loopback address and no admin token is set: set admin.tokens or HOOKLEDGER_ADMIN_TOKEN", listen)
		}
		if n := len(WeakTokens(nonEmpty)); n > 0 {
			return nil, fmt.Errorf("admin listener %s is not a loopback address and %d admin token(s) are shorter than %d characters or only whitespace: "+
				"use a long random token (openssl rand -hex 32) in admin.tokens or HOOKLEDGER_ADMIN_TOKEN", listen, n, MinTokenLength)
		}
	}
	return &Server{Listen: listen, Tokens: nonEmpty, Mux: http.NewServeMux()}, nil
}

// WeakTokens returns the tokens shorter than MinTokenLength characters once
// surrounding whitespace is trimmed. A whitespace-only token is among them:
// HTTP trims header values, so it could never even be presented.
func WeakTokens(tokens []string) []string {
	var weak []string
	for _, t := range tokens {
		if utf8.RuneCountInString(strings.TrimSpace(t)) < MinTokenLength {
			weak = append(weak, t)
		}
	}
	return weak
}

// Handler wraps Mux with bearer-token authentication. With no token
// configured every request is refused: there is no anonymous admin access.
func (s *Server) Handler() http.Handler {
	sums := make([][32]byte, len(s.Tokens))
	for i, t := range s.Tokens {
		sums[i] = sha256.Sum256([]byte(t))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.Console != nil && (r.URL.Path == ConsolePath || strings.HasPrefix(r.URL.Path, ConsolePath+"/")) {
			s.Console.ServeHTTP(w, r)
			return
		}
		if !authorized(r.Header.Get("Authorization"), sums) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookledger-admin"`)
			http.Error(w, "missing or invalid bearer token", http.StatusUnauthorized)
			return
		}
		s.Mux.ServeHTTP(w, r)
	})
}

// authorized compares SHA-256 digests in constant time, so neither the
// token's content nor its length leaks through timing.
func authorized(header string, sums [][32]byte) bool {
	// The scheme name is case-insensitive (RFC 9110 §11.1); the token is not.
	const scheme = "Bearer "
	if len(header) <= len(scheme) || !strings.EqualFold(header[:len(scheme)], scheme) {
		return false
	}
	return matches(header[len(scheme):], sums)
}

// ConsolePath is where Server.Console is mounted.
const ConsolePath = "/ui"

// Authorized reports whether token is one of the admin tokens, compared as
// the bearer check compares them (in constant time, over SHA-256 digests).
// The console's sign-in uses it, so both accept exactly the same tokens.
func (s *Server) Authorized(token string) bool {
	if len(s.Tokens) == 0 {
		return false
	}
	sums := make([][32]byte, len(s.Tokens))
	for i, t := range s.Tokens {
		sums[i] = sha256.Sum256([]byte(t))
	}
	return matches(token, sums)
}

func matches(token string, sums [][32]byte) bool {
	got := sha256.Sum256([]byte(token))
	match := 0
	for _, want := range sums {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	return match == 1
}

// HTTPServer returns a configured *http.Server for the admin handler.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      5 * time.Minute, // usage exports can be large
		IdleTimeout:       120 * time.Second,
	}
}

func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
