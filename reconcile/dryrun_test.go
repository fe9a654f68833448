package reconcile

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hookledger/hookledger/schema"
)

// A dry run opens the database read-only, so it never migrates it: on a
// database from before reconcile's tables (migration 3) it finds no
// checkpoint and counts what a real run would insert, instead of failing.
func TestDryRunOnADatabaseFromBeforeReconcile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, schema.FileName)
	raw, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := raw.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`)
	for _, m := range ms[:2] {
		mustExec(m.SQL)
		mustExec(`INSERT INTO schema_migrations VALUES (?, ?, 0)`, m.Version, m.Name)
	}
	raw.Close()

	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	events := filepath.Join(dir, "events.jsonl")
	var lines string
	for i := range 3 {
		lines += fmt.Sprintf(`{"id":"evt_%d","type":"invoice.paid","created":%d}`+"\n", i, now.Add(-time.Hour).Unix())
	}
	if err := os.WriteFile(events, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := schema.Open(ctx, path, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r := NewReconciler("acme", &FileSource{Path: events}, db, nil, nil, "v1")
	r.Now = func() time.Time { return now }
	rep, err := r.Run(ctx, Options{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Resumed || !rep.Complete || rep.Seen != 3 || rep.Inserted != 3 || rep.AlreadyPresent != 0 || rep.Failed != 0 {
		t.Errorf("report %+v", rep)
	}
}
