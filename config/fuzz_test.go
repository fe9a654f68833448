package config

import (
	"os"
	"testing"
)

// FuzzParse feeds arbitrary YAML to the loader: it may refuse, never panic.
func FuzzParse(f *testing.F) {
	os.Setenv("TEST_STRIPE_SECRET", "whsec_x")
	os.Setenv("TEST_GITHUB_SECRET", "y")
	f.Add([]byte(stripeYAML))
	f.Add([]byte("providers:\n  - name: a\n    scheme: hmac\n    secrets: [x]\n    hmac: {header: X-Sig, encoding: base64, timestamp_header: X-Ts, template: \"{timestamp}.{body}\", id_header: X-Id}\n"))
	f.Add([]byte("providers:\n  - name: a\n    scheme: standard\n    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]\nusage:\n  - type: t\n    customer: {path: a.b}\n    meter: {value: m}\n    quantity: 1.5\n    properties: {region: data.region}\n"))
	f.Add([]byte("{}"))
	f.Add([]byte("- [a, b]\n"))
	f.Add([]byte("providers: &a [*a]\n"))
	dir := f.TempDir() // once: a directory per input would dominate the run
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := Parse(src, dir)
		if err == nil && len(c.Providers) == 0 {
			t.Fatal("accepted a config without providers")
		}
	})
}
