// Package replication embeds Litestream (v0.5) so hookledger replicates its own
// SQLite database continuously and can restore it on a new machine.
//
// The configuration is Litestream's own litestream.yml, so the stock
// `litestream restore -config litestream.yml <db>` restores the same replica.
// Litestream silently ignores keys it does not know; LoadConfig does not: a
// misspelt key would otherwise leave the ledger unreplicated without a word.
package replication

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/goccy/go-yaml/ast"
)

// Defaults applied by LoadConfig when litestream.yml leaves a setting out.
// They are Litestream's, except the shutdown sync timeout (Litestream: 30 s):
// a deploy should not hang that long on a dead replica.
const (
	DefaultSyncInterval        = litestream.DefaultSyncInterval     // 1 s: background replica lag
	DefaultMonitorInterval     = litestream.DefaultMonitorInterval  // 1 s: WAL poll
	DefaultSnapshotInterval    = litestream.DefaultSnapshotInterval // 24 h
	DefaultSnapshotRetention   = litestream.DefaultSnapshotRetention
	DefaultL0Retention         = litestream.DefaultL0Retention // 5 min
	DefaultShutdownSyncTimeout = 10 * time.Second
)

// Config is a validated litestream.yml holding exactly one database.
type Config struct {
	File string // absolute path of the litestream.yml it came from

	DB DBConfig

	// Levels are the compaction intervals of L1, L2, …; default 30s, 5m, 1h.
	Levels []time.Duration

	SnapshotInterval    time.Duration // default 24h
	SnapshotRetention   time.Duration // default 24h: how far back point-in-time restore reaches
	L0Retention         time.Duration // default 5m
	ShutdownSyncTimeout time.Duration // default 10s; see Replicator.ShutdownSyncTimeout
	RetentionEnabled    bool          // default true; false leaves cleanup to bucket lifecycle rules

	line map[string]int // "dbs[0].replica.type" → line, for error messages
}

// DBConfig is the single entry under dbs.
type DBConfig struct {
	// Path is absolute. As in the stock CLI, a relative path is taken from
	// the working directory (not the config file's), and "~/" and
	// "sqlite://" prefixes are expanded.
	Path string

	MonitorInterval    time.Duration // default 1s: how often Litestream cuts the WAL
	CheckpointInterval time.Duration // default 1m
	BusyTimeout        time.Duration // default 1s, for Litestream's own connection

	// RestoreIfDBNotExists is Litestream's key; `serve` treats it like
	// --restore-if-missing.
	RestoreIfDBNotExists bool

	Replica ReplicaConfig
}

// ReplicaConfig is the database's one replica.
type ReplicaConfig struct {
	Type string // "file" or "s3"; a url's scheme decides when url is set
	Path string // file: directory; s3: key prefix
	URL  string // s3://bucket/prefix[?endpoint=…&region=…]; file:///dir becomes Path

	Bucket          string
	Endpoint        string
	Region          string
	AccessKeyID     string // empty: AWS_ or LITESTREAM_ACCESS_KEY_ID, then the AWS default chain
	SecretAccessKey string
	ForcePathStyle  *bool // nil: true when an endpoint is set, as in Litestream
	SkipVerify      bool

	SyncInterval time.Duration // default 1s
}

// The raw* types mirror litestream.yml key for key. Only keys hookledger
// honours are listed; anything else is an unknown key, not silently ignored.
type rawConfig struct {
	DBs                 []rawDB     `yaml:"dbs"`
	Levels              []rawLevel  `yaml:"levels"`
	Snapshot            rawSnapshot `yaml:"snapshot"`
	L0Retention         *duration   `yaml:"l0-retention"`
	ShutdownSyncTimeout *duration   `yaml:"shutdown-sync-timeout"`
	Retention           struct {
		Enabled *bool `yaml:"enabled"`
	} `yaml:"retention"`
}

type rawLevel struct {
	Interval duration `yaml:"interval"`
}

type rawSnapshot struct {
	Interval  *duration `yaml:"interval"`
	Retention *duration `yaml:"retention"`
}

type rawDB struct {
	Path                 string      `yaml:"path"`
	MonitorInterval      *duration   `yaml:"monitor-interval"`
	CheckpointInterval   *duration   `yaml:"checkpoint-interval"`
	BusyTimeout          *duration   `yaml:"busy-timeout"`
	RestoreIfDBNotExists bool        `yaml:"restore-if-db-not-exists"`
	Replica              *rawReplica `yaml:"replica"`
}

