package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const destProviders = "providers:\n  - name: stripe\n    scheme: stripe\n    secrets: [whsec_x]\n"

func TestDestinations(t *testing.T) {
	t.Setenv("TEST_DEST_SECRET", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	src := destProviders + `destinations:
  - name: app
    url: https://app.internal/hooks
    secrets: ["${TEST_DEST_SECRET}", "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"]
    events: {providers: [stripe], types: ["invoice.*", customer.created]}
    timeout: 2s
    max_attempts: 5
    max_age: 1d
    rate_limit: {per_second: 20}
  - name: all
    url: http://127.0.0.1:9999/
    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]
  - name: wide
    url: http://127.0.0.1:9999/
    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]
    concurrency: 200
  - name: fixed
    url: http://127.0.0.1:9999/
    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]
    concurrency: 16
    max_concurrency: 16
`
	c, err := Parse([]byte(src), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	app, all := c.Destinations[0], c.Destinations[1]
	if app.Secrets[0].Value != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" || len(app.Secrets) != 2 {
		t.Errorf("secrets %v", app.Secrets)
	}
	if app.Timeout.Duration != 2*time.Second || app.MaxAttempts != 5 || app.MaxAge.Duration != 24*time.Hour ||
		app.RateLimit.PerSecond != 20 || app.RateLimit.Burst != 1 || app.Concurrency != DefaultForwardConcurrency {
		t.Errorf("app = %+v", app)
	}
	if all.Timeout.Duration != DefaultForwardTimeout || all.MaxAttempts != DefaultForwardMaxAttempts ||
		all.MaxAge.Duration != DefaultForwardMaxAge || all.Backoff.Duration != DefaultForwardBackoff || all.MaxBackoff.Duration != DefaultForwardMaxBackoff {
		t.Errorf("defaults = %+v", all)
	}
	// max_concurrency: 128 by default, or concurrency when that is higher;
	// equal to concurrency, a fixed limit.
	for _, d := range []struct {
		d         Destination
		floor, to int
	}{{app, DefaultForwardConcurrency, DefaultForwardMaxConcurrency}, {c.Destinations[2], 200, 200}, {c.Destinations[3], 16, 16}} {
		if d.d.Concurrency != d.floor || d.d.MaxConcurrency != d.to {
			t.Errorf("%s: concurrency %d, max_concurrency %d; want %d and %d", d.d.Name, d.d.Concurrency, d.d.MaxConcurrency, d.floor, d.to)
		}
	}
	for _, m := range []struct {
		d             *Destination
		provider, typ string
		want          bool
	}{
		{&app, "stripe", "invoice.paid", true},
		{&app, "stripe", "customer.created", true},
		{&app, "stripe", "customer.deleted", false},
		{&app, "github", "invoice.paid", false},
		{&all, "github", "push", true},
		{&all, "stripe", "", true},
	} {
		if got := m.d.Matches(m.provider, m.typ); got != m.want {
			t.Errorf("%s matches %s/%s = %v, want %v", m.d.Name, m.provider, m.typ, got, m.want)
		}
	}
}

// Every mistake in destinations: names the file's line and the key.
func TestDestinationErrorsNameLineAndKey(t *testing.T) {
	const sec = "    secrets: [whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw]\n"
	d := func(lines string) string {
		return destProviders + "destinations:\n  - name: app\n    url: https://a/\n" + lines
	}
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"bad name", destProviders + "destinations:\n  - name: My App\n    url: https://a/\n" + sec, []string{"6:", "destinations[0].name"}},
		{"twice", d(sec) + "  - name: app\n    url: https://b/\n" + sec, []string{"9:", "destinations[1].name", "twice"}},
		{"no url", destProviders + "destinations:\n  - name: app\n" + sec, []string{"6:", "destinations[0].url"}},
		{"ftp url", destProviders + "destinations:\n  - name: app\n    url: ftp://a/\n" + sec, []string{"7:", "destinations[0].url", "http"}},
		{"no secrets", d(""), []string{"6:", "destinations[0].secrets", "at least one"}},
		{"bad secret", d("    secrets: [\"whsec_%%%\"]\n"), []string{"8:", "destinations[0].secrets[0]", "Standard Webhooks"}},
		{"unset secret", d("    secrets: [\"${TEST_DEST_UNSET}\"]\n"), []string{"8:", "TEST_DEST_UNSET", "not set"}},
		{"unknown provider", d(sec + "    events: {providers: [github]}\n"), []string{"9:", "destinations[0].events.providers[0]", "github"}},
		{"bad pattern", d(sec + "    events:\n      types: [\"invoice.[\"]\n"), []string{"10:", "destinations[0].events.types[0]", "pattern"}},
		{"bad timeout", d(sec + "    timeout: soon\n"), []string{"9:", "destinations[0].timeout"}},
		{"negative attempts", d(sec + "    max_attempts: -1\n"), []string{"9:", "destinations[0].max_attempts"}},
		{"bad max_age", d(sec + "    max_age: 3x\n"), []string{"9:", "destinations[0].max_age"}},
		{"max_backoff below backoff", d(sec + "    backoff: 1m\n    max_backoff: 1s\n"), []string{"10:", "destinations[0].max_backoff", "shorter"}},
		{"negative concurrency", d(sec + "    concurrency: -1\n"), []string{"9:", "destinations[0].concurrency", "positive"}},
		{"negative max_concurrency", d(sec + "    max_concurrency: -4\n"), []string{"9:", "destinations[0].max_concurrency", "positive"}},
		{"max_concurrency below concurrency", d(sec + "    concurrency: 16\n    max_concurrency: 8\n"),
			[]string{"10:", "destinations[0].max_concurrency", "8 is below concurrency (16)"}},
		{"max_concurrency below the default concurrency", d(sec + "    max_concurrency: 4\n"),
			[]string{"9:", "destinations[0].max_concurrency", "4 is below concurrency (8)"}},
		{"rate limit zero", d(sec + "    rate_limit: {per_second: 0}\n"), []string{"9:", "destinations[0].rate_limit.per_second"}},
		{"unknown key", d(sec + "    retries: 3\n"), []string{"9:", "retries"}},
		{"bad delivered retention", destProviders + "retention:\n  delivered: forever\n", []string{"6:", "retention.delivered"}},
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
	path := filepath.Join(t.TempDir(), "hookledger.yml")
	os.WriteFile(path, []byte(d("")), 0o600)
	if _, err := Load(path); err == nil || !strings.HasPrefix(err.Error(), path+":6:") {
		t.Errorf("Load: %v, want the file and line first", err)
	}
}
