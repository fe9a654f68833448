package replication

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadConfig(t *testing.T) {
	t.Setenv("HL_TEST_BUCKET", "ledger-backups")
	dir := t.TempDir()
	t.Chdir(dir) // relative paths resolve against the cwd, as in Litestream
	cfg := writeConfig(t, dir, `# hookledger
levels:
  - interval: 10s
  - interval: 1m
snapshot:
  interval: 6h
l0-retention: 1m
shutdown-sync-timeout: 3s
dbs:
  - path: data/hookledger.db
    replica:
      type: s3
      bucket: ${HL_TEST_BUCKET}
      path: prod
      endpoint: http://127.0.0.1:9000
      sync-interval: 250ms
`)
	want := filepath.Join(dir, "data", "hookledger.db")
	if cfg.DB.Path != want {
		t.Errorf("db path %s; want %s", cfg.DB.Path, want)
	}
	r := cfg.DB.Replica
	if r.Type != "s3" || r.Bucket != "ledger-backups" || r.SyncInterval != 250*time.Millisecond {
		t.Errorf("replica %+v", r)
	}
	if len(cfg.Levels) != 2 || cfg.Levels[1] != time.Minute || cfg.SnapshotInterval != 6*time.Hour ||
		cfg.SnapshotRetention != DefaultSnapshotRetention || cfg.L0Retention != time.Minute ||
		cfg.ShutdownSyncTimeout != 3*time.Second || cfg.DB.MonitorInterval != DefaultMonitorInterval {
		t.Errorf("config %+v", cfg)
	}
	c, err := newS3Client(&r)
	if err != nil || !c.ForcePathStyle || c.Region != "" {
		t.Errorf("s3 client: path style %v (an endpoint implies it), %v", c.ForcePathStyle, err)
	}

	if err := cfg.CheckDB("data/hookledger.db"); err != nil {
		t.Errorf("CheckDB(relative): %v", err)
	}
	if err := cfg.CheckDB(filepath.Join(dir, "data", "..", "data", "hookledger.db")); err != nil {
		t.Errorf("CheckDB(unclean): %v", err)
	}
	err = cfg.CheckDB(filepath.Join(dir, "other.db"))
	if err == nil || !strings.Contains(err.Error(), "line 10") || !strings.Contains(err.Error(), "other.db") {
		t.Errorf("CheckDB(other) = %v; want an error naming line 10 and both paths", err)
	}
}

