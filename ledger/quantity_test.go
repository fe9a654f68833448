package ledger

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
)

func TestParseQuantity(t *testing.T) {
	ok := map[string]Quantity{
		"0": 0, "3": 3 * Scale, "-3": -3 * Scale, "1.5": 1_500_000, "0.000001": 1, "-0.000001": -1,
		"2.5e3": 2_500_000_000, "1E-6": 1, "12.500000": 12_500_000, "9223372036854": 9223372036854 * Scale,
		// The range is symmetric, as documented: ±9,223,372,036,854.775807.
		"9223372036854.775807": math.MaxInt64, "-9223372036854.775807": -math.MaxInt64,
		"9.223372036854775807e12": math.MaxInt64, "-9.223372036854775807e12": -math.MaxInt64,
	}
	for in, want := range ok {
		got, err := ParseQuantity(in)
		if err != nil || got != want {
			t.Errorf("ParseQuantity(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	bad := map[string]string{
		"": "not a decimal", "abc": "not a decimal", "1/3": "not a decimal", "0x10": "not a decimal",
		"1.": "not a decimal", ".5": "not a decimal", "+1": "not a decimal", "1e99999": "not a decimal",
		"NaN": "not a decimal", "0.0000001": "6 decimal places", "1e-7": "6 decimal places",
		"99999999999999999999":     "out of range",
		"9223372036854.775808":     "out of range: beyond the largest quantity, ±9223372036854.775807",
		"-9223372036854.775808":    "out of range: beyond the largest quantity, ±9223372036854.775807",
		"-9.223372036854775808e12": "out of range", "-9223372036854.775809": "out of range",
	}
	for in, want := range bad {
		if _, err := ParseQuantity(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseQuantity(%q) error = %v, want %q", in, err, want)
		}
	}
}

func TestQuantityStringRoundTrips(t *testing.T) {
	for _, q := range []Quantity{0, 1, -1, Scale, -Scale, 1_500_000, 123_456_789, -987_654_321_000} {
		back, err := ParseQuantity(q.String())
		if err != nil || back != q {
			t.Errorf("%d -> %q -> %d, %v", q, q.String(), back, err)
		}
		b, _ := json.Marshal(q)
		var j Quantity
		if err := json.Unmarshal(b, &j); err != nil || j != q {
			t.Errorf("JSON %s -> %d, %v", b, j, err)
		}
	}
}

// FuzzParseQuantity: any input either fails or survives a format round trip.
func FuzzParseQuantity(f *testing.F) {
	for _, s := range []string{"0", "1.5", "-2.000001", "3e2", "1e-6", "abc", "1/3", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuantity(s)
		if err != nil {
			return
		}
		back, err := ParseQuantity(q.String())
		if err != nil || back != q {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, q, q.String(), back, err)
		}
	})
}

// A quantity no row holds is refused with the real bound: its digits,
// without the point (and the zeros ending its fraction), at most
// 9223372036854775807; the number of digits is not it (issue 40, item 9).
func TestRowRangeNamesTheBound(t *testing.T) {
	const bound = "out of range: its digits, decimal point aside, exceed 9223372036854775807 (one row's limit)"
	for _, in := range []string{"9999999999999999999", "9223372036854775808", "92233720368547758.08", "-92233720368547758.08", "1e19"} {
		if _, err := ParseRowQuantity(in); err == nil || err.Error() != fmt.Sprintf("%q: %s", in, bound) {
			t.Errorf("%s: %v\nwant %q: %s", in, err, in, bound)
		}
	}
	// Within the bound, however many digits: 19 with a fraction, trailing
	// zeros that are not digits of the row.
	for _, in := range []string{"9223372036854775807", "92233720368547758.07", "-92233720368547758.07", "922337203685477580.70", "9223372036854.775807"} {
		if _, err := ParseRowQuantity(in); err != nil {
			t.Errorf("%s: %v", in, err)
		}
	}
}
