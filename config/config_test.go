package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const stripeYAML = `listen: 127.0.0.1:8081
data: /var/lib/hookledger
providers:
  - name: stripe
    scheme: stripe
    secrets:
      - ${TEST_STRIPE_SECRET}
      - secret_file: stripe.secret
    tolerance: 2m
  - name: github
    scheme: github
    secrets: ["${TEST_GITHUB_SECRET}"]
    max_body: 1048576
    max_depth: 32
meters:
  - name: api_requests
    unit: requests
usage:
  - provider: stripe
    type: billing.meter_event
    customer: data.object.customer
    meter: {value: api_requests}
    quantity: data.object.value
    occurred_at: created
`

func TestParseValidConfig(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "stripe.secret"), []byte("whsec_from_file\n"), 0o600)
	t.Setenv("TEST_STRIPE_SECRET", "whsec_from_env")
	t.Setenv("TEST_GITHUB_SECRET", "gh-secret: with # yaml chars")
	c, err := Parse([]byte(stripeYAML), dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8081" || c.Data != "/var/lib/hookledger" || c.DBPath() != "/var/lib/hookledger/hookledger.db" {
		t.Errorf("listen/data = %q %q", c.Listen, c.Data)
	}
	s := c.Providers[0]
	if s.Secrets[0].Value != "whsec_from_env" || s.Secrets[1].Value != "whsec_from_file" {
		t.Errorf("secrets not resolved: %q %q", s.Secrets[0].Value, s.Secrets[1].Value)
	}
	if s.Tolerance.Duration != 2*time.Minute || s.MaxBody != DefaultMaxBody || s.MaxDepth != DefaultMaxDepth {
		t.Errorf("stripe tolerance %v max_body %d max_depth %d", s.Tolerance, s.MaxBody, s.MaxDepth)
	}
	g := c.Providers[1]
	if g.Secrets[0].Value != "gh-secret: with # yaml chars" || g.Tolerance.Duration != DefaultTolerance || g.MaxBody != 1<<20 || g.MaxDepth != 32 {
		t.Errorf("github = %+v", g)
	}
	m := c.Usage[0]
	if m.Meter.Value != "api_requests" || m.Customer.Path != "data.object.customer" || m.OccurredAt.Path != "created" {
		t.Errorf("mapping = %+v", m)
	}
	if strings.Contains(strings.Join([]string{s.Secrets[0].String()}, ""), "whsec") {
		t.Errorf("Secret.String leaks the secret")
	}
}