func TestLoadConfigDefaults(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "dbs:\n  - path: /srv/hl.db\n    replica:\n      url: file:///srv/replica\n")
	r := cfg.DB.Replica
	if r.Type != "file" || r.Path != "/srv/replica" || r.URL != "" || r.SyncInterval != time.Second {
		t.Errorf("replica %+v", r)
	}
	if cfg.ShutdownSyncTimeout != 10*time.Second || !cfg.RetentionEnabled || len(cfg.Levels) != 3 ||
		cfg.SnapshotInterval != 24*time.Hour || cfg.L0Retention != 5*time.Minute {
		t.Errorf("defaults %+v", cfg)
	}
	// No type and no url: a file replica, as in Litestream.
	cfg = writeConfig(t, dir, "dbs:\n  - path: /srv/hl.db\n    replica:\n      path: /srv/replica\n")
	if cfg.DB.Replica.Type != "file" {
		t.Errorf("default type %q", cfg.DB.Replica.Type)
	}
	cfg = writeConfig(t, dir, "dbs:\n  - path: /srv/hl.db\n    replica:\n      url: s3://b/pre/fix?endpoint=localhost:9000&region=eu-1\n")
	c, err := newS3Client(&cfg.DB.Replica)
	if err != nil || c.Bucket != "b" || c.Path != "pre/fix" || c.Endpoint != "http://localhost:9000" || c.Region != "eu-1" || !c.ForcePathStyle {
		t.Errorf("s3 url client %+v, %v", c, err)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	const db = "dbs:\n  - path: /srv/hl.db\n"
	for _, tt := range []struct {
		name, yml string
		want      []string // substrings of the error
	}{
		{"unknown top-level key", "exec: ./hookledger\n" + db + "    replica:\n      path: /r\n",
			[]string{"line 1", `unknown key "exec"`, "top level"}},
		{"misspelt replica key", db + "    replica:\n      type: s3\n      bucket: b\n      sync_interval: 1s\n",
			[]string{"line 6", `"sync_interval"`, "dbs[0].replica"}},
		{"unknown db key", db + "    meta-path: /x\n    replica:\n      path: /r\n",
			[]string{"line 3", `"meta-path"`}},
		{"unknown snapshot key", "snapshot:\n  every: 1h\n" + db + "    replica:\n      path: /r\n",
			[]string{"line 2", `"every"`, "snapshot"}},
		{"bad replica type", db + "    replica:\n      type: gcs\n      path: /r\n",
			[]string{"line 4", `unsupported replica type "gcs"`}},
		{"type contradicts url", db + "    replica:\n      type: file\n      url: s3://b/p\n",
			[]string{"line 4", "contradicts"}},
		{"two databases", db + "    replica:\n      path: /r\n  - path: /srv/b.db\n    replica:\n      path: /r2\n",
			[]string{"exactly one database", "found 2"}},
		{"no databases", "snapshot:\n  interval: 1h\n", []string{"exactly one database"}},
		{"no replica", db, []string{"replica is required"}},
		{"bare number duration", db + "    replica:\n      path: /r\n      sync-interval: 5\n",
			[]string{"line 5", "not a duration"}},
		{"s3 without bucket", db + "    replica:\n      type: s3\n      path: p\n", []string{"bucket"}},
		{"s3 key on file replica", db + "    replica:\n      path: /r\n      bucket: b\n",
			[]string{"line 5", "bucket", "only applies to an s3 replica"}},
		{"url and path", db + "    replica:\n      url: s3://b/p\n      path: q\n", []string{"both url and path"}},
		{"unsupported url parameter", db + "    replica:\n      url: s3://b/p?sseKmsKeyId=k\n", []string{`"sseKmsKeyId"`}},
		{"wrong value type", db + "    replica:\n      path: /r\n      force-path-style: maybe\n", []string{"line 5"}},
		{"negative l0 retention", "l0-retention: -1s\n" + db + "    replica:\n      path: /r\n",
			[]string{"line 1", "l0-retention"}},
		{"duplicate key", db + "    replica:\n      path: /r\n      path: /s\n", []string{"line 5", "already defined"}},

		// How the YAML tree itself is read (goccy/go-yaml's parser, walked by keyChecker).
		{"empty file", "", []string{"empty config"}},
		{"comments only", "# nothing yet\n", []string{"empty config"}},
		{"sequence document", "- path: /srv/hl.db\n", []string{"line 1", "mapping"}},
		{"scalar document", "dbs\n", []string{"line 1", "mapping"}},
		{"duplicate top-level key", db + "    replica:\n      path: /r\ndbs: []\n", []string{"line 5", `"dbs" already defined`}},
		{"duplicate key in a flow mapping", "dbs: [{path: /a, path: /b}]\n", []string{"line 1", `"path" already defined`}},
		{"unknown key under an alias", db + "    replica: &r\n      path: /r\nsnapshot: *r\n",
			[]string{"line 4", `unknown key "path" in snapshot`}},
		{"unknown key in an anchored item", "levels:\n  - &l {interval: 1s, every: 2s}\n  - *l\n",
			[]string{"line 2", `unknown key "every" in levels[0]`}},
		{"merge key", db + "    replica:\n      <<: {path: /r}\n", []string{"line 4", `unknown key "<<" in dbs[0].replica`}},
		{"alias before its anchor", db + "    replica: *r\n", []string{"line 3", `"r"`}},
		{"wrong value type names the key", db + "    replica:\n      path: /r\n      force-path-style: maybe\n",
			[]string{"line 5", `dbs[0].replica.force-path-style: want true or false, got "maybe"`}},
		{"sequence for a string", "dbs:\n  - path: [a]\n", []string{"line 2", "dbs[0].path: want a string, got a sequence"}},
		{"custom tag on a sequence", "dbs: !x [a]\n", []string{"line 1"}}, // panicked the decoder in config.FuzzParse
		{"syntax error", db + "    replica:\n      path: /r\n  bad indent\n", []string{"line 5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "litestream.yml")
			if err := os.WriteFile(p, []byte(tt.yml), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadConfig(p)
			if err == nil {
				t.Fatalf("LoadConfig accepted:\n%s", tt.yml)
			}
			for _, w := range append(tt.want, "litestream.yml") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// Anchors and aliases are YAML that Litestream's parser reads too: an aliased
// value is checked and decoded where it is used, and only the first document
// counts, as in Litestream.
func TestLoadConfigAliases(t *testing.T) {
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `&top
levels:
  - &level {interval: 15s}
  - *level
dbs:
  - path: /srv/hl.db
    monitor-interval: &tick 2s
    checkpoint-interval: ~
    replica:
      "path": '/srv/replica'
      sync-interval: *tick
---
exec: ignored, as Litestream ignores a second document
`)
	if len(cfg.Levels) != 2 || cfg.Levels[0] != 15*time.Second || cfg.Levels[1] != 15*time.Second {
		t.Errorf("levels %v; want [15s 15s]", cfg.Levels)
	}
	if cfg.DB.MonitorInterval != 2*time.Second || cfg.DB.Replica.SyncInterval != 2*time.Second {
		t.Errorf("aliased durations: monitor %v, sync %v; want 2s", cfg.DB.MonitorInterval, cfg.DB.Replica.SyncInterval)
	}
	if cfg.DB.CheckpointInterval != time.Minute || cfg.DB.Replica.Path != "/srv/replica" {
		t.Errorf("null duration or quoted key: %+v", cfg.DB)
	}
	if err := cfg.CheckDB("/srv/other.db"); err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Errorf("CheckDB(other) = %v; want line 6", err)
	}
}

// FuzzParseConfig feeds arbitrary YAML to the loader: it may refuse, never
// panic, and what it accepts has a replica.
func FuzzParseConfig(f *testing.F) {
	for _, seed := range []string{
		"dbs:\n  - path: /srv/hl.db\n    replica:\n      url: s3://b/p?endpoint=localhost:9000\n",
		"dbs: [{path: /a, replica: &r {path: /r}}]\nsnapshot: *r\n",
		"levels: [&l {interval: 1s}, *l, *l]\n",
		"dbs: !x [a]\n", "- [a, b]\n", "dbs: &a [*a]\n", "{}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := parseConfig(src)
		if err == nil && c.DB.Replica.Type == "" {
			t.Fatal("accepted a config without a replica")
		}
	})
}

// testdata/litestream.yml is the example shipped at the repository root.
func TestExampleConfig(t *testing.T) {
	cfg, err := LoadConfig("testdata/litestream.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckDB("data/hookledger.db"); err != nil || cfg.DB.Replica.Type != "file" {
		t.Fatalf("%+v, %v", cfg.DB, err)
	}
}

func TestParseTXID(t *testing.T) {
	for in, want := range map[string]TXID{"000000000000002a": 42, "2a": 42, "2A": 42} {
		if got, err := ParseTXID(in); err != nil || got != want {
			t.Errorf("ParseTXID(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "0x2a", "xyz", "00000000000000002a", "-1"} {
		if _, err := ParseTXID(in); err == nil {
			t.Errorf("ParseTXID(%q) accepted", in)
		}
	}
}
