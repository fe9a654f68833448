package ledger

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// occurred_at as unix seconds is refused past 9999-12-31T23:59:59Z, the
// last second RFC 3339 can write (a dispute's JSON, an export): such a value
// is almost always milliseconds sent as seconds.
func TestOccurredAtInUnixSecondsStopsAtTheYear9999(t *testing.T) {
	m := NewMapper([]Mapping{{Type: "usage.recorded", Customer: Field{Path: "c"}, Meter: Field{Path: "m"},
		Quantity: Field{Path: "q"}, OccurredAt: Field{Path: "at"}}}, nil)
	received := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		at, want, err string
	}{
		{"1764547200", "2025-12-01T00:00:00Z", ""},
		{"1764547200.5", "2025-12-01T00:00:00.5Z", ""},
		{"253402300799", "9999-12-31T23:59:59Z", ""},
		{"253402300800", "", "after the year 9999 as unix seconds (milliseconds, perhaps?)"},
		{"1764547200000", "", "occurred_at: 1764547200000 is after the year 9999"},
		{"-1", "", "is not a unix time in seconds"},
		{`"10000-01-01T00:00:00Z"`, "", "is not an RFC 3339 time"},
	} {
		body := []byte(`{"c":"cus_1","m":"api","q":1,"at":` + tc.at + `}`)
		rows, matched, err := m.Map("default", "usage.recorded", body, received)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) || len(rows) != 0 {
				t.Errorf("at %s: rows %v, err %v, want %q", tc.at, rows, err, tc.err)
			}
		case err != nil || !matched || len(rows) != 1:
			t.Errorf("at %s: rows %v, matched %v, err %v", tc.at, rows, matched, err)
		case rows[0].OccurredAt.UTC().Format(time.RFC3339Nano) != tc.want:
			t.Errorf("at %s: occurred %s, want %s", tc.at, rows[0].OccurredAt.UTC().Format(time.RFC3339Nano), tc.want)
		}
	}
}

// A value quoted in a mapping error is clipped: the error is stored with the
// receipt, answered and logged, and the sender chose the value's size.
func TestMappingErrorsClipTheValue(t *testing.T) {
	m := NewMapper([]Mapping{{Type: "usage.recorded", Customer: Field{Path: "c"}, Meter: Field{Path: "m"},
		Quantity: Field{Path: "q"}, OccurredAt: Field{Path: "at"}}}, nil)
	long := strings.Repeat("9", 250_000) + ".5"
	for name, body := range map[string]string{
		"quantity":    `{"c":"cus_1","m":"api","q":"` + long + `"}`,
		"occurred_at": `{"c":"cus_1","m":"api","q":1,"at":"` + strings.Repeat("é", 50_000) + `"}`,
	} {
		_, _, err := m.Map("default", "usage.recorded", []byte(body), time.Now())
		if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), " bytes)") {
			t.Errorf("%s: error of %d bytes: %.300v", name, len(fmt.Sprint(err)), err)
		}
	}
}

// An identifier the mapping extracts is held to MaxIdentifierBytes, a
// string or a number alike: the receipt is then failed with that reason.
func TestMappingRefusesLongIdentifiers(t *testing.T) {
	m := NewMapper([]Mapping{{Type: "usage.recorded", Customer: Field{Path: "c"}, Meter: Field{Path: "m"},
		Quantity: Field{Path: "q"}}}, nil)
	long := strings.Repeat("x", 3000)
	for body, want := range map[string]string{
		`{"c":"` + long + `","m":"api","q":1}`:                                    "customer: is 3000 bytes, longer than the 1024 bytes",
		`{"c":` + strings.Repeat("7", 1025) + `,"m":"api","q":1}`:                 "customer: is 1025 bytes",
		`{"c":"cus_1","m":"` + long + `","q":1}`:                                  "meter: is 3000 bytes",
		`{"c":"` + strings.Repeat("x", MaxIdentifierBytes) + `","m":"api","q":1}`: "",
	} {
		rows, _, err := m.Map("default", "usage.recorded", []byte(body), time.Now())
		switch {
		case want == "" && (err != nil || len(rows) != 1):
			t.Errorf("%.40s…: %d rows, %v", body, len(rows), err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%.40s…: %v, want %q", body, err, want)
		}
	}
}

// A mapped property is kept as the payload wrote it, so it must be text
// every backend stores: a byte that is not UTF-8 (anywhere in the value, in
// a nested string or key) or an escaped NUL fails the mapping with the
// property's name. Other text, a lone surrogate's escape included (its JSON
// text is plain ASCII), is kept as written.
func TestMappingRefusesUnstorablePropertyText(t *testing.T) {
	m := NewMapper([]Mapping{{Type: "usage.recorded", Customer: Field{Path: "c"}, Meter: Field{Path: "m"},
		Quantity: Field{Path: "q"}, Properties: map[string]Field{"model": {Path: "p"}, "region": {Value: "eu"}}}}, nil)
	for p, want := range map[string]string{
		"\"a\xffb\"":                   "properties.model: is not valid UTF-8",
		`"a\u0000b"`:                   "properties.model: contains a NUL (U+0000)",
		"[1,{\"k\":[\"x\xc2\"]}]":      "properties.model: is not valid UTF-8",
		`{"a":{"k\u0000":1}}`:          "properties.model: contains a NUL",
		`"a\u00e9b\tc\nd"`:             "",
		`"\ud800"`:                     "",
		`{"k":[1,true,null,"\u00e9"]}`: "",
		`12.5`:                         "",
	} {
		rows, _, err := m.Map("default", "usage.recorded", []byte(`{"c":"cus_1","m":"api","q":1,"p":`+p+`}`), time.Now())
		switch {
		case want == "" && (err != nil || len(rows) != 1 || rows[0].Properties != `{"model":`+p+`,"region":"eu"}`):
			t.Errorf("%q: %v, %v", p, rows, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%q: %v, want %q", p, err, want)
		}
	}
	// A constant is configuration: refused when the configuration loads.
	bad := Mapping{Type: "t", Customer: Field{Path: "c"}, Meter: Field{Path: "m"}, Quantity: Field{Path: "q"},
		Properties: map[string]Field{"region": {Value: "eu\x00"}}}
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "properties.region: value contains a NUL") {
		t.Errorf("a constant property with a NUL: %v", err)
	}
}
