package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// PrefillChunk is how many events one pre-fill transaction writes. Large
// transactions are what make pre-filling fast (one fsync per chunk instead of
// per event); chunking keeps the WAL from growing to the size of the database.
const PrefillChunk = 100_000

// Prefill writes n applied events straight into the database — receipt,
// delivery attempt and hash-chained usage row each, as the webhook path would
// leave them — so throughput can be measured against a large ledger. It
// bypasses the HTTP path and the writer: it is a benchmark fixture only, and
// must never run against a production database.
//
// Event ids are prefill-<n>, all for one meter ("prefill"), spread over 1,000
// customers and the 30 days before now. progress, if not nil, counts events.
func Prefill(ctx context.Context, db *schema.DB, provider string, n int, now time.Time, progress *atomic.Int64) error {
	for start := 0; start < n; start += PrefillChunk {
		if err := prefillChunk(ctx, db, provider, start, min(start+PrefillChunk, n), now, progress); err != nil {
			return err
		}
	}
	// Fold the WAL into the database so the measured run starts from a small WAL.
	if _, err := db.Write.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	return nil
}

func prefillChunk(ctx context.Context, db *schema.DB, provider string, from, to int, now time.Time, progress *atomic.Int64) error {
	tx, err := db.Write.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	receipt, err := tx.PreparexContext(ctx, `INSERT INTO receipts
		(provider, event_id, event_type, body, body_sha256, signature_headers, status, handler_version, source, received_at, processed_at)
		VALUES (?, ?, ?, ?, ?, ?, 'applied', 'bench-prefill', 'webhook', ?, ?)`)
	if err != nil {
		return fmt.Errorf("prepare receipt insert: %w", err)
	}
	defer receipt.Close()
	attempt, err := tx.PreparexContext(ctx, `INSERT INTO delivery_attempts
		(provider, event_id, received_at, remote_addr, user_agent, request_id, body_sha256, signature_headers, signature_age_ms, outcome, status_code)
		VALUES (?, ?, ?, '127.0.0.1:40000', 'hookledger-bench', ?, ?, ?, 0, 'inserted', 200)`)
	if err != nil {
		return fmt.Errorf("prepare attempt insert: %w", err)
	}
	defer attempt.Close()
	usage, err := tx.PreparexContext(ctx, ledger.InsertRowSQL)
	if err != nil {
		return fmt.Errorf("prepare usage insert: %w", err)
	}
	defer usage.Close()
	chain, err := ledger.LoadChain(ctx, tx)
	if err != nil {
		return err
	}

	span := (30 * 24 * time.Hour).Milliseconds()
	base := now.UnixMilli() - span
	for i := from; i < to; i++ {
		id := "prefill-" + strconv.Itoa(i)
		customer := "cus_" + strconv.Itoa(i%1000)
		quantity := ledger.Quantity(1+i%1000) * 1000
		at := base + int64(i)*span/int64(max(to, 1))
		body := fmt.Appendf(nil, `{"id":%q,"type":%q,"data":{"customer":%q,"meter":"prefill","quantity":%s}}`,
			id, EventType, customer, quantity)
		sum := sha256.Sum256(body)
		sig := "Webhook-Id: " + id + "\nWebhook-Timestamp: " + strconv.FormatInt(at/1000, 10) +
			"\nWebhook-Signature: v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
		if _, err := receipt.ExecContext(ctx, provider, id, EventType, body, sum[:], sig, at, at); err != nil {
			return fmt.Errorf("insert receipt %s: %w", id, err)
		}
		if _, err := attempt.ExecContext(ctx, provider, id, at, strconv.Itoa(i), sum[:], sig); err != nil {
			return fmt.Errorf("insert attempt %s: %w", id, err)
		}
		row := ledger.Row{Kind: ledger.KindUsage, Provider: provider, EventID: id, Customer: customer,
			Meter: "prefill", Quantity: quantity, Properties: "{}", OccurredAt: at, RecordedAt: at}
		if err := chain.Append(ctx, usage, &row); err != nil {
			return err
		}
		if progress != nil {
			progress.Add(1)
		}
	}
	return tx.Commit()
}
