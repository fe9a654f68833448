package schema

import (
	"context"
	"path/filepath"
	"testing"
)

func TestOpenAppliesMigrationsOnceWithDurablePragmas(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", FileName)
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ms, err := Migrations()
	if err != nil || len(ms) == 0 {
		t.Fatalf("migrations: %v %v", ms, err)
	}
	for i, m := range ms {
		if i > 0 && m.Version <= ms[i-1].Version {
			t.Errorf("migration %s is out of order", m.Name)
		}
	}
	var applied int
	db.Read.Get(&applied, `SELECT COUNT(*) FROM schema_migrations`)
	if applied != len(ms) {
		t.Errorf("%d migrations recorded, want %d", applied, len(ms))
	}
	if p, err := Pending(ctx, db.Read); err != nil || len(p) != 0 {
		t.Errorf("pending after open: %v %v", p, err)
	}
	var mode string
	var sync, fk, temp int
	db.Write.Get(&temp, `PRAGMA temp_store`)
	if temp != 2 {
		t.Errorf("temp_store=%d, want 2 (MEMORY)", temp)
	}
	db.Write.Get(&mode, `PRAGMA journal_mode`)
	db.Write.Get(&sync, `PRAGMA synchronous`)
	db.Write.Get(&fk, `PRAGMA foreign_keys`)
	if mode != "wal" || sync != 2 || fk != 1 {
		t.Errorf("journal_mode=%s synchronous=%d foreign_keys=%d, want wal 2 (FULL) 1", mode, sync, fk)
	}
	if _, err := db.Read.Exec(`INSERT INTO schema_migrations VALUES (999, 'x', 0)`); err == nil {
		t.Errorf("the read pool accepted a write")
	}
	db.Close()

	db, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.Read.Get(&applied, `SELECT COUNT(*) FROM schema_migrations`)
	if applied != len(ms) {
		t.Errorf("reopen re-applied migrations: %d recorded", applied)
	}
}

func TestReadOnlyOpenRefusesMissingDatabase(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), FileName), Options{ReadOnly: true})
	if err == nil {
		t.Fatal("opened a database that does not exist")
	}
}

func TestPendingOnEmptyDatabaseListsAll(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), FileName)
	db, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Write.Exec(`DROP TABLE schema_migrations`); err != nil {
		t.Fatal(err)
	}
	p, err := Pending(ctx, db.Read)
	ms, _ := Migrations()
	if err != nil || len(p) != len(ms) {
		t.Errorf("pending = %d, %v; want all %d", len(p), err, len(ms))
	}
}
