package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDatabaseDefaultsToSQLiteInData(t *testing.T) {
	c, err := Parse([]byte(limitsBase+"data: /srv/hl\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if c.Postgres() || c.DBPath() != "/srv/hl/hookledger.db" {
		t.Errorf("DBPath %q, Postgres %v", c.DBPath(), c.Postgres())
	}
}

func TestDatabaseIsReadLikeASecret(t *testing.T) {
	dir := t.TempDir()
	const url = "postgres://hl:pw@db.internal:5432/hookledger"
	if err := os.WriteFile(filepath.Join(dir, "db.url"), []byte(url+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TEST_DATABASE_URL", url)
	for name, yaml := range map[string]string{
		"inline":      "database: " + url + "\n",
		"environment": "database: ${TEST_DATABASE_URL}\n",
		"secret_file": "database: {secret_file: db.url}\n",
	} {
		c, err := Parse([]byte(limitsBase+yaml), dir)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !c.Postgres() || c.DBPath() != url {
			t.Errorf("%s: DBPath %q", name, c.DBPath())
		}
		if strings.Contains(c.Database.String(), "pw") {
			t.Errorf("%s: the URL's password prints", name)
		}
	}
}

func TestDatabaseErrorsNameLineAndKey(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"database: ./hookledger.db\n", "6: database: must be a postgres:// or postgresql:// URL"},
		{"database: ${TEST_UNSET_DATABASE}\n", "6: database: environment variable TEST_UNSET_DATABASE is not set"},
		{"database: {secret_file: missing.url}\n", "6: database: secret_file: open"},
		{"database: [a, b]\n", "6: database: a secret is a string or {secret_file: PATH}"},
	} {
		_, err := Parse([]byte(limitsBase+c.yaml), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
	// Commands that do without webhook secrets still need the database.
	dir := t.TempDir()
	path := filepath.Join(dir, "hookledger.yml")
	os.WriteFile(path, []byte(limitsBase+"database: ${TEST_UNSET_DATABASE}\n"), 0o600)
	if _, err := LoadSecretsOptional(path); err == nil || !strings.Contains(err.Error(), "TEST_UNSET_DATABASE is not set") {
		t.Errorf("LoadSecretsOptional with an unset database variable: %v", err)
	}
}

func TestSetDatabase(t *testing.T) {
	c := &Config{Data: "d"}
	if err := c.SetDatabase("mysql://x"); err == nil {
		t.Error("a mysql URL was taken")
	}
	if err := c.SetDatabase("postgresql://h/db"); err != nil || c.DBPath() != "postgresql://h/db" {
		t.Errorf("%v %q", err, c.DBPath())
	}
}
