package config

import (
	"cmp"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hookledger/hookledger/scheme"
)

// Reconcile and retention defaults.
const (
	DefaultReconcileWindow  = 72 * time.Hour
	DefaultReconcileOverlap = 15 * time.Minute
	// MinReconcileOverlap is the least overlap between two reconcile windows.
	// It must exceed any clock skew between this host and the provider, or an
	// event stamped by the provider just before the previous window's end can
	// fall between two windows and never be looked at.
	MinReconcileOverlap  = time.Minute
	DefaultPruneInterval = time.Hour
	DefaultStripeBaseURL = "https://api.stripe.com"
	DefaultGitHubBaseURL = "https://api.github.com"
)

// Retention bounds storage. Raw bodies go after Payload; the receipt itself
// (provider, event id, body digest, times: the tombstone that makes a late
// redelivery a duplicate) goes after Keys. Zero keeps forever. Ledger rows
// are never pruned.
type Retention struct {
	Payload  Duration `yaml:"payload"`
	Keys     Duration `yaml:"keys"`
	Interval Duration `yaml:"interval"` // how often serve prunes; default 1h when payload or keys is set
	// Delivered is how long a delivered outbox message (and its attempts)
	// is kept after its delivery; pending and dead ones are never pruned,
	// nor the receipts they forward. Zero keeps them (until retention.keys
	// deletes their receipt).
	Delivered Duration `yaml:"delivered"`
}

// Enabled reports whether anything is ever pruned.
func (r Retention) Enabled() bool {
	return r.Payload.Duration > 0 || r.Keys.Duration > 0 || r.Delivered.Duration > 0
}

// Reconcile configures how hookledger lists a provider's events to find the
// ones its webhooks missed.
type Reconcile struct {
	// Source is stripe (the events API), github (the webhook deliveries API)
	// or file (a JSONL file, one raw event per line). Default: the source
	// the scheme names (scheme.Reconcilable: stripe and github do).
	Source  string `yaml:"source"`
	BaseURL string `yaml:"base_url"`
	APIKey  Secret `yaml:"api_key"` // stripe secret key or GitHub token, sent as a Bearer token
	// GitHub: the hook is a repository's (repo: owner/name) or an organization's (org: name).
	Repo   string `yaml:"repo"`
	Org    string `yaml:"org"`
	HookID int64  `yaml:"hook_id"`
	// File source: the path and where each event keeps its id, type and time
	// (gjson paths; defaults id, type, created).
	File     string `yaml:"file"`
	IDPath   string `yaml:"id_path"`
	TypePath string `yaml:"type_path"`
	TimePath string `yaml:"time_path"`
	// Types, when set, limits reconciliation to these event types (the ones
	// the webhook endpoint is subscribed to).
	Types []string `yaml:"types"`

	Window   Duration `yaml:"window"`   // how far back a run looks at most; default 72h
	Overlap  Duration `yaml:"overlap"`  // how far a run re-reads before the previous one's end; default 15m
	Interval Duration `yaml:"interval"` // serve reconciles this often; unset: never (CLI only)
}