// Every mistake names the line and the key.
func TestConfigErrorsNameLineAndKey(t *testing.T) {
	t.Setenv("TEST_STRIPE_SECRET", "whsec_x")
	t.Setenv("TEST_EMPTY", "")
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"unknown top-level key", "listen: :1\nlisten_addr: :2\nproviders: []\n", []string{"2:", "listen_addr"}},
		{"unknown provider key", "providers:\n  - name: a\n    scheme: github\n    secret: x\n", []string{"4:", "secret"}},
		{"no providers", "listen: :1\n", []string{"providers", "at least one"}},
		{"missing secrets", "providers:\n  - name: a\n    scheme: github\n", []string{"2:", "providers[0].secrets", "at least one secret"}},
		{"unset env var", "providers:\n  - name: a\n    scheme: github\n    secrets: [\"${TEST_NOT_SET_ANYWHERE}\"]\n", []string{"4:", "TEST_NOT_SET_ANYWHERE", "not set"}},
		{"empty env var", "providers:\n  - name: a\n    scheme: github\n    secrets: [\"${TEST_EMPTY}\"]\n", []string{"4:", "providers[0].secrets[0]", "empty"}},
		{"missing secret file", "providers:\n  - name: a\n    scheme: github\n    secrets:\n      - secret_file: /nonexistent/s\n", []string{"5:", "secret_file", "no such file"}},
		{"bad standard secret", "providers:\n  - name: a\n    scheme: standard\n    secrets: [\"whsec_%%%\"]\n", []string{"4:", "secrets[0]", "standard"}},
		{"unknown scheme", "providers:\n  - name: a\n    scheme: paypal\n    secrets: [x]\n", []string{"3:", "scheme", "stripe"}},
		{"bad provider name", "providers:\n  - name: My Provider\n    scheme: github\n    secrets: [x]\n", []string{"2:", "name"}},
		{"duplicate provider", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\n  - name: a\n    scheme: github\n    secrets: [y]\n", []string{"5:", "twice"}},
		{"bad tolerance", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\n    tolerance: soon\n", []string{"5:", "tolerance"}},
		{"bad path", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - type: t\n    customer: $.data.customer\n    meter: m\n    quantity: q\n", []string{"7:", "usage[0].customer", "gjson"}},
		{"wildcard path", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - type: t\n    customer: data.*\n    meter: m\n    quantity: q\n", []string{"7:", "usage[0].customer", "gjson syntax"}},
		{"negative max_depth", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\n    max_depth: -1\n", []string{"5:", "providers[0].max_depth", "between 1 and 1024"}},
		{"max_depth over the limit", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\n  - name: b\n    scheme: github\n    secrets: [x]\n    max_depth: 5000\n", []string{"8:", "providers[1].max_depth", "between 1 and 1024, got 5000"}},
		{"hmac id_path with a query", "providers:\n  - name: a\n    scheme: hmac\n    secrets: [x]\n    hmac: {header: X-Sig, id_path: \"events.#.id\"}\n", []string{"3:", "providers[0].scheme", "hmac.id_path", "gjson syntax"}},
		{"empty path segment", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - type: t\n    customer: c\n    meter: m\n    quantity: data..q\n", []string{"9:", "usage[0].quantity", "empty segment"}},
		{"mapping without type", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - customer: c\n    meter: m\n    quantity: q\n", []string{"6:", "usage[0].type", "required"}},
		{"mapping missing quantity", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - type: t\n    customer: c\n    meter: m\n", []string{"6:", "usage[0].quantity", "required"}},
		{"bad constant quantity", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - type: t\n    customer: c\n    meter: m\n    quantity: {value: lots}\n", []string{"9:", "usage[0].quantity"}},
		{"mapping for unknown provider", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - provider: b\n    type: t\n    customer: c\n    meter: m\n    quantity: q\n", []string{"6:", "usage[0].provider", "\"b\""}},
		{"undeclared meter", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nmeters:\n  - name: x\nusage:\n  - type: t\n    customer: c\n    meter: {value: y}\n    quantity: q\n", []string{"10:", "usage[0].meter", "not declared"}},
		{"path and value", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - type: t\n    customer: {path: a, value: b}\n    meter: m\n    quantity: q\n", []string{"7:", "usage[0].customer", "exactly one"}},
		{"list as field", "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\nusage:\n  - type: t\n    customer: c\n    meter: [m]\n    quantity: q\n", []string{"8:", "usage[0].meter"}},
		{"secret as a map", "providers:\n  - name: a\n    scheme: github\n    secrets:\n      - file: x\n", []string{"5:", "secrets[0]", "secret_file"}},
		{"hmac options on stripe", "providers:\n  - name: a\n    scheme: stripe\n    secrets: [x]\n    hmac: {header: X-Sig}\n", []string{"providers[0]", "hmac"}},
		{"not yaml", "providers: [\n", []string{"1:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml), t.TempDir())
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hookledger.yml")
	os.WriteFile(path, []byte("bogus: 1\n"), 0o600)
	_, err := Load(path)
	if err == nil || !strings.HasPrefix(err.Error(), path+":") {
		t.Errorf("error %v does not start with the file name", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yml")); err == nil {
		t.Error("missing file: no error")
	}
}

func TestDefaultGeneratesSecretOnceWithPrivatePermissions(t *testing.T) {
	t.Setenv("HOOKLEDGER_SECRET", "")
	dir := filepath.Join(t.TempDir(), "data")
	c, generated, err := Default(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(generated, "whsec_") || c.Providers[0].Secrets[0].Value != generated {
		t.Fatalf("generated %q, provider secret %q", generated, c.Providers[0].Secrets[0].Value)
	}
	fi, err := os.Stat(filepath.Join(dir, SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("secret file mode %v, want 0600", fi.Mode().Perm())
	}
	c2, again, err := Default(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again != "" || c2.Providers[0].Secrets[0].Value != generated {
		t.Errorf("second start generated %q / used %q, want the stored secret and nothing printed", again, c2.Providers[0].Secrets[0].Value)
	}
	if c.Providers[0].Name != "default" || c.Providers[0].Scheme != "standard" || c.Usage[0].Type != "usage.recorded" || c.DBPath() != filepath.Join(dir, "hookledger.db") {
		t.Errorf("default config = %+v", c)
	}
}

func TestDefaultTakesSecretFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOOKLEDGER_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	c, generated, err := Default(dir)
	if err != nil || generated != "" || c.Providers[0].Secrets[0].Value != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Fatalf("err %v generated %q", err, generated)
	}
	if _, err := os.Stat(filepath.Join(dir, SecretFile)); !os.IsNotExist(err) {
		t.Errorf("a secret file was written although HOOKLEDGER_SECRET is set")
	}
	t.Setenv("HOOKLEDGER_SECRET", "not base64 !!")
	if _, _, err := Default(dir); err == nil || !strings.Contains(err.Error(), "HOOKLEDGER_SECRET") {
		t.Errorf("bad HOOKLEDGER_SECRET: err = %v", err)
	}
}

// A command that only reads the database loads the config without the
// secrets it cannot resolve; serve (Load) still refuses them, naming the line.
func TestLoadSecretsOptionalLeavesOutUnresolvableSecrets(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookledger.yml")
	os.WriteFile(path, []byte(`data: ${TEST_DATA_DIR}
providers:
  - name: stripe
    scheme: stripe
    secrets: ["${TEST_UNSET_STRIPE_SECRET}", "whsec_ok"]
  - name: github
    scheme: github
    secrets: [{secret_file: missing.secret}]
admin:
  tokens: ["${TEST_UNSET_ADMIN_TOKEN}"]
meters:
  - name: api
`), 0o600)
	t.Setenv("TEST_DATA_DIR", "/srv/hl")
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "hookledger.yml:5: providers[0].secrets[0]: environment variable TEST_UNSET_STRIPE_SECRET is not set") {
		t.Fatalf("Load: %v, want the unset variable with its line", err)
	}
	c, err := LoadSecretsOptional(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Data != "/srv/hl" || len(c.Meters) != 1 || len(c.Providers[0].Secrets) != 1 || c.Providers[0].Secrets[0].Value != "whsec_ok" ||
		len(c.Providers[1].Secrets) != 0 || len(c.Admin.Tokens) != 0 {
		t.Fatalf("LoadSecretsOptional: %+v", c)
	}
	want := []string{"5: providers[0].secrets[0]: environment variable TEST_UNSET_STRIPE_SECRET is not set",
		"8: providers[1].secrets[0]: secret_file:", "10: admin.tokens[0]: environment variable TEST_UNSET_ADMIN_TOKEN is not set"}
	if len(c.Unresolved) != len(want) {
		t.Fatalf("Unresolved = %q", c.Unresolved)
	}
	for i, w := range want {
		if !strings.HasPrefix(c.Unresolved[i], w) {
			t.Errorf("Unresolved[%d] = %q, want %q…", i, c.Unresolved[i], w)
		}
	}
	// Outside secrets an unset variable is still an error: it could change where data lives.
	os.Unsetenv("TEST_DATA_DIR")
	if _, err := LoadSecretsOptional(path); err == nil || !strings.Contains(err.Error(), "1: environment variable TEST_DATA_DIR") {
		t.Fatalf("LoadSecretsOptional with data unset: %v", err)
	}
}

// An unknown key is named with its line and path, and the key of that place
// it most likely meant, if one is close.
func TestUnknownFieldNamesTheKeyMeant(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"providers:\n  - name: a\n    scheme: standard\n    secret: [\"x\"]\n", `4: providers[0].secret: unknown field (did you mean "secrets"?)`},
		{"provider:\n  - name: a\n", `1: provider: unknown field (did you mean "providers"?)`},
		{"listen: :8080\nlisten_admin: x\n", `2: listen_admin: unknown field`},
		{"usage:\n  - type: t\n    customr: data.c\n", `3: usage[0].customr: unknown field (did you mean "customer"?)`},
	} {
		_, err := Parse([]byte(c.yaml), t.TempDir())
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}

// A relative data directory means the same wherever a command runs: it is
// relative to the config file, like secret_file; and a file without listen
// serves on loopback only.
func TestFileRelativeDataAndLoopbackListen(t *testing.T) {
	dir := t.TempDir()
	src := "providers:\n  - name: a\n    scheme: github\n    secrets: [x]\n"
	for _, tc := range []struct{ data, want string }{
		{"", filepath.Join(dir, "data")},
		{"data: ./state\n", filepath.Join(dir, "state")},
		{"data: ../elsewhere\n", filepath.Join(filepath.Dir(dir), "elsewhere")},
		{"data: /var/lib/hookledger\n", "/var/lib/hookledger"},
	} {
		path := filepath.Join(dir, "hookledger.yml")
		if err := os.WriteFile(path, []byte(src+tc.data), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Chdir(t.TempDir()) // another working directory
		c, err := Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if c.Data != tc.want || c.DBPath() != filepath.Join(tc.want, "hookledger.db") {
			t.Errorf("%q: data %s (database %s), want %s", tc.data, c.Data, c.DBPath(), tc.want)
		}
		if c.Listen != "127.0.0.1:8080" || !c.ListenDefaulted {
			t.Errorf("listen %q (defaulted %v), want loopback", c.Listen, c.ListenDefaulted)
		}
	}
	c, err := Parse([]byte(src+"listen: \":9000\"\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":9000" || c.ListenDefaulted {
		t.Errorf("a stated listen: %q (defaulted %v)", c.Listen, c.ListenDefaulted)
	}
	def, err := DefaultSecretsOptional(DefaultData)
	if err != nil {
		t.Fatal(err)
	}
	if def.Listen != DefaultListen || def.Data != DefaultData {
		t.Errorf("the embedded default: listen %q data %q, want %q %q", def.Listen, def.Data, DefaultListen, DefaultData)
	}
}