type rawReplica struct {
	Type            string    `yaml:"type"`
	Path            string    `yaml:"path"`
	URL             string    `yaml:"url"`
	Bucket          string    `yaml:"bucket"`
	Endpoint        string    `yaml:"endpoint"`
	Region          string    `yaml:"region"`
	AccessKeyID     string    `yaml:"access-key-id"`
	SecretAccessKey string    `yaml:"secret-access-key"`
	ForcePathStyle  *bool     `yaml:"force-path-style"`
	SkipVerify      bool      `yaml:"skip-verify"`
	SyncInterval    *duration `yaml:"sync-interval"`
}

// duration accepts what Litestream's YAML library accepts: a Go duration
// string ("1s", "24h"). A bare number is an error there too.
type duration time.Duration

func (d *duration) UnmarshalYAML(n ast.Node) error {
	n = unwrap(n)
	var text string
	if s, ok := n.(ast.ScalarNode); ok {
		text = s.GetToken().Value
	}
	v, err := time.ParseDuration(text)
	if _, ok := n.(*ast.StringNode); !ok || err != nil {
		return fmt.Errorf("line %d: %q is not a duration (want e.g. \"1s\", \"24h\")", lineOf(n), text)
	}
	*d = duration(v)
	return nil
}

func (d *duration) or(def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return time.Duration(*d)
}

// LoadConfig reads and validates litestream.yml. Environment variables are
// expanded over the whole file before parsing, exactly as Litestream does:
// $VAR and ${VAR}, $PID for the process id, unset variables become "", and
// there is no escape for a literal '$'.
func LoadConfig(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	buf, err := os.ReadFile(abs)
	if err != nil {
		return nil, fmt.Errorf("read replication config: %w", err)
	}
	expanded := os.Expand(string(buf), func(key string) string {
		if key == "PID" {
			return strconv.Itoa(os.Getpid())
		}
		return os.Getenv(key)
	})
	c, err := parseConfig([]byte(expanded))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.File = abs
	return c, nil
}

// errorf reports a validation error at the line of key (when known).
func (c *Config) errorf(key, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if n, ok := c.line[key]; ok {
		return fmt.Errorf("line %d: %s: %s", n, key, msg)
	}
	return fmt.Errorf("%s: %s", key, msg)
}

func (c *Config) build(raw *rawConfig) (err error) {
	if len(raw.DBs) != 1 {
		return c.errorf("dbs", "exactly one database is required, found %d", len(raw.DBs))
	}
	rdb := raw.DBs[0]
	if rdb.Path == "" {
		return c.errorf("dbs[0]", "path is required")
	}
	if c.DB.Path, err = expandPath(rdb.Path); err != nil {
		return c.errorf("dbs[0].path", "%v", err)
	}
	c.SnapshotInterval = raw.Snapshot.Interval.or(DefaultSnapshotInterval)
	c.SnapshotRetention = raw.Snapshot.Retention.or(DefaultSnapshotRetention)
	c.L0Retention = raw.L0Retention.or(DefaultL0Retention)
	c.ShutdownSyncTimeout = raw.ShutdownSyncTimeout.or(DefaultShutdownSyncTimeout)
	c.RetentionEnabled = raw.Retention.Enabled == nil || *raw.Retention.Enabled
	c.DB.MonitorInterval = rdb.MonitorInterval.or(DefaultMonitorInterval)
	c.DB.CheckpointInterval = rdb.CheckpointInterval.or(litestream.DefaultCheckpointInterval)
	c.DB.BusyTimeout = rdb.BusyTimeout.or(litestream.DefaultBusyTimeout)
	c.DB.RestoreIfDBNotExists = rdb.RestoreIfDBNotExists
	for _, lvl := range litestream.DefaultCompactionLevels[1:] {
		c.Levels = append(c.Levels, lvl.Interval)
	}
	if raw.Levels != nil {
		c.Levels = c.Levels[:0]
		for i, lvl := range raw.Levels {
			if lvl.Interval <= 0 {
				return c.errorf(fmt.Sprintf("levels[%d]", i), "interval must be positive")
			}
			c.Levels = append(c.Levels, time.Duration(lvl.Interval))
		}
	}
	for _, d := range []struct {
		key      string
		v        time.Duration
		zeroOkay bool
	}{
		{"snapshot.interval", c.SnapshotInterval, false},
		{"snapshot.retention", c.SnapshotRetention, false},
		{"l0-retention", c.L0Retention, true},
		{"shutdown-sync-timeout", c.ShutdownSyncTimeout, true},
		{"dbs[0].monitor-interval", c.DB.MonitorInterval, false},
		{"dbs[0].checkpoint-interval", c.DB.CheckpointInterval, true},
		{"dbs[0].busy-timeout", c.DB.BusyTimeout, true},
	} {
		if d.v < 0 || (d.v == 0 && !d.zeroOkay) {
			return c.errorf(d.key, "must be positive, got %v", d.v)
		}
	}
	if rdb.Replica == nil {
		return c.errorf("dbs[0]", "replica is required (type file or s3)")
	}
	return c.buildReplica(rdb.Replica)
}

