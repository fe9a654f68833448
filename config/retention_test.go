package config

import (
	"strings"
	"testing"
	"time"
)

const retentionBase = `providers:
  - name: stripe
    scheme: stripe
    secrets: ["whsec_x"]
%s
  - name: github
    scheme: github
    secrets: ["gh"]
%s
`

func parseRetention(t *testing.T, stripeExtra, githubExtra, tail string) (*Config, error) {
	t.Helper()
	return Parse([]byte(strings.Replace(strings.Replace(retentionBase, "%s", stripeExtra, 1), "%s", githubExtra, 1)+tail), t.TempDir())
}

func TestKeysShorterThanHorizonIsRefused(t *testing.T) {
	_, err := parseRetention(t, "", "", "retention:\n  payload: 7d\n  keys: 14d\n")
	if err == nil {
		t.Fatal("accepted keys shorter than Stripe's 30-day horizon")
	}
	msg := err.Error()
	for _, want := range []string{
		"retention.keys: 14d is shorter than provider \"stripe\"'s replay horizon (30d)",
		"a redelivery would be taken as a new event and counted twice",
		"at least 30d",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if !strings.HasPrefix(msg, "12: ") {
		t.Errorf("message does not point at the keys line: %q", msg)
	}
}

func TestRetentionAndReconcileSettings(t *testing.T) {
	c, err := parseRetention(t,
		"    reconcile:\n      api_key: sk_test_1\n      interval: 10m",
		"    replay_horizon: 5d\n    reconcile:\n      api_key: ghp_1\n      repo: acme/app\n      hook_id: 7\n      window: 2d\n      overlap: 30m",
		"retention:\n  payload: 30d\n  keys: 35d\n")
	if err != nil {
		t.Fatal(err)
	}
	day := 24 * time.Hour
	if c.Retention.Payload.Duration != 30*day || c.Retention.Keys.Duration != 35*day || c.Retention.Interval.Duration != DefaultPruneInterval {
		t.Errorf("retention %+v", c.Retention)
	}
	s, g := c.Providers[0], c.Providers[1]
	if s.Horizon() != 30*day || g.Horizon() != 5*day {
		t.Errorf("horizons %v %v", s.Horizon(), g.Horizon())
	}
	if r := s.Reconcile; r.Source != "stripe" || r.BaseURL != DefaultStripeBaseURL || r.APIKey.Value != "sk_test_1" ||
		r.Window.Duration != DefaultReconcileWindow || r.Overlap.Duration != DefaultReconcileOverlap || r.Interval.Duration != 10*time.Minute {
		t.Errorf("stripe reconcile %+v", r)
	}
	if r := g.Reconcile; r.Source != "github" || r.BaseURL != DefaultGitHubBaseURL || r.Repo != "acme/app" || r.HookID != 7 ||
		r.Window.Duration != 2*day || r.Overlap.Duration != 30*time.Minute {
		t.Errorf("github reconcile %+v", r)
	}
}

func TestRetentionConfigErrors(t *testing.T) {
	for name, tc := range map[string]struct{ stripe, github, tail, want string }{
		"payload longer than keys": {"", "", "retention:\n  payload: 60d\n  keys: 30d\n",
			"retention.payload: 60d is longer than retention.keys (30d)"},
		"bad duration": {"", "", "retention:\n  keys: 30 days\n", `retention.keys: invalid duration "30 days"`},
		"negative":     {"", "", "retention:\n  payload: -1h\n", "retention.payload: must not be negative"},
		"github horizon": {"", "    replay_horizon: 40d", "retention:\n  keys: 35d\n",
			`retention.keys: 35d is shorter than provider "github"'s replay horizon (40d)`},
		"stripe without key": {"    reconcile:\n      window: 1d", "", "", "providers[0].reconcile.api_key: required for the stripe source"},
		"github without hook": {"", "    reconcile:\n      api_key: t\n      repo: acme/app", "",
			"providers[1].reconcile.hook_id: required"},
		"github without repo": {"", "    reconcile:\n      api_key: t\n      hook_id: 1", "", "providers[1].reconcile.repo: required"},
		"github bad repo": {"", "    reconcile:\n      api_key: t\n      repo: acme\n      hook_id: 1", "",
			`providers[1].reconcile.repo: "acme" is not owner/name`},
		"github repo and org": {"", "    reconcile:\n      api_key: t\n      repo: a/b\n      org: a\n      hook_id: 1", "",
			"set repo or org, not both"},
		"overlap too short": {"    reconcile:\n      api_key: k\n      overlap: 5s", "", "",
			"providers[0].reconcile.overlap: 5s is too short: consecutive windows must overlap by more than the clock skew"},
		"overlap not shorter than window": {"    reconcile:\n      api_key: k\n      window: 1h\n      overlap: 1h", "", "",
			"must be shorter than the window"},
		"window longer than keys": {"    reconcile:\n      api_key: k\n      window: 40d", "", "retention:\n  keys: 35d\n",
			"providers[0].reconcile.window: 40d is longer than retention.keys (35d)"},
		"bad base url":   {"    reconcile:\n      api_key: k\n      base_url: ftp://x", "", "", `base_url: "ftp://x" is not an http(s) URL`},
		"unknown source": {"    reconcile:\n      source: sftp", "", "", `reconcile.source: "sftp" is not one of stripe, github, file`},
		"too many stripe types": {"    reconcile:\n      api_key: k\n      types: [a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r,s,t,u]", "", "",
			"providers[0].reconcile.types: Stripe filters on at most 20 event types"},
		"file without path": {"    reconcile:\n      source: file", "", "", "reconcile.file: required for the file source"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := parseRetention(t, tc.stripe, tc.github, tc.tail)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v\nwant %q", err, tc.want)
			}
		})
	}
}

func TestOtherSchemesNeedAHorizonWhenKeysAreSet(t *testing.T) {
	src := "providers:\n  - name: shop\n    scheme: shopify\n    secrets: [\"s\"]\nretention:\n  keys: 30d\n"
	_, err := Parse([]byte(src), t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "providers[0].replay_horizon: required when retention.keys is set") ||
		!strings.Contains(err.Error(), "counted twice") {
		t.Fatalf("err %v", err)
	}
	if _, err := Parse([]byte(strings.Replace(src, "secrets", "replay_horizon: 2d\n    secrets", 1)), t.TempDir()); err != nil {
		t.Errorf("with a horizon: %v", err)
	}
	// Without keys retention nothing is forgotten, so no horizon is needed.
	if _, err := Parse([]byte(strings.Replace(src, "  keys: 30d\n", "  payload: 30d\n", 1)), t.TempDir()); err != nil {
		t.Errorf("payload-only retention: %v", err)
	}
}
