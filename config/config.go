// Package config loads hookledger.yml: providers and their secrets, usage
// mappings and meters. Every mistake is a startup error that names the key and
// the line, because a webhook receiver that starts with a wrong secret silently
// rejects (or worse, accepts) real traffic.
package config

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"

	"github.com/hookledger/hookledger/durable"
	"github.com/hookledger/hookledger/entitle"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/payload"
	"github.com/hookledger/hookledger/pricing"
	"github.com/hookledger/hookledger/scheme"
)

// AlertProvider is the provider of the events hookledger raises itself
// (usage.threshold_crossed): destinations route them like any other, and
// no webhook provider may take the name.
const AlertProvider = entitle.AlertProvider

// Defaults.
const (
	DefaultListen = ":8080"
	DefaultData   = "./data"
	// FileDefaultListen is where a configuration file that leaves listen
	// out serves: loopback. Exposing the listener is a choice the file
	// states (listen: ":8080"); the embedded default keeps DefaultListen.
	FileDefaultListen = "127.0.0.1:8080"
	DefaultTolerance  = 5 * time.Minute
	DefaultMaxBody    = 256 << 10
	// DefaultMaxDepth is the deepest nesting of arrays and objects a body may have; providers'
	// events nest under 10 levels, and a hostile body is refused before it costs anything.
	DefaultMaxDepth = 128
	// DefaultFile is read when no --config is given and it exists.
	DefaultFile = "hookledger.yml"

	// Durability values.
	DurabilityLocal   = "local"
	DurabilityReplica = "replica"
)

// Config is the whole hookledger.yml.
type Config struct {
	Listen    string           `yaml:"listen"`
	Data      string           `yaml:"data"`
	Providers []Provider       `yaml:"providers"`
	Usage     []ledger.Mapping `yaml:"usage"`
	Meters    []Meter          `yaml:"meters"`
	// Plans are the price versions invoices are priced with (plans.go).
	Plans     []pricing.Plan `yaml:"plans"`
	Customers Customers      `yaml:"customers"`
	Admin     Admin          `yaml:"admin"`
	Retention Retention      `yaml:"retention"` // see retention.go
	Limits    Limits         `yaml:"limits"`    // see limits.go
	// Destinations receive every matching accepted event (destinations.go).
	Destinations []Destination `yaml:"destinations"`
	// Stripe pushes the meters with stripe settings to Stripe (stripe.go).
	Stripe *Stripe `yaml:"stripe"`
	Ingest Ingest  `yaml:"ingest"` // see ingest.go
	// Invoicing lets serve close periods itself (invoicing.go).
	Invoicing Invoicing `yaml:"invoicing"`
	// Credits watches prepaid credit: its alerts (credits.go).
	Credits Credits `yaml:"credits"`
	// Durability is when a delivery is acknowledged: "local" (default) once
	// its commit is on local disk, "replica" once Litestream's replica holds
	// it too (needs litestream.yml; same as serve --ack-after-replica), or on
	// PostgreSQL once a synchronous standby has applied it.
	Durability string `yaml:"durability"`
	// Database is a PostgreSQL database's URL; unset, the SQLite file in
	// Data (see database.go).
	Database Secret `yaml:"database"`

	// Catalog indexes Plans by name and date (set by resolve).
	Catalog *pricing.Catalog `yaml:"-"`

	// ListenDefaulted is set when a file left listen out and got
	// FileDefaultListen, so serve can say so.
	ListenDefaulted bool `yaml:"-"`

	// Source is the file the config came from ("" for the embedded default).
	Source string `yaml:"-"`
	// Unresolved lists, for a config loaded with LoadSecretsOptional or
	// DefaultSecretsOptional, the secrets
	// that were left out because they could not be resolved (an unset
	// ${VAR}, an unreadable secret_file), each as "LINE: PATH: why".
	Unresolved []string `yaml:"-"`

	// lenient is LoadSecretsOptional's mode: unresolvable secrets are left out.
	lenient bool

	// The plans' limits of kind credit, while resolve checks them (credits.go).
	creditLimits      []creditLimit
	creditLimitValues map[[2]int]bool

	unsavedSecret string // see DefaultUnsaved
}

