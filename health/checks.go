package health

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/schema"
)

// Writable probes the write path through the writer itself: an empty item
// waits its turn in the queue like a delivery, then the writer's batch must
// take the write lock and commit. It fails when the writer is closed or its
// queue is full, when another process holds the write lock, or when the
// begin or the commit fails. Going through the writer, rather than a second connection,
// means a busy writer is never mistaken for a locked database. It writes no
// row, so it proves the lock and the commit path but not free space: the
// disk check covers that.
func Writable(w *custody.Writer) CheckFunc {
	probe := custody.OpFunc(func(context.Context, *custody.Tx) error { return nil })
	return func(ctx context.Context) error {
		if err := w.Submit(ctx, probe); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return errors.New("write probe timed out: the writer could not commit (is the database locked?)")
			}
			return fmt.Errorf("write probe: %w", err)
		}
		return nil
	}
}

// MigrationState is what Migrated reads from storage; *schema.DB satisfies it.
type MigrationState interface {
	PendingMigrations(ctx context.Context) ([]schema.Migration, error)
	SchemaVersion(ctx context.Context) (int, error)
	Migrations() ([]schema.Migration, error) // this binary's, for the database's engine
}

// Migrated checks that every embedded migration is applied and that the
// database has none this binary does not know (a newer binary migrated it).
func Migrated(db MigrationState) CheckFunc {
	return func(ctx context.Context) error {
		pending, err := db.PendingMigrations(ctx)
		if err != nil {
			return fmt.Errorf("read migrations: %w", err)
		}
		if len(pending) > 0 {
			names := make([]string, len(pending))
			for i, m := range pending {
				names[i] = m.Name
			}
			return fmt.Errorf("%d migration(s) not applied: %s", len(pending), strings.Join(names, ", "))
		}
		all, err := db.Migrations()
		if err != nil {
			return err
		}
		newest, err := db.SchemaVersion(ctx)
		if err != nil {
			return fmt.Errorf("read migrations: %w", err)
		}
		if known := all[len(all)-1].Version; newest > known {
			return fmt.Errorf("database is at migration %d but this binary knows only up to %d: run the newer binary", newest, known)
		}
		return nil
	}
}
