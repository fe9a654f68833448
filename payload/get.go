package payload

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Get returns the value at path in body; Exists() is false when there is none. A path is keys
// separated by dots, a backslash making the next character literal (`fav\.movie`), and a segment
// of digits indexes an array: the plain subset of gjson's syntax that CheckPath accepts.
//
// When a key occurs more than once in one object, its last occurrence is the value, at every level
// of the path: {"customer":"a","customer":"b"} has customer b, and in
// {"data":{"customer":"a"},"data":{}} data.customer is missing. That is what encoding/json (into
// any, and into struct fields, which stripe-go's ConstructEvent and go-github use), JavaScript's
// JSON.parse and the providers' SDKs read, so an event id, a customer or a quantity means the
// same to hookledger as to the sender's own tools. gjson.Get returns the first occurrence and has
// no way to ask for the last, so this walks the body itself: one pass over the object that holds
// each key (the last occurrence can only be known at its end), skipping values it does not need
// without decoding them, and recursing once per path segment, never once per nesting level.
// Keys compare exactly after JSON unescaping; encoding/json's case-insensitive match of struct
// fields is not copied (it is not part of JSON, and gjson paths are case-sensitive).
func Get(body []byte, path string) gjson.Result {
	if path == "" {
		return gjson.Result{}
	}
	raw, _ := find(body, 0, path)
	if raw == nil {
		return gjson.Result{}
	}
	return gjson.ParseBytes(raw)
}

// find resolves path inside the value at b[i] (after whitespace). It returns the raw value found
// (nil if none) and the index just past the value at b[i], or -1 where b is not well-formed.
func find(b []byte, i int, path string) (raw []byte, end int) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return nil, -1
	}
	if path == "" {
		if end = skipValue(b, i); end < 0 {
			return nil, -1
		}
		return b[i:end], end
	}
	seg, rest := cutSegment(path)
	switch b[i] {
	case '{':
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return nil, i + 1
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return nil, -1
			}
			k := i
			if i = skipValue(b, i); i < 0 {
				return nil, -1
			}
			key := b[k+1 : i-1]
			if i = skipSpace(b, i); i >= len(b) || b[i] != ':' {
				return nil, -1
			}
			if string(key) == seg || bytes.IndexByte(key, '\\') >= 0 && gjson.ParseBytes(b[k:i]).Str == seg {
				raw, i = find(b, i+1, rest) // a later occurrence replaces this one, even by nothing
			} else {
				i = skipValue(b, skipSpace(b, i+1))
			}
			if i < 0 {
				return nil, -1
			}
			if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
				i = skipSpace(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				return raw, i + 1
			}
			return nil, -1
		}
	case '[':
		n, ok := index(seg)
		if !ok {
			return nil, skipValue(b, i)
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return nil, i + 1
		}
		for k := 0; ; k++ {
			if k == n {
				raw, i = find(b, i, rest)
			} else {
				i = skipValue(b, skipSpace(b, i))
			}
			if i < 0 {
				return nil, -1
			}
			if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
				i++
				continue
			}
			if i < len(b) && b[i] == ']' {
				return raw, i + 1
			}
			return nil, -1
		}
	}
	return nil, skipValue(b, i) // a scalar has no keys
}

// cutSegment splits off the first segment of path, unescaped; it allocates only for a segment
// that holds a backslash.
func cutSegment(path string) (seg, rest string) {
	i := strings.IndexAny(path, `.\`)
	if i < 0 {
		return path, ""
	}
	if path[i] == '.' {
		return path[:i], path[i+1:]
	}
	var sb strings.Builder
	for j := 0; j < len(path); j++ {
		switch c := path[j]; {
		case c == '\\' && j+1 < len(path):
			j++
			sb.WriteByte(path[j])
		case c == '.':
			return sb.String(), path[j+1:]
		default:
			sb.WriteByte(c)
		}
	}
	return sb.String(), ""
}

// index reads an array index: decimal digits only, as gjson reads them.
func index(seg string) (int, bool) {
	if seg == "" || strings.TrimLeft(seg, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(seg)
	return n, err == nil
}

// skipValue returns the index just past the value that starts at b[i], or -1. It trusts the
// grammar only as far as it must to find the end (the body passed Check when it arrived).
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipQuoted(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			c := b[i]
			if !structural[c] {
				i++
				continue
			}
			switch c {
			case '"':
				if i = skipQuoted(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			default:
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			if j == i {
				return -1
			}
			return j
		}
	}
	return len(b)
}

// structural marks the bytes that matter while skipping a container.
var structural = func() (t [256]bool) {
	for _, c := range []byte(`"{}[]`) {
		t[c] = true
	}
	return t
}()

// skipQuoted returns the index just past the string that opens at b[i]: the next quote preceded
// by an even number of backslashes. bytes.IndexByte makes long strings cheap to pass over.
func skipQuoted(b []byte, i int) int {
	for i++; ; {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		n := 0
		for k := i - 1; b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}

// CheckPath rejects a path that Get could not read as the user means it: what is left is the
// subset of gjson's syntax (plain keys, escapes, array indexes) on which Get and gjson agree.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("path is empty")
	case strings.TrimSpace(p) != p:
		return fmt.Errorf("path %q has surrounding spaces", p)
	case strings.HasPrefix(p, "$"):
		return fmt.Errorf("path %q: use gjson syntax without a leading $ (e.g. data.object.customer)", p)
	}
	for rest := p; ; {
		i := 0
		for ; i < len(rest) && rest[i] != '.'; i++ {
			c := rest[i]
			switch {
			case c == '\\':
				if i+1 == len(rest) {
					return fmt.Errorf("path %q ends in a lone backslash", p)
				}
				i++
			case strings.IndexByte("*?|#@", c) >= 0, i == 0 && strings.IndexByte("![{", c) >= 0:
				// gjson's wildcards, pipes, queries, modifiers, literals and multipaths.
				return fmt.Errorf("path %q: %q is gjson syntax (a wildcard, query, modifier or pipe), which mappings do not support; write \\%c to match it literally", p, c, c)
			}
		}
		if i == 0 || i == len(rest)-1 {
			return fmt.Errorf("path %q has an empty segment", p)
		}
		if i == len(rest) {
			return nil
		}
		rest = rest[i+1:]
	}
}