// Provider is one webhook sender, reachable at POST /webhooks/{name}.
type Provider struct {
	Name      string             `yaml:"name"`
	Scheme    string             `yaml:"scheme"`
	Secrets   []Secret           `yaml:"secrets"` // several during rotation; any may verify
	Tolerance Duration           `yaml:"tolerance"`
	MaxBody   int64              `yaml:"max_body"`  // bytes
	MaxDepth  int                `yaml:"max_depth"` // nesting of arrays and objects; deeper bodies get 400 too_deep
	HMAC      scheme.HMACOptions `yaml:"hmac"`
	// ReplayHorizon is how long the sender may deliver an event again
	// (default by scheme: stripe 30d, github 3d); retention.keys must cover it.
	ReplayHorizon Duration   `yaml:"replay_horizon"`
	Reconcile     *Reconcile `yaml:"reconcile"` // optional; see retention.go
}

// Admin configures the operator API (usage queries, metrics). It is served
// only when a token is set, and binds to loopback unless told otherwise.
type Admin struct {
	Listen string   `yaml:"listen"` // default 127.0.0.1:9090
	Tokens []Secret `yaml:"tokens"` // bearer tokens; HOOKLEDGER_ADMIN_TOKEN adds one
}

// AdminTokens lists the configured admin tokens plus HOOKLEDGER_ADMIN_TOKEN.
func (c *Config) AdminTokens() []string {
	var ts []string
	for _, t := range c.Admin.Tokens {
		ts = append(ts, t.Value)
	}
	if t := os.Getenv("HOOKLEDGER_ADMIN_TOKEN"); t != "" {
		ts = append(ts, t)
	}
	return ts
}

// Secret is a signing secret given inline (with ${ENV} expansion) or read from
// a file, e.g. a systemd credential or a Kubernetes secret mount.
type Secret struct {
	Value string `yaml:"-"`
	File  string `yaml:"secret_file"`
	bad   bool   // not a string or {secret_file}; reported with its line by read
}

// UnmarshalYAML accepts a plain string or {secret_file: PATH}.
func (s *Secret) UnmarshalYAML(unmarshal func(any) error) error {
	var v string
	if err := unmarshal(&v); err == nil {
		*s = Secret{Value: v}
		return nil
	}
	var f struct {
		File string `yaml:"secret_file"`
	}
	if err := unmarshal(&f); err != nil || f.File == "" {
		*s = Secret{bad: true}
		return nil
	}
	*s = Secret{File: f.File}
	return nil
}

// read expands ${ENV} in an inline secret, loads a secret_file (relative to
// dir) and rejects empty secrets. Secrets are resolved here rather than with
// the rest of the file, so a command that needs none (usage, verify) can load
// a config whose secrets live in variables it was not given.
func (s *Secret) read(dir, at string) error {
	if s.bad {
		return errAt(at, "a secret is a string or {secret_file: PATH}")
	}
	if s.File != "" {
		f := s.File
		if !filepath.IsAbs(f) {
			f = filepath.Join(dir, f)
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return &pathError{path: at, msg: fmt.Sprintf("secret_file: %v", err), unresolved: true}
		}
		s.Value = strings.TrimRight(string(b), "\r\n")
	} else if v, unset := expand(s.Value); unset != "" {
		return &pathError{path: at, msg: fmt.Sprintf("environment variable %s is not set", unset), unresolved: true}
	} else {
		s.Value = v
	}
	if s.Value == "" {
		return errAt(at, "secret is empty (is its environment variable or file empty?)")
	}
	return nil
}

// String never reveals the secret.
func (s Secret) String() string { return "[redacted]" }

// Meter declares a meter: name, aggregation (sum, count, max, min,
// unique_count of a property, latest, time_weighted, avg), unit label, the
// properties its rows keep and its dimensions. When any meter is declared, mappings may only produce declared meters.
type Meter = ledger.Meter

// MeterNames lists the declared meters.
func (c *Config) MeterNames() []string {
	names := make([]string, len(c.Meters))
	for i, m := range c.Meters {
		names[i] = m.Name
	}
	return names
}

// Load reads and validates a config file.
func Load(path string) (*Config, error) { return load(path, false) }

// LoadSecretsOptional is Load for commands that need no secret (usage, verify,
// replay) or can do without some (dispute reports a body it has no secret
// for as not verifiable): a secret
// that cannot be resolved (an unset ${VAR}, an unreadable secret_file) is left
// out and listed in Unresolved instead of failing the command. Everything
// else is validated as strictly as Load does.
func LoadSecretsOptional(path string) (*Config, error) { return load(path, true) }

func load(path string, lenient bool) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	c, err := parse(src, filepath.Dir(path), lenient)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	c.Source = path
	return c, nil
}

