package config

import (
	"strings"
	"testing"
)

// A YAML syntax error names its line, the keys that lead there and shows
// the line, as the other configuration errors do.
func TestSyntaxErrorNamesTheKey(t *testing.T) {
	provider := "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\n"
	for _, tc := range []struct{ src, want string }{
		{provider + "  tolerance: 5m\n", "5: providers.tolerance: value is not allowed in this context (not valid YAML)\n    5 |   tolerance: 5m"},
		{"providers:\n  - name: a\n    scheme: github\n    secrets: [\"x\"\n", "4: providers[0].secrets: sequence end token ']' not found"},
		{provider + "  - name: b\n    scheme: github\n    secrets:\n      - \"y\n", "8: providers[1].secrets[0]: could not find end character of double-quoted text"},
		{provider + "meters:\n  - secrets:\n      - \"y\n", "7: meters[0].secrets[0]: could not find end character"},
	} {
		_, err := Parse([]byte(tc.src), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse:\n%v\nwant it to contain\n%s", err, tc.want)
		}
	}
}
