package schema

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// The SQLite writer prepares a statement its batches ran twice, before the
// next batch, and then runs it prepared: its answers are the unprepared
// ones', also after the table it reads changed shape. A statement that
// fails (its table missing) is never kept; texts past the bound run
// unprepared and still answer.
func TestWriterPreparesWhatBatchesRepeat(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), FileName), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := db.OpenWriter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	batch := func(fn func(b Batch)) {
		t.Helper()
		b, err := w.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fn(b)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	prepared := func(q string) bool {
		w.stmts.mu.Lock()
		defer w.stmts.mu.Unlock()
		_, ok := w.stmts.prepared[q]
		return ok
	}

	const insert, sum = `INSERT INTO later (n) VALUES (?)`, `SELECT COALESCE(SUM(n), 0) FROM later`
	for i := range 2 {
		batch(func(b Batch) {
			if _, err := b.tx.ExecContext(ctx, insert, 1); err == nil {
				t.Fatal("an insert into a missing table succeeded")
			}
		})
		if i == 0 && prepared(insert) {
			t.Fatal("a statement run once was prepared")
		}
	}
	batch(func(b Batch) {}) // the next Begin prepares what ran twice
	if prepared(insert) {
		t.Fatal("a statement that failed was kept")
	}

	db.Write.MustExec(`CREATE TABLE later (n INTEGER)`)
	want := 0
	for i := 1; i <= 4; i++ {
		batch(func(b Batch) {
			if _, err := b.tx.ExecContext(ctx, insert, i); err != nil {
				t.Fatal(err)
			}
			want += i
			var got int
			if err := b.tx.QueryRowContext(ctx, sum).Scan(&got); err != nil || got != want {
				t.Fatalf("batch %d: sum %d (%v), want %d", i, got, err, want)
			}
		})
	}
	if !prepared(insert) || !prepared(sum) {
		t.Fatalf("after four batches: insert prepared %v, sum prepared %v", prepared(insert), prepared(sum))
	}

	db.Write.MustExec(`ALTER TABLE later ADD COLUMN m INTEGER NOT NULL DEFAULT 5`)
	batch(func(b Batch) {
		if _, err := b.tx.ExecContext(ctx, insert, 10); err != nil {
			t.Fatal(err)
		}
		var got int
		if err := b.tx.QueryRowContext(ctx, sum).Scan(&got); err != nil || got != want+10 {
			t.Fatalf("after the table changed: sum %d (%v), want %d", got, err, want+10)
		}
	})

	for round := range 3 {
		batch(func(b Batch) {
			for i := range maxWriterStmts + 10 {
				var got int
				if err := b.tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT %d`, i)).Scan(&got); err != nil || got != i {
					t.Fatalf("round %d: SELECT %d answered %d (%v)", round, i, got, err)
				}
			}
		})
	}
	w.stmts.mu.Lock()
	n := len(w.stmts.prepared)
	w.stmts.mu.Unlock()
	if n != maxWriterStmts {
		t.Fatalf("%d statements prepared, want the bound %d", n, maxWriterStmts)
	}
}