// Parse parses and validates config text; relative secret_file paths resolve
// against dir. Errors start with the line number ("12: providers[0]...").
func Parse(src []byte, dir string) (*Config, error) { return parse(src, dir, false) }

func parse(src []byte, dir string, lenient bool) (*Config, error) {
	file, err := parser.ParseBytes(src, 0)
	if err != nil {
		return nil, syntaxError(src, err)
	}
	if err := expandEnv(file); err != nil {
		return nil, err
	}
	c := &Config{lenient: lenient}
	if len(file.Docs) > 0 && file.Docs[0].Body != nil {
		if err := decode(file.Docs[0].Body, c); err != nil {
			return nil, err
		}
		c.noteCreditLimitValues(file)
	}
	if c.Listen == "" {
		c.Listen, c.ListenDefaulted = FileDefaultListen, true
	}
	// The data directory is relative to the file, like secret_file: the
	// same database wherever the command runs.
	if c.Data == "" {
		c.Data = "data"
	}
	if !filepath.IsAbs(c.Data) {
		c.Data = filepath.Join(dir, c.Data)
	}
	if err := c.resolve(dir); err != nil {
		var pe *pathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%d: %s: %s", lineOf(file, pe.path), pe.path, pe.msg)
		}
		return nil, err
	}
	for i, u := range c.Unresolved { // paths, until the lines are known here
		c.Unresolved[i] = fmt.Sprintf("%d: %s", lineOf(file, strings.SplitN(u, ":", 2)[0]), u)
	}
	return c, nil
}

// leaveOut reports whether a secret's error may be skipped: in lenient mode an
// unresolvable secret is recorded in Unresolved and left out.
func (c *Config) leaveOut(err error) bool {
	var pe *pathError
	if !c.lenient || !errors.As(err, &pe) || !pe.unresolved {
		return false
	}
	c.Unresolved = append(c.Unresolved, pe.Error())
	return true
}

// decode maps the AST onto c. The YAML library can panic on some malformed
// input (found by FuzzParse: a custom tag on a sequence), so a panic becomes
// an ordinary config error rather than a crash at startup.
func decode(body ast.Node, c *Config) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%d: cannot decode this YAML (%v)", body.GetToken().Position.Line, r)
		}
	}()
	if err := yaml.NodeToValue(body, c, yaml.DisallowUnknownField()); err != nil {
		var unknown *yaml.UnknownFieldError
		if errors.As(err, &unknown) && unknown.Token != nil {
			return unknownField(body, unknown)
		}
		return fmt.Errorf(" %s", yaml.FormatError(err, false, false))
	}
	return nil
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// secretPaths hold Secret values; their ${NAME}s are expanded by Secret.read.
var secretPaths = []string{"$.providers[*].secrets", "$.providers[*].reconcile.api_key", "$.admin.tokens", "$.destinations[*].secrets", "$.database"}

// expandEnv replaces ${NAME} in string values after parsing, so a value can
// never change the YAML structure, and an unset variable names its line.
// Secrets are left for Secret.read.
func expandEnv(file *ast.File) error {
	secret := map[ast.Node]bool{}
	for _, p := range secretPaths {
		yp, err := yaml.PathString(p)
		if err != nil {
			return err
		}
		if n, err := yp.FilterFile(file); err == nil && n != nil {
			ast.Walk(visitFunc(func(n ast.Node) { secret[n] = true }), n)
		}
	}
	var err error
	for _, doc := range file.Docs {
		ast.Walk(visitFunc(func(n ast.Node) {
			s, ok := n.(*ast.StringNode)
			if !ok || err != nil || secret[n] || !strings.Contains(s.Value, "${") {
				return
			}
			v, unset := expand(s.Value)
			if unset != "" {
				err = fmt.Errorf("%d: environment variable %s is not set", s.GetToken().Position.Line, unset)
			}
			s.Value = v
		}), doc)
	}
	return err
}

// expand replaces each ${NAME} in s; unset is the first variable not set.
func expand(s string) (v, unset string) {
	v = envRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := os.LookupEnv(name)
		if !ok && unset == "" {
			unset = name
		}
		return v
	})
	return v, unset
}

type visitFunc func(ast.Node)

func (f visitFunc) Visit(n ast.Node) ast.Visitor { f(n); return f }

