package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// PostgresEnv names the PostgreSQL server the PostgreSQL backend's tests
// use: a URL whose user may create databases, e.g.
// postgres://hookledger:hookledger@127.0.0.1:5432/postgres. .ci/run
// installs and starts a server and sets it.
const PostgresEnv = "HOOKLEDGER_TEST_POSTGRES"

// BackendEnv, set to "postgres", runs every Env whose Options.Backend is
// unset on PostgreSQL: .ci/run runs the storage-level packages a second time
// so, beside the tests that are table-driven by backend.
const BackendEnv = "HOOKLEDGER_TEST_BACKEND"

// Backends are the storage backends tests run against (EachBackend).
var Backends = []string{"sqlite", "postgres"}

// EachBackend runs fn as one subtest per backend (Options.Backend).
func EachBackend(t *testing.T, fn func(t *testing.T, backend string)) {
	for _, b := range Backends {
		t.Run(b, func(t *testing.T) { fn(t, b) })
	}
}

// PostgresDatabase creates a fresh database on the server PostgresEnv names
// and returns its URL; the test's cleanup drops it. Without a server the
// test fails in CI and is skipped elsewhere (NeedService).
func PostgresDatabase(t testing.TB) string {
	t.Helper()
	server := os.Getenv(PostgresEnv)
	if server == "" {
		NeedService(t, "postgresql", errors.New(PostgresEnv+" is not set (see README: Tests)"))
	}
	var b [6]byte
	rand.Read(b[:])
	name := "hookledger_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dsn, err := schema.CreatePostgresDatabase(ctx, server, name)
	if err != nil {
		NeedService(t, "postgresql", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := schema.DropPostgresDatabase(ctx, server, name); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
	return dsn
}

// NeedService stops a test that needs an external service it cannot reach:
// in CI (HOOKLEDGER_CI set, as .ci/run does) the test fails, since CI
// installs and starts every service; elsewhere it is skipped, saying why.
func NeedService(t testing.TB, name string, err error) {
	t.Helper()
	if os.Getenv("HOOKLEDGER_CI") != "" {
		t.Fatalf("%s is needed and not reachable (CI starts it): %v", name, err)
	}
	t.Skipf("%s is not reachable, skipping (CI runs this test): %v", name, err)
}

// SQLiteOnly skips a test in the PostgreSQL pass (BackendEnv) whose subject
// is SQLite's own (its locks, its files, a tampering done in its dialect);
// it has run on SQLite in the main pass.
func SQLiteOnly(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(BackendEnv) == "postgres" {
		t.Skip("SQLite only: " + why)
	}
}
