package config

import (
	"errors"
	"path/filepath"
	"strings"
)

// The database: the SQLite file hookledger.db in the data directory, the
// embedded default, unless database: names a PostgreSQL database, which
// several receivers can share (docs/postgres.md):
//
//	database: postgres://hookledger@db.internal:5432/hookledger
//	database: ${DATABASE_URL}
//	database: {secret_file: /run/credentials/hookledger.service/database}
//
// The URL may hold a password, so it is read like a secret (inline with
// ${ENV}, or from a file) and never printed; unlike a webhook secret every
// command needs it, so an unresolvable one is always an error.

// DBPath is where the database is: database:'s PostgreSQL URL, else the
// SQLite file hookledger.db in the data directory.
func (c *Config) DBPath() string {
	if c.Database.Value != "" {
		return c.Database.Value
	}
	return filepath.Join(c.Data, "hookledger.db")
}

// Postgres reports whether the database is PostgreSQL (database: is set).
func (c *Config) Postgres() bool { return c.Database.Value != "" }

// IsPostgresURL reports whether s is a postgres:// or postgresql:// URL.
func IsPostgresURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

func (c *Config) resolveDatabase(dir string) error {
	d := &c.Database
	if d.Value == "" && d.File == "" && !d.bad {
		return nil // SQLite in the data directory
	}
	if err := d.read(dir, "database"); err != nil {
		return err
	}
	if !IsPostgresURL(d.Value) {
		return errAt("database", "must be a postgres:// or postgresql:// URL (the SQLite database needs no setting: it is hookledger.db in data)")
	}
	return nil
}

// SetDatabase sets the database to a PostgreSQL URL (--database).
func (c *Config) SetDatabase(url string) error {
	if !IsPostgresURL(url) {
		return errors.New("must be a postgres:// or postgresql:// URL")
	}
	c.Database = Secret{Value: url}
	return nil
}
