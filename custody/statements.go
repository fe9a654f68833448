package custody

import (
	"context"
	"errors"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/schema"
)

// statements are prepared once on the write connection; batches bind them to
// their transaction without preparing again.
type statements struct {
	insertReceipt *sqlx.Stmt
	storedReceipt *sqlx.Stmt
	insertAttempt *sqlx.Stmt
	insertRow     *sqlx.Stmt
	saveHead      *sqlx.Stmt
}

const (
	insertReceiptSQL = `INSERT INTO receipts
	(id, provider, event_id, event_type, body, body_sha256, signature_headers, status, error, handler_version, source, received_at, processed_at,
	 prev_hash, row_hash)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (provider, event_id) DO NOTHING`
	storedReceiptSQL = `SELECT body_sha256, status FROM receipts WHERE provider = ? AND event_id = ?`
	insertAttemptSQL = `INSERT INTO delivery_attempts
	(provider, event_id, received_at, remote_addr, user_agent, request_id, body_sha256, signature_headers, signature_age_ms, outcome, status_code)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
)

func (s *statements) prepare(ctx context.Context, db *sqlx.DB) error {
	for _, p := range []struct {
		dst   **sqlx.Stmt
		query string
	}{
		{&s.insertReceipt, insertReceiptSQL},
		{&s.storedReceipt, storedReceiptSQL},
		{&s.insertAttempt, insertAttemptSQL},
		{&s.insertRow, schema.InsertLedgerRowSQL},
		{&s.saveHead, schema.SaveHeadSQL},
	} {
		st, err := db.PreparexContext(ctx, p.query)
		if err != nil {
			s.close()
			return fmt.Errorf("prepare: %w", err)
		}
		*p.dst = st
	}
	return nil
}

// bind returns the statements bound to tx. Because the writer has a single
// connection, database/sql reuses the statements prepared on it.
func (s *statements) bind(ctx context.Context, tx *sqlx.Tx) statements {
	return statements{
		insertReceipt: tx.StmtxContext(ctx, s.insertReceipt),
		storedReceipt: tx.StmtxContext(ctx, s.storedReceipt),
		insertAttempt: tx.StmtxContext(ctx, s.insertAttempt),
		insertRow:     tx.StmtxContext(ctx, s.insertRow),
		saveHead:      tx.StmtxContext(ctx, s.saveHead),
	}
}

func (s *statements) close() error {
	var errs []error
	for _, st := range []*sqlx.Stmt{s.insertReceipt, s.storedReceipt, s.insertAttempt, s.insertRow, s.saveHead} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
