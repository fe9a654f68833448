package payload

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func TestGet(t *testing.T) {
	cases := []struct {
		name, body, path string
		want             string // the raw value; "" for none
	}{
		{"plain", `{"customer":"a"}`, "customer", `"a"`},
		{"duplicate key: the last wins", `{"customer":"a","customer":"b"}`, "customer", `"b"`},
		{"three of them", `{"n":1,"x":0,"n":2,"n":3}`, "n", `3`},
		{"duplicate inside the path", `{"data":{"c":"a","c":"b"}}`, "data.c", `"b"`},
		{"duplicate object on the path", `{"data":{"c":"a"},"x":1,"data":{"c":"b"}}`, "data.c", `"b"`},
		{"the last object replaces, it does not merge", `{"data":{"c":"a"},"data":{"d":1}}`, "data.c", ""},
		{"replaced by null", `{"data":{"c":"a"},"data":null}`, "data.c", ""},
		{"replaced by a scalar", `{"data":{"c":"a"},"data":"s"}`, "data.c", ""},
		{"an escaped key is the same key", `{"customer":"a","cust\u006fmer":"b"}`, "customer", `"b"`},
		{"array index", `{"a":[{"x":1},{"x":2,"x":3}]}`, "a.1.x", `3`},
		{"first element", `{"a":[{"x":1},{"x":2}]}`, "a.0.x", `1`},
		{"index past the end", `{"a":[{"x":1}]}`, "a.1.x", ""},
		{"a key on an array", `{"a":[{"x":1}]}`, "a.x", ""},
		{"a digit key on an object", `{"0":"z"}`, "0", `"z"`},
		{"escaped dot", `{"a.b":1,"a":{"b":2}}`, `a\.b`, `1`},
		{"unescaped dot", `{"a.b":1,"a":{"b":2}}`, `a.b`, `2`},
		{"strings that look like structure", `{"s":"}\"{[","t":{"u":"]\\"},"v":7}`, "v", `7`},
		{"objects as values", `{"a":{"b":[1,{"c":2}]},"a":{"b":[3]}}`, "a", `{"b":[3]}`},
		{"big integer kept exactly", `{"id":18446744073709551615}`, "id", `18446744073709551615`},
		{"whitespace", " {\n \"a\" :\t[ 1 , 2 ] ,\r\n \"b\" : true } ", "a.1", `2`},
		{"null is a value", `{"a":null}`, "a", `null`},
		{"missing", `{"a":1}`, "b", ""},
		{"scalar body", `"x"`, "a", ""},
		{"empty path", `{"":1}`, "", ""},
		{"empty key", `{"":1}`, `\`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Get([]byte(c.body), c.path)
			if got.Raw != c.want || got.Exists() != (c.want != "") {
				t.Errorf("Get(%s, %q) = %q (exists %v), want %q", c.body, c.path, got.Raw, got.Exists(), c.want)
			}
		})
	}
}

// Where a body has no duplicate keys, Get and gjson agree on every path CheckPath accepts; that
// is what lets existing mapping paths keep their meaning.
func TestGetAgreesWithGJSONWithoutDuplicates(t *testing.T) {
	body := stripeBody(t)
	paths := []string{"id", "type", "created", "data.object.customer", "data.object.lines.data.0.quantity",
		"data.object.lines.data.0.price.recurring.interval", "data.object.metadata", "data.object.tax",
		"data.object.lines.data.1", "request.idempotency_key", "nothing.here", "data.object.lines.data"}
	for _, p := range paths {
		if err := CheckPath(p); err != nil {
			t.Fatal(err)
		}
		if got, want := Get(body, p), gjson.GetBytes(body, p); got.Raw != want.Raw || got.Type != want.Type {
			t.Errorf("%s: Get = %q, gjson = %q", p, got.Raw, want.Raw)
		}
	}
}

func TestGetOnMalformedBodies(t *testing.T) {
	body := `{"a":{"b":[1,"x\"y",{"c":true}]},"d":"e"}`
	for i := range len(body) {
		for _, p := range []string{"a.b.2.c", "d", "a"} {
			Get([]byte(body[:i]), p) // must not panic or hang
		}
	}
	for _, b := range []string{`{"a" 1}`, `{"a":1 "b":2}`, `[1 2]`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a`, `"`, `{"\`} {
		if got := Get([]byte(b), "b"); got.Exists() {
			t.Errorf("Get(%s, b) = %q", b, got.Raw)
		}
	}
}

func TestGetDoesNotRecursePerLevel(t *testing.T) {
	// Ten million levels of nesting beside the key: skipped by a loop, not by recursion.
	deep := `{"deep":` + strings.Repeat("[", 10_000_000) + strings.Repeat("]", 10_000_000) + `,"id":"evt_1"}`
	if got := Get([]byte(deep), "id"); got.Str != "evt_1" {
		t.Fatalf("got %q", got.Raw)
	}
}

func TestCheckPath(t *testing.T) {
	for _, p := range []string{"id", "data.object.customer", "a.0.b", `fav\.movie`, `a\*b`, `\#`, "a-b_c", "a!", "x[0"} {
		if err := CheckPath(p); err != nil {
			t.Errorf("CheckPath(%q) = %v", p, err)
		}
	}
	for p, want := range map[string]string{
		"":           "empty",
		" a":         "spaces",
		"$.a":        "leading $",
		".a":         "empty segment",
		"a.":         "empty segment",
		"a..b":       "empty segment",
		`a\`:         "lone backslash",
		"a.*":        "gjson syntax",
		"a?":         "gjson syntax",
		"items.#":    "gjson syntax",
		"a|b":        "gjson syntax",
		"@reverse":   "gjson syntax",
		"a.!true":    "gjson syntax",
		"[a,b]":      "gjson syntax",
		"{a}":        "gjson syntax",
		"a.#(b==1)":  "gjson syntax",
		"data.@this": "gjson syntax",
	} {
		if err := CheckPath(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckPath(%q) = %v, want %q", p, err, want)
		}
	}
}

// FuzzGet holds Get to a model: encoding/json decoding the body into any (where a repeated key
// keeps its last value) and walking the path through the maps and slices.
func FuzzGet(f *testing.F) {
	f.Add([]byte(`{"a":{"b":1},"a":{"b":[2,{"c":"x"}]}}`), "a.b.1.c")
	f.Add([]byte(`{"customer":"a","customer":"b"}`), "customer")
	f.Add([]byte(`{"k\u0065y":1,"key":2,"key":{"z":null}}`), "key.z")
	f.Add([]byte(`{"a.b":[true,false],"a":{"b":0}}`), `a\.b.1`)
	f.Add(stripeBody(f), "data.object.lines.data.0.price.id")
	f.Fuzz(func(t *testing.T, body []byte, path string) {
		got := Get(body, path) // never panics, whatever the input
		if CheckPath(path) != nil || Check(body, 64) != nil || !utf8.Valid(body) {
			return // encoding/json replaces invalid UTF-8, which can merge keys Get keeps apart
		}
		want, ok := model(t, body, path)
		if !ok {
			if got.Exists() {
				t.Fatalf("Get(%s, %q) = %s, encoding/json finds nothing", body, path, got.Raw)
			}
			return
		}
		if !got.Exists() {
			t.Fatalf("Get(%s, %q) found nothing, encoding/json finds %v", body, path, want)
		}
		if v := decode(t, []byte(got.Raw)); !reflect.DeepEqual(v, want) {
			t.Fatalf("Get(%s, %q) = %s, encoding/json finds %v", body, path, got.Raw, want)
		}
	})
}

func decode(t *testing.T, b []byte) any {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func model(t *testing.T, body []byte, path string) (any, bool) {
	v := decode(t, body)
	for rest := path; rest != ""; {
		var seg string
		seg, rest = cutSegment(rest)
		switch x := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = x[seg]; !ok {
				return nil, false
			}
		case []any:
			n, ok := index(seg)
			if !ok || n >= len(x) {
				return nil, false
			}
			v = x[n]
		default:
			return nil, false
		}
	}
	return v, true
}
