// Package redact keeps the secrets hookledger sends out of what it stores
// and shows. A destination that misbehaves (a wrong api_base, a proxy's
// error page, a debugging endpoint) may answer with the request it got,
// Authorization header and all; the relay keeps the start of every answer
// (forward attempts, the admin API, the console), so the answer is scrubbed
// with the call's Secrets before it is written, and again when it is shown,
// for rows an older version stored whole.
//
// A Secrets is immutable: With and Join make new ones, so one set is shared
// by a destination's concurrent attempts.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"html"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Mark is what a secret is replaced with, as config.Secret prints itself.
const Mark = "[redacted]"

// minPartial is the shortest start of a secret that a cut-off text's end is
// taken for: three characters cannot be told from ordinary text, and give
// nothing of a key that has dozens.
const minPartial = 4

// Secrets are the values an outbound call sends (or shares with its
// destination) that must never be stored or shown, each in every form an
// echo of it may take. The nil *Secrets knows no value: it still removes
// what looks like a credential (see shapes).
type Secrets struct {
	forms []string // longest first: a form that holds another is replaced whole
}

// New is the set of values (empty ones are ignored).
func New(values ...string) *Secrets { return (*Secrets)(nil).With(values...) }

// With is s and values, each in the forms an echo of it takes (forms).
func (s *Secrets) With(values ...string) *Secrets {
	var add []string
	for _, v := range values {
		add = append(add, forms(v)...)
	}
	return s.join(add)
}

// WithURL is s and the credentials raw carries (https://user:password@host/,
// or https://token@host/): Go's client sends them in an Authorization: Basic
// header, base64 of user:password. The user name is a secret only when it
// comes alone (a token); beside a password it is a name ("api").
func (s *Secrets) WithURL(raw string) *Secrets {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return s
	}
	user := u.User.Username()
	pw, ok := u.User.Password()
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
	if !ok || pw == "" {
		return s.With(user, basic)
	}
	return s.With(pw, basic)
}

// Join is the values of every set (a nil set adds none).
func Join(sets ...*Secrets) *Secrets {
	var all []string
	for _, s := range sets {
		if s != nil {
			all = append(all, s.forms...)
		}
	}
	return (*Secrets)(nil).join(all)
}

func (s *Secrets) join(add []string) *Secrets {
	seen := map[string]bool{}
	var out []string
	if s != nil {
		add = append(append([]string(nil), s.forms...), add...)
	}
	for _, f := range add {
		if f != "" && !seen[f] {
			seen[f] = true
			out = append(out, f)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return &Secrets{forms: out}
}

// forms are the ways an echo of v may spell it:
//   - as sent: a header dump or a proxy's plain error page quotes
//     "Authorization: Bearer <key>", which holds the key as sent;
//   - JSON string escaped, as an API that echoes the request in a JSON body
//     writes it: every encoder escapes " and \ and control characters, Go's
//     also < > & (\u003c…), and PHP's and Java's escape / as \/ (a
//     base64 secret such as a whsec_ has / in it);
//   - HTML escaped, as an HTML error page quotes it;
//   - percent encoded (upper and lower case hex), as a page quoting a URL or
//     a form does.
//
// Base64 of a value is not among them: nothing hookledger sends encodes a
// secret so, except basic auth, whose header value WithURL adds itself.
func forms(v string) []string {
	if v == "" {
		return nil
	}
	out := []string{v, html.EscapeString(v), url.QueryEscape(v), url.PathEscape(v)}
	if j, err := json.Marshal(v); err == nil { // Go's default: < > & escaped
		s := string(j[1 : len(j)-1])
		out = append(out, s, strings.ReplaceAll(s, "/", `\/`))
	}
	var plain strings.Builder
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) == nil {
		s := strings.TrimSuffix(plain.String(), "\n")
		s = s[1 : len(s)-1]
		out = append(out, s, strings.ReplaceAll(s, "/", `\/`))
	}
	for _, f := range out[:len(out):len(out)] {
		if strings.Contains(f, "%") {
			out = append(out, lowerHex(f))
		}
	}
	return out
}

// lowerHex is s with its percent escapes in lower case hex (%2f).
func lowerHex(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1], b[i+2] = lower(b[i+1]), lower(b[i+2])
		}
	}
	return string(b)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'F' {
		return c + 'a' - 'A'
	}
	return c
}

// shapes are credentials recognised without knowing them: a Stripe secret
// or restricted key, a Standard Webhooks secret (raw or with JSON's \/), and
// the credentials of an Authorization header. They catch what the set
// cannot: a row an older version stored with a key rotated since, or a
// command that runs without the secret resolved (config's
// LoadSecretsOptional leaves an unset ${VAR} out). A Bearer or Basic value
// must be 16 characters or more, so prose ("Bearer authentication") stays.
var (
	keyShape  = regexp.MustCompile(`\b(?:[sr]k_(?:live|test)_[0-9A-Za-z]{4,}|whsec_(?:[0-9A-Za-z+=]|\\?/)+)`)
	authShape = regexp.MustCompile(`(?i)\b(bearer|basic)(\s+|%20|\+)(?:[0-9A-Za-z._~+=-]|\\?/){16,}`)
)

// String is v with every secret of s, and every credential shape, replaced
// by Mark.
func (s *Secrets) String(v string) string {
	if v == "" {
		return v
	}
	if s != nil {
		for _, f := range s.forms {
			v = strings.ReplaceAll(v, f, Mark)
		}
		v = s.tail(v)
	}
	// The relay scrubs every answer it records: look for the shapes only
	// where their fixed parts are (a regexp over a KiB costs tens of µs).
	if strings.Contains(v, "k_live_") || strings.Contains(v, "k_test_") || strings.Contains(v, "whsec_") {
		v = keyShape.ReplaceAllString(v, Mark)
	}
	if hasFold(v, "bearer") || hasFold(v, "basic") {
		v = authShape.ReplaceAllString(v, "${1}${2}"+Mark)
	}
	return v
}

// hasFold reports whether v holds word (lower case ASCII) in any case.
func hasFold(v, word string) bool {
	for i := 0; i+len(word) <= len(v); i++ {
		if v[i]|0x20 == word[0] && strings.EqualFold(v[i:i+len(word)], word) {
			return true
		}
	}
	return false
}

// tail replaces the end of v when it is the start of a secret: the start of
// a text cut at a limit (the first KiB of a response) may end inside one.
func (s *Secrets) tail(v string) string {
	for _, f := range s.forms {
		for k := min(len(f)-1, len(v)); k >= minPartial; k-- {
			if strings.HasSuffix(v, f[:k]) {
				return v[:len(v)-k] + Mark
			}
		}
	}
	return v
}

// Bytes is String for a body; nil stays nil.
func (s *Secrets) Bytes(b []byte) []byte {
	if len(b) == 0 {
		return b
	}
	return []byte(s.String(string(b)))
}

// Slack is how far past a limit a reader must read so that a secret that
// starts before the limit is read whole (the longest form): read n+Slack
// bytes, then Cut them to n.
func (s *Secrets) Slack() int {
	if s == nil || len(s.forms) == 0 {
		return 0
	}
	return len(s.forms[0])
}

// Cut is b scrubbed, then cut to at most n bytes. b is the start of a body
// read up to n+Slack() bytes: a secret that straddles n is scrubbed whole
// before the cut, rather than its first half kept.
func (s *Secrets) Cut(b []byte, n int) []byte {
	b = s.Bytes(b)
	if len(b) > n {
		b = b[:n]
	}
	return b
}
