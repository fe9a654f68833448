package payload

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	valid := []string{
		`{}`, `[]`, `""`, `0`, `-0`, `1.5e-3`, `-12E+4`, `true`, `false`, `null`,
		" \t\r\n{ \"a\" : [ 1 , { } , [ ] , \"x\" ] } \n",
		`{"a":{"b":{"c":[1,2,{"d":null}]}},"e":"\" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00"}`,
		"\"raw \xff bytes and \xc2\x80\"", // not UTF-8 or a C1 control: encoding/json accepts it too
		`{"a":1,"a":2}`,                   // duplicate keys are Get's business, not a syntax error
		`"\ud800"`,                        // a lone surrogate escape is valid JSON text
	}
	invalid := []string{
		``, ` `, `{`, `}`, `[`, `]`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a"}`, `{"a" 1}`, `{a:1}`, `{1:1}`,
		`{"a":1 "b":2}`, `[1 2]`, `{} {}`, `1 2`, `[}`, `{]`, `{"a":]`, `"abc`, `"a` + "\n" + `b"`,
		"\"\x00\"", `"\x"`, `"\u12"`, `"\u12G4"`, `"\`, `01`, `1.`, `.5`, `1e`, `1e+`, `+1`, `-`, `--1`,
		`tru`, `nul`, `falsey`, `True`, `NaN`, `Infinity`, `'a'`, "\xef\xbb\xbf{}", `[1]x`, `{"a":1}}`,
	}
	for _, s := range valid {
		if err := Check([]byte(s), 0); err != nil {
			t.Errorf("Check(%q) = %v, want nil", s, err)
		}
		if !json.Valid([]byte(s)) {
			t.Errorf("encoding/json disagrees on %q", s)
		}
	}
	for _, s := range invalid {
		if err := Check([]byte(s), 0); !errors.Is(err, ErrSyntax) {
			t.Errorf("Check(%q) = %v, want ErrSyntax", s, err)
		}
		if json.Valid([]byte(s)) {
			t.Errorf("encoding/json disagrees on %q", s)
		}
	}
}

// nested is n levels of open, then inner, then n levels of close.
func nested(open, inner, close string, n int) []byte {
	return []byte(strings.Repeat(open, n) + inner + strings.Repeat(close, n))
}

func TestCheckDepth(t *testing.T) {
	for _, c := range []struct {
		name               string
		open, inner, close string
	}{{"arrays", "[", "", "]"}, {"objects", `{"k":`, "1", "}"}, {"mixed", `[{"k":`, "0", "}]"}} {
		t.Run(c.name, func(t *testing.T) {
			per := 1
			if c.name == "mixed" {
				per = 2
			}
			for _, limit := range []int{1, 2, 64, 65, 128, MaxDepthLimit} {
				n := limit / per
				if err := Check(nested(c.open, c.inner, c.close, n), limit); err != nil {
					t.Errorf("depth %d at limit %d: %v", n*per, limit, err)
				}
				over := nested(c.open, c.inner, c.close, n+1)
				if err := Check(over, limit); !errors.Is(err, ErrTooDeep) {
					t.Errorf("depth %d at limit %d: %v, want ErrTooDeep", (n+1)*per, limit, err)
				}
			}
		})
	}
	// Siblings do not add up: depth is the deepest path, not the number of containers.
	wide := []byte("[" + strings.Repeat("[[]],", 1000) + "[]]")
	if err := Check(wide, 3); err != nil {
		t.Errorf("1000 siblings of depth 3: %v", err)
	}
	// Out-of-range limits mean MaxDepthLimit.
	for _, limit := range []int{0, -1, MaxDepthLimit + 1} {
		if err := Check(nested("[", "", "]", MaxDepthLimit), limit); err != nil {
			t.Errorf("limit %d: %v", limit, err)
		}
		if err := Check(nested("[", "", "]", MaxDepthLimit+1), limit); !errors.Is(err, ErrTooDeep) {
			t.Errorf("limit %d: %v, want ErrTooDeep", limit, err)
		}
	}
	// Too deep is reported as soon as it is seen, even if the rest is not JSON at all.
	if err := Check([]byte(strings.Repeat("[", 200)+"garbage"), 128); !errors.Is(err, ErrTooDeep) {
		t.Errorf("got %v, want ErrTooDeep", err)
	}
}

// The body of the issue: ten million "[" overflowed gjson's recursion. Check stops at the limit
// without reading further and without allocating.
func TestCheckTenMillionOpenBrackets(t *testing.T) {
	body := bytes.Repeat([]byte("["), 10_000_000)
	if err := Check(body, 128); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("got %v, want ErrTooDeep", err)
	}
	closed := append(body, bytes.Repeat([]byte("]"), len(body))...)
	if err := Check(closed, MaxDepthLimit); !errors.Is(err, ErrTooDeep) {
		t.Fatalf("got %v, want ErrTooDeep", err)
	}
	if n := testing.AllocsPerRun(10, func() { Check(closed, 128) }); n != 0 {
		t.Errorf("%v allocations per Check, want 0", n)
	}
}

func TestCheckDoesNotAllocate(t *testing.T) {
	body := stripeBody(t)
	if n := testing.AllocsPerRun(100, func() {
		if err := Check(body, 128); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per Check, want 0", n)
	}
}

// FuzzCheck holds Check to encoding/json.Valid, an independent implementation of the same
// grammar, and to an independent depth count.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":"c\u00e9\n"}],"d":-1.5e3,"e":true,"f":null}`, `[[[]]]`, `"\"`, `{"a":}`, `[1,]`, "\"\x01\""} {
		f.Add([]byte(s))
	}
	f.Add(stripeBody(f))
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Check(b, MaxDepthLimit)
		if json.Valid(b) != (err == nil) {
			if !errors.Is(err, ErrTooDeep) || depth(b) <= MaxDepthLimit {
				t.Fatalf("Check(%q) = %v, encoding/json.Valid = %v", b, err, json.Valid(b))
			}
		}
		if err != nil {
			return
		}
		d := depth(b)
		if d > 1 && !errors.Is(Check(b, d-1), ErrTooDeep) || Check(b, max(d, 1)) != nil { // 0 means the largest limit
			t.Fatalf("depth %d of %q not enforced: %v, %v", d, b, Check(b, d-1), Check(b, d))
		}
	})
}

// depth is the deepest nesting of a valid JSON text, counted the simple way.
func depth(b []byte) int {
	d, deepest, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inStr && c == '\\':
			i++
		case c == '"':
			inStr = !inStr
		case !inStr && (c == '[' || c == '{'):
			d++
			deepest = max(deepest, d)
		case !inStr && (c == ']' || c == '}'):
			d--
		}
	}
	return deepest
}
