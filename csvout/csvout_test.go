package csvout

import (
	"encoding/csv"
	"slices"
	"strings"
	"testing"
)

func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		`=HYPERLINK("http://x","y")`: `'=HYPERLINK("http://x","y")`,
		"@SUM(1)":                    "'@SUM(1)",
		"+cmd":                       "'+cmd",
		"-2+3+cmd|' /C calc'!A0":     "'-2+3+cmd|' /C calc'!A0",
		"\tx":                        "'\tx",
		"\rx":                        "'\rx",
		"-x":                         "'-x",
		"-":                          "-", // the CLI's empty mark
		"-5":                         "-5",
		"-0.50":                      "-0.50",
		"+3":                         "+3",
		"-1.":                        "'-1.",
		"-.5":                        "'-.5",
		"-1e5":                       "'-1e5",
		"cus_1":                      "cus_1",
		"a=b":                        "a=b",
		"":                           "",
		"2026-10-01T00:00:00Z":       "2026-10-01T00:00:00Z",
	} {
		if got := Cell(in); got != want {
			t.Errorf("Cell(%q) = %q, want %q", in, got, want)
		}
	}
}

// Every cell, the header's too, is guarded; the caller's record is not
// changed; the output parses back to the guarded cells.
func TestWriter(t *testing.T) {
	var b strings.Builder
	w := NewWriter(&b)
	header := []string{"customer", "@dim"}
	row := []string{`=HYPERLINK("http://x","y")`, "-0.50"}
	w.Write(header)
	if err := w.WriteAll([][]string{row}); err != nil {
		t.Fatal(err)
	}
	if row[0] != `=HYPERLINK("http://x","y")` || header[1] != "@dim" {
		t.Fatalf("the caller's record changed: %q %q", header, row)
	}
	got, err := csv.NewReader(strings.NewReader(b.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	want := [][]string{{"customer", "'@dim"}, {`'=HYPERLINK("http://x","y")`, "-0.50"}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("wrote %q, want %q", got, want)
	}
}