func (c *Config) buildReplica(raw *rawReplica) (err error) {
	const at = "dbs[0].replica"
	r := &c.DB.Replica
	*r = ReplicaConfig{
		Type: raw.Type, Path: raw.Path, URL: raw.URL, Bucket: raw.Bucket,
		Endpoint: raw.Endpoint, Region: raw.Region, AccessKeyID: raw.AccessKeyID,
		SecretAccessKey: raw.SecretAccessKey, ForcePathStyle: raw.ForcePathStyle,
		SkipVerify: raw.SkipVerify, SyncInterval: raw.SyncInterval.or(DefaultSyncInterval),
	}
	if r.SyncInterval <= 0 {
		return c.errorf(at+".sync-interval", "must be positive")
	}
	if r.URL != "" && r.Path != "" {
		return c.errorf(at+".url", "cannot set both url and path")
	}
	// Litestream lets a url's scheme override type; a disagreement is a mistake.
	if scheme := litestream.ReplicaTypeFromURL(r.URL); scheme != "" {
		if r.Type != "" && r.Type != scheme {
			return c.errorf(at+".type", "%q contradicts url scheme %q", r.Type, scheme)
		}
		r.Type = scheme
	} else if r.URL != "" {
		return c.errorf(at+".url", "%q is not a replica URL (want file:// or s3://)", r.URL)
	}
	switch r.Type {
	case "", "file": // file is Litestream's default
		r.Type = "file"
		if r.URL != "" {
			if _, _, r.Path, err = litestream.ParseReplicaURL(r.URL); err != nil {
				return c.errorf(at+".url", "%v", err)
			}
			r.URL = ""
		}
		if r.Path == "" {
			return c.errorf(at, "path is required for a file replica")
		}
		if r.Path, err = expandPath(r.Path); err != nil {
			return c.errorf(at+".path", "%v", err)
		}
		for _, kv := range [][2]string{{"bucket", r.Bucket}, {"endpoint", r.Endpoint}, {"region", r.Region},
			{"access-key-id", r.AccessKeyID}, {"secret-access-key", r.SecretAccessKey}} {
			if kv[1] != "" {
				return c.errorf(at+"."+kv[0], "only applies to an s3 replica")
			}
		}
		if r.ForcePathStyle != nil || r.SkipVerify {
			return c.errorf(at, "force-path-style and skip-verify only apply to an s3 replica")
		}
	case "s3":
		if r.URL != "" && r.Bucket != "" {
			return c.errorf(at+".url", "cannot set both url and bucket")
		}
		if _, err := newS3Client(r); err != nil {
			return c.errorf(at, "%v", err)
		}
	default:
		return c.errorf(at+".type", "unsupported replica type %q (want file or s3)", r.Type)
	}
	return nil
}

// CheckDB returns an error unless the configured database is dbPath. Both are
// compared as cleaned absolute paths, with relative paths taken from the
// working directory as Litestream does.
func (c *Config) CheckDB(dbPath string) error {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		return err
	}
	if abs != c.DB.Path {
		return fmt.Errorf("%s: line %d: dbs[0].path is %s, but hookledger's database is %s",
			c.File, c.line["dbs[0].path"], c.DB.Path, abs)
	}
	return nil
}

// expandPath resolves a path the way Litestream's CLI does: strip a
// sqlite:// prefix, expand "~/", then make it absolute against the cwd.
func expandPath(s string) (string, error) {
	for _, prefix := range []string{"sqlite3://", "sqlite://"} {
		s = strings.TrimPrefix(s, prefix)
	}
	if s != "~" && !strings.HasPrefix(s, "~"+string(os.PathSeparator)) {
		return filepath.Abs(s)
	}
	u, err := user.Current()
	if err != nil {
		return "", err
	} else if u.HomeDir == "" {
		return "", fmt.Errorf("cannot expand %s: no home directory", s)
	}
	return filepath.Join(u.HomeDir, strings.TrimPrefix(s, "~")), nil
}
