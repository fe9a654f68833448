package schema_test

import (
	"context"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// Two receivers' writers on one PostgreSQL database: A's batch writes a
// relay's destination row and then reads the chain head, B's reads the head
// and then writes the same row, the orders a batch's ops come in. Were the
// head locked only when a batch first reads it, B would hold the head and
// wait for A's row while A waits for the head: PostgreSQL ends one of them
// with "deadlock detected", and its deliveries get 503. Every batch locks
// the head as it begins, so B waits for A's whole batch and both commit.
func TestPostgresBatchesLockTheHeadFirst(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.PostgresDatabase(t)
	writers := make([]*schema.Writer, 2)
	for i := range writers {
		db, err := schema.Open(ctx, dsn, schema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if writers[i], err = db.OpenWriter(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { writers[i].Close() })
	}
	wa, wb := writers[0], writers[1]
	db, err := schema.Open(ctx, dsn, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	a, err := wa.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Rollback()
	if err := a.SaveBackoff(ctx, schema.DestinationState{Name: "app", Failures: 1, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			b, err := wb.Begin(ctx)
			if err != nil {
				return err
			}
			defer b.Rollback()
			if _, err := b.LatestHead(ctx); err != nil {
				return err
			}
			if err := b.SaveBackoff(ctx, schema.DestinationState{Name: "app", Failures: 2, UpdatedAt: 2}); err != nil {
				return err
			}
			return b.Commit()
		}()
	}()
	// A goes on once B waits for one of A's locks (the head's, or, locked
	// late, the destination row's).
	await.Eventually(t, 10*time.Second, "B waiting for A's locks", func() bool {
		var waiting int
		if err := db.Read.GetContext(ctx, &waiting, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	if _, err := a.LatestHead(ctx); err != nil {
		t.Fatalf("A: %v", err)
	}
	if err := a.Commit(); err != nil {
		t.Fatalf("A: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("B: %v", err)
	}
	var failures int
	if err := db.Read.GetContext(ctx, &failures, `SELECT failures FROM forward_destinations WHERE name = 'app'`); err != nil || failures != 2 {
		t.Errorf("the destination has %d failures (%v), want B's 2, written after A's", failures, err)
	}
}
