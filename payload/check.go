// Package payload reads authenticated webhook bodies: Check says whether a body is one JSON value
// nested no deeper than a limit, and Get reads a value at a path with one rule for keys that occur
// twice. Everything that takes a value out of a body (event ids and types, Slack's challenge, usage
// mappings, reconciled events) goes through Get, so every reader agrees on what a body says.
package payload

import "errors"

// Outcomes of Check.
var (
	ErrSyntax  = errors.New("not valid JSON")
	ErrTooDeep = errors.New("nested too deep")
)

// MaxDepthLimit is the largest nesting limit Check enforces: its stack of open containers is a
// fixed bit set of this many levels, so Check never allocates. Webhook bodies nest a few levels
// (Stripe's deepest are about 8), so configurations stay far below it.
const MaxDepthLimit = 1024

// Check reports whether b is exactly one JSON value (RFC 8259, surrounding whitespace allowed) with
// no more than maxDepth nested arrays and objects: "[]" is depth 1. A maxDepth outside
// 1..MaxDepthLimit means MaxDepthLimit. It returns nil, ErrTooDeep or ErrSyntax.
//
// It replaces gjson.ValidBytes, which recurses once per nesting level: ten million "[" overflowed
// the goroutine stack (a fatal error, not a panic), and 256 KiB of them grew it to about 60 MB.
// No library offers one allocation-free pass with a configurable limit: encoding/json.Valid is
// iterative but fixed at 10,000 levels and 2.5-4x slower than gjson; jsontext (go-json-experiment)
// has WithDepthLimit only as a commented-out TODO, and its token loop allocates and runs at half
// gjson's speed (payload's BenchmarkCheck has the figures). This is the RFC grammar as a loop with
// an explicit stack; FuzzCheck holds it to encoding/json.Valid.
//
// Strings may hold bytes that are not UTF-8, as encoding/json and gjson accept them: a body is
// kept as it was signed, and what must be valid text (identifiers) is checked where it is used.
func Check(b []byte, maxDepth int) error {
	if maxDepth <= 0 || maxDepth > MaxDepthLimit {
		maxDepth = MaxDepthLimit
	}
	var objects [MaxDepthLimit / 64]uint64 // bit d: the container open at depth d+1 is an object
	depth := 0
	i := skipSpace(b, 0)
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return ErrSyntax
		}
		switch c := b[i]; c {
		case '{', '[':
			if depth == maxDepth {
				return ErrTooDeep
			}
			if c == '{' {
				objects[depth/64] |= 1 << (depth % 64)
			} else {
				objects[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			i = skipSpace(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				depth--
				i++
				break // an empty container is a complete value
			}
			if c == '{' {
				if i = skipName(b, i); i < 0 {
					return ErrSyntax
				}
			}
			continue // its first value
		case '"':
			i = skipString(b, i)
		case 't':
			i = skipLiteral(b, i, "true")
		case 'f':
			i = skipLiteral(b, i, "false")
		case 'n':
			i = skipLiteral(b, i, "null")
		default:
			i = skipNumber(b, i)
		}
		if i < 0 {
			return ErrSyntax
		}
		// After a complete value: close containers until a comma leads to the next value.
		for {
			i = skipSpace(b, i)
			if depth == 0 {
				if i != len(b) {
					return ErrSyntax
				}
				return nil
			}
			if i >= len(b) {
				return ErrSyntax
			}
			inObject := objects[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if inObject {
					if i = skipName(b, i); i < 0 {
						return ErrSyntax
					}
				}
				break
			}
			if inObject && b[i] != '}' || !inObject && b[i] != ']' {
				return ErrSyntax
			}
			depth--
			i++
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipName skips `"name" :` and the whitespace after it; b[i] must be the opening quote.
func skipName(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = skipString(b, i); i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// inString classifies bytes inside a string: 0 ordinary, 1 the closing quote, 2 an escape, 3 a
// control character, which JSON requires to be escaped.
var inString = func() (t [256]byte) {
	for c := range 0x20 {
		t[c] = 3
	}
	t['"'], t['\\'] = 1, 2
	return t
}()

// skipString returns the index just past the string whose opening quote is b[i], or -1.
func skipString(b []byte, i int) int {
	for i++; i < len(b); {
		switch inString[b[i]] {
		case 0:
			i++
		case 1:
			return i + 1
		case 2:
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default:
			return -1
		}
	}
	return -1
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func skipDigits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// skipNumber skips -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? or returns -1.
func skipNumber(b []byte, i int) int {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = skipDigits(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := skipDigits(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := skipDigits(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func skipLiteral(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
