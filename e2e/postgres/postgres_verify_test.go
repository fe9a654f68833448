package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// verify on a PostgreSQL database set up as docs/postgres.md says: owned by
// a role that is not a superuser (CI's own role is one), so it can neither
// create amcheck nor run its functions until a superuser grants them. Every
// ledger check still runs; the page and index checks are listed as skipped
// with the reason and the exit status is 0; after the doc's GRANTs they run.
func TestPostgresVerifyAsNonSuperuser(t *testing.T) {
	bin := testenv.Binary(t)
	server := os.Getenv(testenv.PostgresEnv)
	if server == "" {
		testenv.NeedService(t, "postgresql", nil)
	}
	ctx := context.Background()
	superuser := func(dsn string) *schema.DB {
		t.Helper()
		db, err := schema.Open(ctx, dsn, schema.Options{ReadOnly: true})
		if err != nil {
			testenv.NeedService(t, "postgresql", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	exec := func(db *schema.DB, stmts ...string) {
		t.Helper()
		for _, s := range stmts {
			if _, err := db.Read.ExecContext(ctx, s); err != nil {
				t.Fatalf("%s: %v", s, err)
			}
		}
	}

	// The role first, so that its cleanup runs after the database's drop.
	var b [6]byte
	rand.Read(b[:])
	role, password := "hookledger_owner_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:])
	root := superuser(server)
	exec(root, `CREATE ROLE `+role+` LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD '`+password+`'`)
	t.Cleanup(func() { root.Read.ExecContext(context.Background(), `DROP ROLE IF EXISTS `+role) })
	dsn := testenv.PostgresDatabase(t)
	exec(root, `ALTER DATABASE `+strings.TrimPrefix(mustURL(t, dsn).Path, "/")+` OWNER TO `+role)
	owner := mustURL(t, dsn)
	owner.User = url.UserPassword(role, password)
	env := []string{"HOOKLEDGER_DATABASE=" + owner.String()}

	dir := t.TempDir()
	run := func(args ...string) (string, error) { return testenv.Run(bin, dir, env, args...) }
	if out, err := run("migrate"); err != nil {
		t.Fatalf("migrate as %s: %v\n%s", role, err, out)
	}
	if out, err := run("adjust", "--customer", "cus_1", "--meter", "api_requests", "--quantity", "5", "--reason", "opening balance",
		"--occurred-at", "2026-11-04T00:00:00Z"); err != nil {
		t.Fatalf("adjust: %v\n%s", err, out)
	}
	type report struct {
		Checks []struct {
			Name     string
			Checked  int64
			Problems []struct{ Message string }
			Skipped  string
		}
	}
	verify := func(wantSkipped string) {
		t.Helper()
		out, err := run("verify", "--format", "json")
		if err != nil {
			t.Fatalf("verify exited %d, want 0: %v\n%s", testenv.ExitCode(err), err, out)
		}
		var rep report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(rep.Checks) != 16 {
			t.Fatalf("%d checks ran, want 16:\n%s", len(rep.Checks), out)
		}
		for _, c := range rep.Checks {
			if len(c.Problems) > 0 {
				t.Errorf("%s: %+v", c.Name, c.Problems)
			}
			switch {
			case c.Name == "integrity_check" && wantSkipped != "":
				if !strings.Contains(c.Skipped, wantSkipped) || c.Checked != 0 {
					t.Errorf("integrity_check: checked %d, skipped %q, want skipped for %q", c.Checked, c.Skipped, wantSkipped)
				}
			case c.Skipped != "":
				t.Errorf("%s was skipped: %s", c.Name, c.Skipped)
			case c.Name == "hash chain" && c.Checked != 1, c.Name == "integrity_check" && c.Checked != 1:
				t.Errorf("%s checked %d, want 1", c.Name, c.Checked)
			}
		}
		table, err := run("verify")
		if wantSkipped != "" && (err != nil || !strings.Contains(table, "integrity_check          0        skipped")) {
			t.Errorf("verify's table (%v):\n%s", err, table)
		}
	}

	// No amcheck, and the owner cannot create it.
	verify("amcheck is not installed in this database")
	// A superuser created it (docs/postgres.md), but granted nothing.
	db := superuser(dsn)
	exec(db, `CREATE EXTENSION IF NOT EXISTS amcheck`)
	verify("may not run amcheck's verify_heapam")
	// The doc's GRANTs: now the page and index checks run.
	exec(db, `GRANT EXECUTE ON FUNCTION verify_heapam(regclass, boolean, boolean, text, bigint, bigint) TO `+role,
		`GRANT EXECUTE ON FUNCTION bt_index_check(regclass, boolean) TO `+role)
	verify("")
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
