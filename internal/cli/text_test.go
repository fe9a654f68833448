package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// Every command that stores text it is given refuses text no backend can
// store as text (here a byte that is not UTF-8: an argument cannot hold a
// NUL) with an error naming the field, and stores nothing; before,
// PostgreSQL failed with its raw SQL error and SQLite stored the bytes.
func TestCommandsRefuseUnstorableText(t *testing.T) {
	testenv.EachBackend(t, testCommandsRefuseUnstorableText)
}

func testCommandsRefuseUnstorableText(t *testing.T, backend string) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "hookledger.yml")
	database, setting := filepath.Join(dir, "data", schema.FileName), ""
	if backend == "postgres" {
		database = testenv.PostgresDatabase(t)
		setting = fmt.Sprintf("database: %q\n", database)
	}
	err := os.WriteFile(cfg, fmt.Appendf(nil, `data: %s
%sproviders:
  - name: test
    scheme: github
    secrets: ["s3cret"]
meters:
  - name: api
plans:
  - name: basic
    currency: USD
    effective_from: 2026-01-01
    fee: "5.00"
`, filepath.Join(dir, "data"), setting), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &out
		if n := 2 - strings.Count(args[1][:1], "-"); args[0] != "migrate" { // after the command and its subcommand
			args = append(args[:n:n], append([]string{"--config", cfg}, args[n:]...)...)
		}
		err := app.Run(append([]string{"hookledger"}, args...))
		return out.String(), err
	}
	if out, err := run("migrate", "--config", cfg); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	if out, err := run("customers", "add", "--name", "Acme\tInc.", "cus_1"); err != nil {
		t.Fatalf("customers add: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"customers", "add", "--name", "Ac\xffme", "cus_2"}, "name: is not valid UTF-8"},
		{[]string{"customers", "add", "--email", "a@b\xc3", "cus_2"}, "email: is not valid UTF-8"},
		{[]string{"customers", "add", "--note", "\xff", "cus_2"}, "note: is not valid UTF-8"},
		{[]string{"customers", "update", "--name", "\xffAcme", "cus_1"}, "name: is not valid UTF-8"},
		{[]string{"plan", "assign", "--from", "2026-02-01", "--note", "\xff", "cus_1", "basic"}, "note: is not valid UTF-8"},
		{[]string{"adjust", "--customer", "cus_1", "--meter", "api", "--quantity", "-1", "--reason", "refund \xff"}, "reason: is not valid UTF-8"},
		{[]string{"void", "--reason", "dup \xff", "--actor", "ops", "test", "evt_1"}, "reason: is not valid UTF-8"},
		{[]string{"limits", "set", "--from", "2026-02-01", "--note", "\xff", "cus_1", "api", "100"}, "note: is not valid UTF-8"},
	} {
		out, err := run(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v\n%s\nwant an error with %q", tc.args, err, out, tc.want)
		}
	}
	db, err := schema.Open(context.Background(), database, schema.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for table, want := range map[string]int64{"customers": 1, "plan_assignments": 0, "metered_usage": 0, "limit_overrides": 0} {
		if n, err := db.CountRows(context.Background(), table); err != nil || n != want {
			t.Errorf("%s: %d rows (%v), want %d", table, n, err, want)
		}
	}
}
