package custody

import (
	"context"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// What an op outside this package may write in the writer's transaction,
// by concern. Every write of the product goes through the writer's queue
// as an Op: the custody of events (Delivery, SubmitAll), the ledger's rows
// (Tx.Append, Tx.AppendEvent: chain, usage state, alerts and pushes
// together), corrections (correct.go), replays (replay.go), and the four
// concerns below. Each is a part of the storage batch (schema.Batch, which
// no other package holds), so reading this file tells what can be written
// beside the ledger and by whom.
//
// Written outside the queue, each in one transaction of its own on the
// write handle, as named exceptions:
//   - a period's close (invoice.Close, schema.CloseTx): its transaction
//     holds the write lock from its start, so the cutoff and the highest
//     ledger id it covers describe one moment; its invoices, seal, Stripe
//     pushes and invoice pushes commit together;
//   - the customer registry (ledger's RegistryTx: customers add, update,
//     link; plan assignments), limit and spend overrides, and API keys:
//     an operator's rows that no event's transaction touches, written by
//     their commands and the admin API.

// Outbox is what the relay and an operator write to the outbox
// (forward): claims and their leases, the outcomes of attempts, a
// destination's backoff and pause, retries and purges.
type Outbox interface {
	EnsureDestination(ctx context.Context, name string, now int64) error
	ClaimOutbox(ctx context.Context, destination string, now, leaseUntil int64, limit int) ([]schema.OutboxClaim, error)
	ClaimProbe(ctx context.Context, destination string, now, leaseUntil int64) ([]schema.OutboxClaim, error)
	RenewClaims(ctx context.Context, ids []int64, until, next int64) (int64, error)
	ReleaseClaims(ctx context.Context, destination string, now int64) (int64, error)
	RecordOutboxResults(ctx context.Context, rs []schema.OutboxResult) error
	ReleaseOutbox(ctx context.Context, ids []int64, now int64) error
	ResumeOutbox(ctx context.Context, destination string, now, notBefore int64) (int64, error)
	SaveBackoff(ctx context.Context, st schema.DestinationState) error
	SetPaused(ctx context.Context, name string, paused bool, now int64) error
	RetryOutbox(ctx context.Context, sel schema.OutboxRetry, now int64) (int64, error)
	PurgeDead(ctx context.Context, destination string, before int64) (int64, error)
}

// Stripe is what billing sync writes and reads in a transaction (stripe,
// forward's Stripe destinations): a row's push and the running totals it
// carries, Stripe's reports and invoice events linked to what they name,
// the sends the relay stores before its requests, and what Stripe
// answered for an invoice.
type Stripe interface {
	InsertStripePush(ctx context.Context, p schema.StripePush, destination string, now int64) (int64, error)
	AddToStripePush(ctx context.Context, p schema.StripePush) error
	LastStripePush(ctx context.Context, customer, meter string, periodStart int64) (schema.StripePush, error)
	LastStripeCustomer(ctx context.Context, customer string) (string, error)
	PushOfRow(ctx context.Context, ledgerID int64) (schema.StripePush, bool, error)
	StripePushID(ctx context.Context, identifier string) (int64, error)
	LatestStripePush(ctx context.Context, meter string, customers []string, stripeCustomer string) (int64, error)
	InsertStripeReport(ctx context.Context, r schema.StripeReport, now int64) error
	CustomersLinkedTo(ctx context.Context, stripeCustomer string, decode func(externalIDs string) string) ([]string, error)
	LinePushInvoices(ctx context.Context, customers []string, stripeCustomer string, from, to int64) ([]int64, error)
	InvoiceExists(ctx context.Context, id int64) (bool, error)
	InsertStripeInvoiceState(ctx context.Context, s schema.StripeInvoiceState, now int64) error
	InsertStripeSend(ctx context.Context, s schema.StripeSend, pushes []int64, now int64) error
	RestampStripeSend(ctx context.Context, identifier string, timestamp int64) error
	InsertStripeInvoiceResult(ctx context.Context, pushID int64, r schema.StripeInvoiceResult, now int64) error
}

// Retention is what pruning writes (reconcile's retention job, prune):
// bodies and receipts past their retention, delivered outbox messages,
// and the run's record.
type Retention interface {
	PruneReceipts(ctx context.Context, p schema.Prune, ids []int64, before int64) (changed, tampered []int64, err error)
	MarkBodiesPruned(ctx context.Context, before int64) error
	MarkReceiptsPruned(ctx context.Context, throughID int64) error
	PruneDelivered(ctx context.Context, before int64, limit int) (int64, error)
	DeleteRedeliveryRequests(ctx context.Context, before int64) (int64, error)
	RecordPrune(ctx context.Context, r schema.PruneRun) error
}

// Reconcile is what reconciliation writes beside the events it takes
// into custody: its checkpoint and the redeliveries it asked for.
type Reconcile interface {
	SaveCheckpoint(ctx context.Context, cp schema.Checkpoint) error
	RecordRedelivery(ctx context.Context, r schema.Redelivery) error
}

// Outbox is the transaction's outbox writes.
func (b *Tx) Outbox() Outbox { return b.b }

// Stripe is the transaction's billing sync writes.
func (b *Tx) Stripe() Stripe { return b.b }

// Retention is the transaction's pruning writes.
func (b *Tx) Retention() Retention { return b.b }

// Reconcile is the transaction's reconciliation writes.
func (b *Tx) Reconcile() Reconcile { return b.b }

// Refs resolves what an adjustment or a void refers to, in the
// transaction that appends it (ledger.Adjustment.Row).
func (b *Tx) Refs() ledger.RefResolver { return b.b }