var (
	repoName = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$`)
	orgName  = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// Horizon is how long the provider may redeliver an event: replay_horizon,
// else the scheme's default (scheme.Redeliverer: stripe 30d, github 3d), else
// 0 (unknown).
func (p *Provider) Horizon() time.Duration {
	if p.ReplayHorizon.Duration > 0 {
		return p.ReplayHorizon.Duration
	}
	if r, ok := p.signatureScheme().(scheme.Redeliverer); ok {
		return r.ReplayHorizon()
	}
	return 0
}

// signatureScheme is the provider's scheme, or nil when its configuration
// names none that exists (resolve reports that).
func (p *Provider) signatureScheme() scheme.Scheme {
	s, err := scheme.New(p.Scheme, p.HMAC)
	if err != nil {
		return nil
	}
	return s
}

// resolveRetention validates retention and reconcile settings. It runs after
// the providers are resolved.
func (c *Config) resolveRetention(dir string) error {
	r := &c.Retention
	for _, d := range []struct {
		key string
		d   Duration
	}{{"payload", r.Payload}, {"keys", r.Keys}, {"interval", r.Interval}, {"delivered", r.Delivered}} {
		if err := d.d.Check(); err != nil {
			return errAt("retention."+d.key, "%v", err)
		}
	}
	if r.Keys.Duration > 0 && r.Payload.Duration > r.Keys.Duration {
		return errAt("retention.payload", "%s is longer than retention.keys (%s): a body is deleted with its receipt, so it cannot outlive its key",
			days(r.Payload.Duration), days(r.Keys.Duration))
	}
	if r.Interval.Duration == 0 {
		r.Interval.Duration = DefaultPruneInterval
	}
	for i := range c.Providers {
		p := &c.Providers[i]
		at := fmt.Sprintf("providers[%d]", i)
		if err := p.ReplayHorizon.Check(); err != nil {
			return errAt(at+".replay_horizon", "%v", err)
		}
		if keys := r.Keys.Duration; keys > 0 {
			h := p.Horizon()
			if h == 0 {
				return errAt(at+".replay_horizon", "required when retention.keys is set: how long %q may send an event again "+
					"(retries, manual resends); hookledger must remember each event id at least that long, or a late "+
					"redelivery would be taken as a new event and counted twice", p.Name)
			}
			if keys < h {
				return errAt("retention.keys", "%s is shorter than provider %q's replay horizon (%s): %q may redeliver an event "+
					"for up to %s, and once its id is forgotten a redelivery would be taken as a new event and counted twice. "+
					"Set retention.keys to at least %s", days(keys), p.Name, days(h), p.Name, days(h), days(h))
			}
		}
		if p.Reconcile != nil {
			// An unresolvable api_key is the last check LoadForReading may skip.
			if err := p.Reconcile.resolve(p, dir, at+".reconcile", r.Keys.Duration); err != nil && !c.leaveOut(err) {
				return err
			}
		}
	}
	return nil
}

// resolve checks a provider's reconcile: section: its source (the
// scheme's default), the windows, and what the source needs.
func (rc *Reconcile) resolve(p *Provider, dir, at string, keys time.Duration) error {
	if rc.Source == "" {
		r, ok := p.signatureScheme().(scheme.Reconcilable)
		if !ok {
			return errAt(at+".source", "required for scheme %s: stripe, github or file", p.Scheme)
		}
		rc.Source = r.ReconcileSource()
	}
	if err := rc.resolveWindows(at, keys); err != nil {
		return err
	}
	switch rc.Source {
	case "stripe":
		if err := rc.resolveURL(at, DefaultStripeBaseURL); err != nil {
			return err
		}
		if len(rc.Types) > 20 {
			return errAt(at+".types", "Stripe filters on at most 20 event types; list fewer, or none to reconcile every type")
		}
		return rc.resolveKey(dir, at)
	case "github":
		if err := rc.resolveURL(at, DefaultGitHubBaseURL); err != nil {
			return err
		}
		if err := rc.resolveGitHub(at); err != nil {
			return err
		}
		return rc.resolveKey(dir, at)
	case "file":
		return rc.resolveFile(dir, at)
	}
	return errAt(at+".source", "%q is not one of stripe, github, file", rc.Source)
}

// resolveWindows checks window, overlap and interval, and that the window
// stays within the dedupe keys' retention.
func (rc *Reconcile) resolveWindows(at string, keys time.Duration) error {
	for _, d := range []struct {
		key string
		d   Duration
	}{{"window", rc.Window}, {"overlap", rc.Overlap}, {"interval", rc.Interval}} {
		if err := d.d.Check(); err != nil {
			return errAt(at+"."+d.key, "%v", err)
		}
	}
	if rc.Window.Duration == 0 {
		rc.Window.Duration = DefaultReconcileWindow
	}
	if rc.Overlap.Duration == 0 {
		rc.Overlap.Duration = DefaultReconcileOverlap
	}
	switch {
	case rc.Overlap.Duration < MinReconcileOverlap:
		return errAt(at+".overlap", "%s is too short: consecutive windows must overlap by more than the clock skew "+
			"between this host and the provider (at least %s)", rc.Overlap.Duration, MinReconcileOverlap)
	case rc.Overlap.Duration >= rc.Window.Duration:
		return errAt(at+".overlap", "must be shorter than the window (%s)", rc.Window.Duration)
	case keys > 0 && rc.Window.Duration > keys:
		return errAt(at+".window", "%s is longer than retention.keys (%s): reconciling events whose ids were already "+
			"forgotten would insert them again", days(rc.Window.Duration), days(keys))
	}
	return nil
}

// resolveKey reads the source's API key, which it requires.
func (rc *Reconcile) resolveKey(dir, at string) error {
	if rc.APIKey.Value == "" && rc.APIKey.File == "" && !rc.APIKey.bad {
		return errAt(at+".api_key", "required for the %s source", rc.Source)
	}
	return rc.APIKey.read(dir, at+".api_key")
}

// resolveURL checks base_url (default def).
func (rc *Reconcile) resolveURL(at, def string) error {
	if rc.BaseURL == "" {
		rc.BaseURL = def
	}
	u, err := url.Parse(rc.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errAt(at+".base_url", "%q is not an http(s) URL", rc.BaseURL)
	}
	return nil
}

// resolveGitHub checks the repository or organization and the hook.
func (rc *Reconcile) resolveGitHub(at string) error {
	switch {
	case rc.Repo != "" && rc.Org != "":
		return errAt(at+".org", "set repo or org, not both")
	case rc.Repo != "" && !repoName.MatchString(rc.Repo):
		return errAt(at+".repo", "%q is not owner/name", rc.Repo)
	case rc.Org != "" && !orgName.MatchString(rc.Org):
		return errAt(at+".org", "%q is not an organization name", rc.Org)
	case rc.Repo == "" && rc.Org == "":
		return errAt(at+".repo", "required for the github source: owner/name of the repository whose hook to reconcile (or org)")
	case rc.HookID <= 0:
		return errAt(at+".hook_id", "required for the github source: the webhook's numeric id")
	}
	return nil
}

// resolveFile checks the file source: the file (relative to the
// configuration) and the paths of an event's id, type and time.
func (rc *Reconcile) resolveFile(dir, at string) error {
	if rc.File == "" {
		return errAt(at+".file", "required for the file source: a JSONL file with one raw event per line")
	}
	if !filepath.IsAbs(rc.File) {
		rc.File = filepath.Join(dir, rc.File)
	}
	rc.IDPath, rc.TypePath, rc.TimePath = cmp.Or(rc.IDPath, "id"), cmp.Or(rc.TypePath, "type"), cmp.Or(rc.TimePath, "created")
	return nil
}

// days prints a duration in whole days when it is one ("30d"), else as Go does.
func days(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}
