package schema

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/jmoiron/sqlx"
)

// A read through the prepared statements answers as the pool does, from
// concurrent readers, and a statement that does not prepare (its table
// missing) is not kept: it runs unprepared, reports its error, and
// prepares once the table exists.
func TestPreparedReads(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), FileName), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const query = `SELECT n FROM later WHERE n >= ? ORDER BY n`
	var ns []int
	if err := sqlx.SelectContext(ctx, db.hot, &ns, query, 0); err == nil {
		t.Fatal("a read of a missing table succeeded")
	}
	if len(db.hot.stmts) != 0 {
		t.Fatalf("a statement that failed to prepare was kept: %v", db.hot.stmts)
	}
	db.Write.MustExec(`CREATE TABLE later (n INTEGER)`)
	db.Write.MustExec(`INSERT INTO later (n) VALUES (1), (2), (3)`)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			var got []int
			if err := sqlx.SelectContext(ctx, db.hot, &got, query, 2); err != nil || len(got) != 2 || got[0] != 2 || got[1] != 3 {
				t.Errorf("prepared read: %v, %v", got, err)
			}
		})
	}
	wg.Wait()
	if len(db.hot.stmts) != 1 {
		t.Fatalf("%d statements kept, want 1", len(db.hot.stmts))
	}
}
