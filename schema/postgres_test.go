package schema

import (
	"context"
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
