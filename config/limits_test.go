package config

import (
	"strings"
	"testing"
	"time"
)

const limitsBase = `providers:
  - name: acme
    scheme: github
    secrets: [s3cret]
    max_body: 1048576
`

func TestLimitsDefaults(t *testing.T) {
	c, err := Parse([]byte(limitsBase), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits != (Limits{MaxConnections: DefaultMaxConnections, BodyBudget: DefaultBodyBudget, BodyTimeout: Duration{Duration: DefaultBodyTimeout}}) {
		t.Errorf("defaults: %+v", c.Limits)
	}
	c, err = Parse([]byte(limitsBase+"limits:\n  max_connections: 100\n  body_budget: 2097152\n  body_timeout: 3s\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.MaxConnections != 100 || c.Limits.BodyBudget != 2<<20 || c.Limits.BodyTimeout.Duration != 3*time.Second {
		t.Errorf("set: %+v", c.Limits)
	}
}

func TestLimitsErrorsNameLineAndKey(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"limits:\n  max_connections: -1\n", "7: limits.max_connections: must be positive"},
		{"limits:\n  body_budget: -5\n", "7: limits.body_budget: must be positive"},
		{"limits:\n  body_budget: 65536\n", "7: limits.body_budget: 65536 bytes is less than providers[0].max_body (1048576)"},
		{"limits:\n  body_timeout: soon\n", `7: limits.body_timeout: invalid duration "soon"`},
		{"limits:\n  body_timeout: -1s\n", "7: limits.body_timeout: must not be negative"},
		{"limits:\n  max_conns: 5\n", `7: limits.max_conns: unknown field`},
		{"limits:\n  max_conections: 5\n", `7: limits.max_conections: unknown field (did you mean "max_connections"?)`},
	} {
		_, err := Parse([]byte(limitsBase+c.yaml), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}
