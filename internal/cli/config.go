package cli

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/replication"
)

// Flags shared by commands that find the configuration and data directory.
func configFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "config", Aliases: []string{"c"}, EnvVars: []string{"HOOKLEDGER_CONFIG"},
			Usage: "configuration file (default: ./hookledger.yml if it exists, else the embedded default)"},
		&cli.StringFlag{Name: "data", EnvVars: []string{"HOOKLEDGER_DATA"},
			Usage: "data directory holding hookledger.db (default: the config's data, else ./data)"},
		databaseFlag(),
	}
}

func databaseFlag() cli.Flag {
	return &cli.StringFlag{Name: "database", EnvVars: []string{"HOOKLEDGER_DATABASE"},
		Usage: "a PostgreSQL database's postgres:// URL instead of DATA/hookledger.db (default: the config's database:); " +
			"prefer the variable or the config's secret_file to the flag, which other users can see in ps when the URL holds a password"}
}

// applyFlags applies --data and --database to a loaded configuration.
func applyFlags(c *cli.Context, cfg *config.Config) error {
	if d := c.String("data"); d != "" {
		cfg.Data = d
	}
	if d := c.String("database"); d != "" {
		if err := cfg.SetDatabase(d); err != nil {
			return fmt.Errorf("--database: %w", err)
		}
	}
	return nil
}

// configPath is --config, else ./hookledger.yml if it exists, else "" (the
// embedded default).
func configPath(c *cli.Context) string {
	if p := c.String("config"); p != "" {
		return p
	}
	if _, err := os.Stat(config.DefaultFile); err == nil {
		return config.DefaultFile
	}
	return ""
}

// loadConfig resolves --config/--data the same way for every command.
// generated is the newly created default secret, if one was created.
func loadConfig(c *cli.Context) (cfg *config.Config, generated string, err error) {
	if path := configPath(c); path != "" {
		cfg, err = config.Load(path)
		if err != nil {
			return nil, "", err
		}
		return cfg, "", applyFlags(c, cfg)
	}
	data := c.String("data")
	if data == "" {
		data = config.DefaultData
	}
	cfg, generated, err = config.Default(data)
	if err != nil {
		return nil, "", err
	}
	return cfg, generated, applyFlags(c, cfg)
}

// locate finds the data directory and the database without generating a
// default secret or needing any webhook secret: --data, else the config
// file's data, else ./data; --database, else the config's database:, else
// hookledger.db in that directory.
func locate(c *cli.Context) (dir, database string, err error) {
	cfg := &config.Config{Data: config.DefaultData}
	if path := configPath(c); path != "" {
		if cfg, err = config.LoadSecretsOptional(path); err != nil {
			return "", "", err
		}
	}
	if err := applyFlags(c, cfg); err != nil {
		return "", "", err
	}
	return cfg.Data, cfg.DBPath(), nil
}

// loadServeConfig is loadConfig without side effects: a default secret that
// must be generated is kept in memory until cfg.SaveSecret.
func loadServeConfig(c *cli.Context) (*config.Config, error) {
	if configPath(c) != "" {
		cfg, _, err := loadConfig(c)
		return cfg, err
	}
	data := c.String("data")
	if data == "" {
		data = config.DefaultData
	}
	cfg, err := config.DefaultUnsaved(data)
	if err != nil {
		return nil, err
	}
	return cfg, applyFlags(c, cfg)
}

// commandConfig is the configuration of every command but serve: --config,
// else ./hookledger.yml, else the embedded default, with --data applied. Unlike
// loadConfig it never generates the default secret, and a secret it cannot
// resolve (an unset ${VAR}) is left out and listed in cfg.Unresolved: usage,
// verify or replay need no secret, so they run without the webhook secrets in
// their environment.
func commandConfig(c *cli.Context) (*config.Config, error) {
	if path := configPath(c); path != "" {
		cfg, err := config.LoadSecretsOptional(path)
		if err != nil {
			return nil, err
		}
		return cfg, applyFlags(c, cfg)
	}
	data := c.String("data")
	if data == "" {
		data = config.DefaultData
	}
	cfg, err := config.DefaultSecretsOptional(data)
	if err != nil {
		return nil, err
	}
	return cfg, applyFlags(c, cfg)
}

// loadMeters reads the meter declarations; without a config file every
// meter is summed.
func loadMeters(c *cli.Context) (ledger.Meters, error) {
	cfg, err := commandConfig(c)
	if err != nil {
		return nil, err
	}
	return ledger.NewMeters(cfg.Meters), nil
}

// days prints whole days as config does ("35d"), anything else as Go does.
func days(d time.Duration) string {
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

// lookupProvider looks a provider up by name, listing the configured ones if absent.
func lookupProvider(cfg *config.Config, name string) (*config.Provider, error) {
	var names []string
	for i := range cfg.Providers {
		if cfg.Providers[i].Name == name {
			return &cfg.Providers[i], nil
		}
		names = append(names, cfg.Providers[i].Name)
	}
	return nil, fmt.Errorf("--provider: no provider named %q (configured: %s)", name, strings.Join(names, ", "))
}

// sinceFlag parses --since (0 when unset). A window longer than retention.keys
// could re-insert events whose ids were already forgotten.
func sinceFlag(c *cli.Context, cfg *config.Config) (time.Duration, error) {
	s := c.String("since")
	if s == "" {
		return 0, nil
	}
	d, err := config.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("--since: %v", err)
	}
	if d <= 0 {
		return 0, fmt.Errorf("--since: must be positive, e.g. 72h or 3d")
	}
	if keys := cfg.Retention.Keys.Duration; keys > 0 && d > keys {
		return 0, fmt.Errorf("--since: %s reaches further back than retention.keys (%s): events older than that "+
			"may have had their ids forgotten and would be inserted again", s, days(keys))
	}
	return d, nil
}

// defaultLitestreamFile is read when no --litestream-config is given and it
// exists, like hookledger.yml.
const defaultLitestreamFile = "litestream.yml"

func litestreamConfigFlag() cli.Flag {
	return &cli.StringFlag{Name: "litestream-config", EnvVars: []string{"HOOKLEDGER_LITESTREAM_CONFIG"},
		Usage: "Litestream replication config, in Litestream's own v0.5 format (default: ./" + defaultLitestreamFile + " if it exists)"}
}

// loadLitestream reads --litestream-config, else ./litestream.yml if it
// exists; nil when there is neither (no replication).
func loadLitestream(c *cli.Context) (*replication.Config, error) {
	path := c.String("litestream-config")
	if path == "" {
		if _, err := os.Stat(defaultLitestreamFile); err != nil {
			return nil, nil
		}
		path = defaultLitestreamFile
	}
	return replication.LoadConfig(path)
}

// requireLitestream is loadLitestream for commands that cannot do without.
func requireLitestream(c *cli.Context) (*replication.Config, error) {
	cfg, err := loadLitestream(c)
	if err == nil && cfg == nil {
		err = fmt.Errorf("no ./%s here: pass --litestream-config FILE (or set HOOKLEDGER_LITESTREAM_CONFIG)", defaultLitestreamFile)
	}
	return cfg, err
}
