package schema

import (
	"context"
	"errors"
)

// TruncateWAL folds the write-ahead log into the database file and empties
// it, on the write connection. Only where nothing else checkpoints (never
// while Litestream replicates: it owns the checkpoints): the bench prefill
// runs it so the measured run starts from a small WAL.
func (db *DB) TruncateWAL(ctx context.Context) error {
	if db.Write == nil {
		return errors.New("schema: the database is open read-only")
	}
	if db.Postgres() {
		return nil // the server checkpoints its own WAL
	}
	_, err := db.Write.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}
