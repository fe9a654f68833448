package schema

import (
	"context"
	"net/url"
	"os"
	"strings"
	"testing"
)

// A PostgreSQL URL that cannot be parsed is refused without repeating it: it
// may hold a password.
func TestOpenPostgresBadURLHidesIt(t *testing.T) {
	_, err := Open(context.Background(), "postgres://hl:s3cret-pw@db.internal:notaport/hookledger", Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret-pw") || !strings.Contains(err.Error(), "cannot parse the database URL") {
		t.Fatalf("error %v, want a parse error without the password", err)
	}
}

// Only plain names reach CREATE DATABASE (they cannot be bound parameters).
func TestPlainIdentifier(t *testing.T) {
	for _, bad := range []string{"", "Bad", "x-y", "1abc", strings.Repeat("a", 64)} {
		if plainIdentifier(bad) {
			t.Errorf("%q passed as a database name", bad)
		}
	}
	if !plainIdentifier("hookledger_test_01") {
		t.Error("a plain name was refused")
	}
}

// A copy made with CopyPostgresDatabase holds the template's rows, and a
// note set on a database reads back (the benchmarks reuse a pre-filled
// database by it); a database that does not exist has none.
func TestCopyPostgresDatabase(t *testing.T) {
	ctx := context.Background()
	server := os.Getenv("HOOKLEDGER_TEST_POSTGRES")
	template := freshPostgres(t)
	db, err := Open(ctx, template, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Write.MustExec(`INSERT INTO receipts (id, provider, event_id, body_sha256, status, handler_version, source, received_at, processed_at)
		VALUES (1, 'stripe', 'evt_1', '\x00', 'applied', 'v1', 'webhook', 0, 0)`)
	if err := db.VacuumAnalyze(ctx); err != nil {
		t.Fatal(err)
	}
	db.Close()
	name := strings.TrimPrefix(mustURL(t, template).Path, "/")

	if note, ok, err := PostgresDatabaseNote(ctx, server, name); err != nil || !ok || note != "" {
		t.Fatalf("note of a new database: %q %v %v", note, ok, err)
	}
	if err := SetPostgresDatabaseNote(ctx, server, name, "it's done"); err != nil {
		t.Fatal(err)
	}
	if note, ok, err := PostgresDatabaseNote(ctx, server, name); err != nil || !ok || note != "it's done" {
		t.Fatalf("note: %q %v %v", note, ok, err)
	}
	if _, ok, err := PostgresDatabaseNote(ctx, server, "hookledger_test_none"); err != nil || ok {
		t.Fatalf("a database that does not exist: %v %v", ok, err)
	}

	copyName := name + "_copy"
	dsn, err := CopyPostgresDatabase(ctx, server, copyName, name)
	if err != nil {
		t.Fatal(err)
	}
	defer DropPostgresDatabase(ctx, server, copyName)
	c, err := Open(ctx, dsn, Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ok, err := c.HasReceipt(ctx, "stripe", "evt_1"); err != nil || !ok {
		t.Fatalf("the copy's receipt: %v %v", ok, err)
	}
	if _, err := CopyPostgresDatabase(ctx, server, "x_copy", "Bad-Name"); err == nil {
		t.Error("a template name that is not a plain identifier reached CREATE DATABASE")
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
