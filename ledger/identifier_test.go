package ledger

import (
	"strings"
	"testing"
)

func TestCheckIdentifier(t *testing.T) {
	for _, s := range []string{"cus_1", "api_requests", "evt_1PqXyZ", "cus é", "顧客", "😀", "a\u00a0b", "\u00a0", strings.Repeat("a", MaxIdentifierBytes), strings.Repeat("é", MaxIdentifierBytes/2)} {
		if err := CheckIdentifier(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for s, want := range map[string]string{
		"\x00":         "control character (U+0000)",
		"a\x1f":        "control character (U+001F)",
		"a\x7f":        "control character (U+007F)",
		"a\u0080":      "control character (U+0080)",
		"a\u009f":      "control character (U+009F)",
		"cus_\xff":     "not valid UTF-8",
		"\xc2":         "not valid UTF-8",
		"\xed\xa0\x80": "not valid UTF-8", // a surrogate encoded as UTF-8
		"cus_\ufffd":   "U+FFFD",
		" ":            "only spaces",
		"   ":          "only spaces",
		strings.Repeat("a", MaxIdentifierBytes+1):   "is 1025 bytes, longer than the 1024 bytes",
		strings.Repeat("é", MaxIdentifierBytes/2+1): "is 1026 bytes", // counted in bytes, not characters
	} {
		if err := CheckIdentifier(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", s, err, want)
		}
	}
}

func TestCheckText(t *testing.T) {
	for _, s := range []string{"", "Acme Inc.", "a\tb\nc", "\u00a0", "\ufffd", "顧客"} {
		if err := CheckText(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
	for s, want := range map[string]string{
		"\x00":         "contains a NUL (U+0000)",
		"Acme\x00":     "contains a NUL (U+0000)",
		"Acme \xff":    "is not valid UTF-8",
		"\xed\xa0\x80": "is not valid UTF-8",
	} {
		if err := CheckText(s); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", s, err, want)
		}
	}
	if err := CheckTexts(Text{"name", "Acme"}, Text{"note", "a\x00"}, Text{"email", "\xff"}); err == nil || err.Error() != "note: contains a NUL (U+0000), which stored text cannot hold" {
		t.Errorf("CheckTexts: %v, want the first bad field named", err)
	}
}