// pathError is a validation error at a YAML path such as providers[1].secrets.
// unresolved marks a secret that could not be read (see LoadSecretsOptional).
type pathError struct {
	path, msg  string
	unresolved bool
}

func (e *pathError) Error() string { return e.path + ": " + e.msg }

func errAt(path, format string, args ...any) error {
	return &pathError{path: path, msg: fmt.Sprintf(format, args...)}
}

// lineOf finds the line of the deepest node that exists along path.
func lineOf(file *ast.File, path string) int {
	for p := path; p != ""; {
		yp, err := yaml.PathString("$." + p)
		if err == nil {
			if n, err := yp.FilterFile(file); err == nil && n != nil {
				return n.GetToken().Position.Line
			}
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return 1
}

var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// resolve fills defaults, reads secret files and validates everything,
// section by section, in the order their references need (a usage mapping
// names providers and meters; Stripe's settings are the meters').
func (c *Config) resolve(dir string) error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Data == "" {
		c.Data = DefaultData
	}
	switch c.Durability {
	case "":
		c.Durability = DurabilityLocal
	case DurabilityLocal, DurabilityReplica:
	default:
		return errAt("durability", "%q is not one of %s, %s", c.Durability, DurabilityLocal, DurabilityReplica)
	}
	for _, step := range []func(dir string) error{
		c.resolveDatabase, c.resolveProviders, c.resolveAdmin, c.resolveMeters, c.resolveUsage,
		c.setAsideCreditLimits, func(string) error { return c.resolvePlans() }, c.resolveCredits,
		func(string) error { return c.resolveLimits() },
		c.resolveDestinations, c.resolveStripe,
		func(string) error { return c.resolveIngest() }, func(string) error { return c.resolveInvoicing() },
		c.resolveRetention,
	} {
		if err := step(dir); err != nil {
			return err
		}
	}
	return nil
}

// resolveProviders checks providers: names (the URL path), schemes and
// their options, secrets (read from their files), tolerance and bounds.
func (c *Config) resolveProviders(dir string) error {
	if len(c.Providers) == 0 {
		return errAt("providers", "at least one provider is required")
	}
	seen := map[string]bool{}
	for i := range c.Providers {
		p := &c.Providers[i]
		at := fmt.Sprintf("providers[%d]", i)
		if !providerName.MatchString(p.Name) {
			return errAt(at+".name", "%q must be lowercase letters, digits, - or _ (it is the URL path /webhooks/NAME)", p.Name)
		}
		if p.Name == AlertProvider {
			return errAt(at+".name", "%q is reserved: it is the provider of hookledger's own events (threshold alerts)", p.Name)
		}
		if seen[p.Name] {
			return errAt(at+".name", "provider %q is defined twice", p.Name)
		}
		seen[p.Name] = true
		if err := c.resolveProvider(dir, at, p); err != nil {
			return err
		}
	}
	return nil
}

// resolveProvider checks one provider's scheme, secrets and bounds.
func (c *Config) resolveProvider(dir, at string, p *Provider) error {
	s, err := scheme.New(p.Scheme, p.HMAC)
	if err != nil {
		return errAt(at+".scheme", "%v", err) // an unknown name comes with the supported ones
	}
	if p.Scheme != "hmac" && p.HMAC != (scheme.HMACOptions{}) {
		return errAt(at+".hmac", "only the hmac scheme takes hmac options")
	}
	if len(p.Secrets) == 0 {
		return errAt(at+".secrets", "at least one secret is required")
	}
	resolved := p.Secrets[:0:0]
	for j := range p.Secrets {
		sec := &p.Secrets[j]
		sat := fmt.Sprintf("%s.secrets[%d]", at, j)
		if err := sec.read(dir, sat); c.leaveOut(err) {
			continue
		} else if err != nil {
			return err
		}
		if _, err := s.Key(sec.Value); err != nil {
			return errAt(sat, "not a valid %s secret: %v", p.Scheme, err)
		}
		resolved = append(resolved, *sec)
	}
	p.Secrets = resolved
	if err := p.Tolerance.Check(); err != nil {
		return errAt(at+".tolerance", "%v", err)
	}
	if p.Tolerance.Duration == 0 {
		p.Tolerance.Duration = DefaultTolerance
	}
	switch {
	case p.MaxBody == 0:
		p.MaxBody = DefaultMaxBody
	case p.MaxBody < 0:
		return errAt(at+".max_body", "must be positive")
	}
	switch {
	case p.MaxDepth == 0:
		p.MaxDepth = DefaultMaxDepth
	case p.MaxDepth < 0 || p.MaxDepth > payload.MaxDepthLimit:
		return errAt(at+".max_depth", "must be between 1 and %d, got %d", payload.MaxDepthLimit, p.MaxDepth)
	}
	return nil
}

// resolveAdmin reads the admin tokens (a variable or a file each).
func (c *Config) resolveAdmin(dir string) error {
	tokens := c.Admin.Tokens[:0:0]
	for i := range c.Admin.Tokens {
		if err := c.Admin.Tokens[i].read(dir, fmt.Sprintf("admin.tokens[%d]", i)); c.leaveOut(err) {
			continue
		} else if err != nil {
			return err
		}
		tokens = append(tokens, c.Admin.Tokens[i])
	}
	c.Admin.Tokens = tokens
	return nil
}

// resolveMeters checks the declared meters: each valid, each once.
func (c *Config) resolveMeters(string) error {
	meters := map[string]bool{}
	for i := range c.Meters {
		at := fmt.Sprintf("meters[%d]", i)
		if err := c.Meters[i].Normalize(); err != nil {
			key, msg, _ := strings.Cut(err.Error(), ": ")
			return errAt(at+"."+key, "%s", msg)
		}
		if meters[c.Meters[i].Name] {
			return errAt(at+".name", "meter %q is defined twice", c.Meters[i].Name)
		}
		meters[c.Meters[i].Name] = true
	}
	return nil
}

// resolveUsage checks the usage mappings against the providers and meters
// they name, and fills their event-time window.
func (c *Config) resolveUsage(string) error {
	for i := range c.Usage {
		m := &c.Usage[i]
		at := fmt.Sprintf("usage[%d]", i)
		if m.Provider != "" && !c.hasProvider(m.Provider) && !isAPIScope(m.Provider) {
			return errAt(at+".provider", "no provider named %q (an API key's events: api:KEYNAME)", m.Provider)
		}
		if err := m.Validate(); err != nil {
			key, msg, _ := strings.Cut(err.Error(), ": ")
			return errAt(at+"."+key, "%s", msg)
		}
		if err := resolveWindow(&m.MaxFuture, DefaultMaxFuture); err != nil {
			return errAt(at+".max_future", "%v", err)
		}
		if err := resolveWindow(&m.MaxPast, DefaultMaxPast); err != nil {
			return errAt(at+".max_past", "%v", err)
		}
		if err := c.usageProperties(at, *m); err != nil {
			return err
		}
	}
	return nil
}

// usageProperties checks that mapping m names a declared meter and
// extracts every property its meter keeps: a meter read from the event may
// be any declared meter, so such a mapping extracts every dimension, or
// rows it maps would all group (and price) under the empty value
// unnoticed.
func (c *Config) usageProperties(at string, m ledger.Mapping) error {
	if m.Meter.Value != "" {
		if len(c.Meters) > 0 && !slices.ContainsFunc(c.Meters, func(mt Meter) bool { return mt.Name == m.Meter.Value }) {
			return errAt(at+".meter", "meter %q is not declared under meters", m.Meter.Value)
		}
		for _, p := range ledger.NewMeters(c.Meters).Get(m.Meter.Value).Properties {
			if _, ok := m.Properties[p]; !ok {
				return errAt(at+".properties", "meter %q keeps property %q: add properties.%s (a JSON path)", m.Meter.Value, p, p)
			}
		}
		return nil
	}
	for _, mt := range c.Meters {
		for _, d := range mt.Dimensions {
			if _, ok := m.Properties[d]; !ok {
				return errAt(at+".properties", "the meter comes from %s and may be %q, whose dimension %q this mapping does not extract: add properties.%s (a JSON path)",
					m.Meter.Path, mt.Name, d, d)
			}
		}
	}
	return nil
}

// hasProvider reports whether a provider of that name is configured.
func (c *Config) hasProvider(name string) bool {
	return slices.ContainsFunc(c.Providers, func(p Provider) bool { return p.Name == name })
}

// Default is the zero-config setup: one Standard Webhooks provider named
// "default" and a mapping for the generic usage.recorded event. The secret
// comes from HOOKLEDGER_SECRET or is generated once and kept in the data
// directory; generated is non-empty only the first time, so it can be shown.
func Default(dataDir string) (c *Config, generated string, err error) {
	if c, err = DefaultUnsaved(dataDir); err != nil {
		return nil, "", err
	}
	if generated, err = c.SaveSecret(); err != nil {
		return nil, "", err
	}
	return c, generated, nil
}

// DefaultUnsaved is Default without side effects: a secret that must be
// generated is generated in memory only, and SaveSecret stores it. serve
// validates everything first, and stores the secret (creating the data
// directory) only when nothing can fail any more for a reason of its own.
func DefaultUnsaved(dataDir string) (*Config, error) {
	secret, unsaved := os.Getenv("HOOKLEDGER_SECRET"), false
	if secret == "" {
		var err error
		if secret, unsaved, err = readOrNewSecret(dataDir); err != nil {
			return nil, err
		}
	}
	c, err := embedded(dataDir, Secret{Value: secret}, false)
	if err != nil {
		return nil, err
	}
	if unsaved {
		c.unsavedSecret = secret
	}
	return c, nil
}

// DefaultSecretsOptional is Default for every command but serve: it never
// generates a secret. Without HOOKLEDGER_SECRET or a stored default secret the
// provider has no secret, and Unresolved says so.
func DefaultSecretsOptional(dataDir string) (*Config, error) {
	secret := Secret{File: SecretFile} // in dataDir
	if v := os.Getenv("HOOKLEDGER_SECRET"); v != "" {
		secret = Secret{Value: v}
	}
	return embedded(dataDir, secret, true)
}

// embedded is the zero-config setup with the given secret.
func embedded(dataDir string, secret Secret, lenient bool) (*Config, error) {
	c := &Config{
		Data: dataDir,
		Providers: []Provider{{
			Name:    "default",
			Scheme:  "standard",
			Secrets: []Secret{secret},
		}},
		Usage: []ledger.Mapping{{
			Type:       "usage.recorded",
			Customer:   ledger.Field{Path: "data.customer"},
			Meter:      ledger.Field{Path: "data.meter"},
			Quantity:   ledger.Field{Path: "data.quantity"},
			OccurredAt: ledger.Field{Path: "data.occurred_at"},
		}},
		lenient: lenient,
	}
	if err := c.resolve(dataDir); err != nil {
		if strings.Contains(err.Error(), "secrets[0]") {
			return nil, fmt.Errorf("HOOKLEDGER_SECRET: must be a Standard Webhooks secret (whsec_ followed by base64): %v", err)
		}
		return nil, err
	}
	return c, nil
}

// SaveSecret stores a default secret that DefaultUnsaved generated, creating
// the data directory, and returns it (to be shown once); "" when there was
// nothing to store. If another process stored one first, that one is
// refused rather than silently replaced: the config would verify with a
// secret nobody was shown.
func (c *Config) SaveSecret() (generated string, err error) {
	if c.unsavedSecret == "" {
		return "", nil
	}
	secret := c.unsavedSecret
	if err := durable.MkdirAll(c.Data, 0o700); err != nil {
		return "", fmt.Errorf("create data directory: %w", err)
	}
	// O_EXCL: two processes starting at once must not each print a different secret.
	f, err := os.OpenFile(filepath.Join(c.Data, SecretFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("store default secret: %w", err)
	}
	defer f.Close()
	if _, err := f.WriteString(secret + "\n"); err != nil {
		return "", fmt.Errorf("store default secret: %w", err)
	}
	if err := f.Sync(); err != nil {
		return "", fmt.Errorf("store default secret: %w", err)
	}
	// The file's name too: events signed with this secret are acknowledged next.
	if err := durable.SyncDir(c.Data); err != nil {
		return "", fmt.Errorf("store default secret: %w", err)
	}
	c.unsavedSecret = ""
	return secret, nil
}

// SecretFile is where the generated default secret is kept.
const SecretFile = "default.secret"

// readOrNewSecret reads the stored default secret, or generates one in
// memory (unsaved) when there is none.
func readOrNewSecret(dataDir string) (secret string, unsaved bool, err error) {
	path := filepath.Join(dataDir, SecretFile)
	if b, err := os.ReadFile(path); err == nil {
		return strings.TrimSpace(string(b)), false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", false, fmt.Errorf("read default secret: %w", err)
	}
	raw := make([]byte, 24)
	if _, err := rand.Read(raw); err != nil {
		return "", false, err
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(raw), true, nil
}

// SourceName is where the configuration came from, for logs: its file, or
// "embedded default".
func (c *Config) SourceName() string {
	if c.Source == "" {
		return "embedded default"
	}
	return c.Source
}
