package bench

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// PrefillChunk is how many events one pre-fill transaction writes (at
// least: see Prefill for random ids). Large transactions are what make
// pre-filling fast (one fsync per chunk instead of per event); chunking keeps
// the WAL from growing to the size of the database.
const PrefillChunk = 100_000

// Prefill writes n applied events — receipt (holding its delivery attempt)
// and hash-chained usage row each — through the writer and the same
// Delivery.Apply the webhook path uses, but a whole chunk per transaction and
// without HTTP or signatures, so throughput can be measured against a large
// ledger. It is a benchmark fixture: never run it against a production database.
//
// Event ids are PrefillEventID(ids, i), all for one meter ("prefill"),
// spread over 1,000 customers and the 30 days before now. An id that already
// exists fails its chunk, which then adds nothing. progress, if not nil,
// counts events.
//
// Random ids land on random leaves of the three (provider, event_id)
// indexes, which soon outgrow SQLite's page cache (2 MB by default). Two
// things keep their pre-fill within about 1.5 times the CPU time of
// sequential ids (measured at 1,000,000):
//   - A chunk is applied in id order. In event order nearly every insert
//     reads a page back and evicts a dirty one, to dirty it again later in
//     the same transaction; in id order the inserts walk each index once,
//     front to back. At 1,000,000 events that cut the CPU time by a third
//     (a 1 GiB cache gained about as much, for 2 GB more memory). Only the
//     order of rows within a chunk changes, not what they hold.
//   - A chunk is a tenth of n when that is more than PrefillChunk. A
//     transaction writes each index page it touches once, however many
//     inserts landed on it: 100,000 random ids among 10,000,000 touch about
//     one leaf per insert and index, a tenth of them share each leaf between
//     several inserts, as 100,000 do among 1,000,000. (The same ratio at a
//     tenth of the size, 1,000,000 events in chunks of 10,000, wrote 4.6
//     times as much and took 1.8 times as long, its last chunks 2.5 times.)
//     The WAL then peaks at about the indexes' size plus a chunk's rows.
//
// w is an open writer of db without hooks (writer.New with no
// configuration: a bulk loader's); Prefill closes it when the last chunk
// has committed, then folds the WAL into the database.
func Prefill(ctx context.Context, db *schema.DB, w *custody.Writer, provider string, ids IDs, n int, now time.Time, progress *atomic.Int64) error {
	defer w.Close() // after an error; a second Close does nothing
	chunk := PrefillChunk
	if ids == Random {
		chunk = max(chunk, n/10)
	}
	span := (30 * 24 * time.Hour).Milliseconds()
	base := now.UnixMilli() - span
	for from := 0; from < n; from += chunk {
		to := min(from+chunk, n)
		order := prefillOrder(ids, from, to)
		// Each delivery is built as it is applied, so memory holds one
		// chunk's order, not its deliveries.
		op := custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
			for _, i := range order {
				d := prefillEvent(provider, ids, i, base+int64(i)*span/int64(n))
				if err := d.Apply(ctx, tx); err != nil {
					return err
				}
				if d.Outcome != custody.OutcomeInserted {
					return fmt.Errorf("insert receipt %s: already present", d.EventID)
				}
			}
			return nil
		})
		if err := w.Submit(ctx, op); err != nil {
			return err
		}
		if progress != nil {
			progress.Add(int64(to - from))
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	// Fold the WAL into the database so the measured run starts from a small WAL.
	if err := db.TruncateWAL(ctx); err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	// PostgreSQL: statistics and the visibility map made once, here, not
	// by autovacuum during a measured load on a copy.
	if err := db.VacuumAnalyze(ctx); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}

// prefillOrder is the order events from to to-1 are applied in: theirs, or
// for random ids their ids'.
func prefillOrder(ids IDs, from, to int) []int {
	order := make([]int, to-from)
	for k := range order {
		order[k] = from + k
	}
	if ids == Random {
		id := make([]string, len(order))
		for k := range id {
			id[k] = PrefillEventID(ids, from+k)
		}
		slices.SortFunc(order, func(a, b int) int { return strings.Compare(id[a-from], id[b-from]) })
	}
	return order
}

// PrefillRunID is the run id prefilled random ids are derived from.
const PrefillRunID = "prefill"

// PrefillEventID is the id of prefilled event i.
func PrefillEventID(ids IDs, i int) string {
	if ids == Random {
		return RandomEventID(PrefillRunID, i)
	}
	return "prefill-" + strconv.Itoa(i)
}

// prefillEvent is event i as the default mapping would have applied it.
func prefillEvent(provider string, ids IDs, i int, at int64) *custody.Delivery {
	id := PrefillEventID(ids, i)
	customer := "cus_" + strconv.Itoa(i%1000)
	quantity := ledger.Quantity(1+i%1000) * 1000
	body := fmt.Appendf(nil, `{"id":%q,"type":%q,"data":{"customer":%q,"meter":"prefill","quantity":%s}}`,
		id, EventType, customer, quantity)
	sum := sha256.Sum256(body)
	received := time.UnixMilli(at)
	var age time.Duration
	return &custody.Delivery{
		Provider:   provider,
		EventID:    id,
		EventType:  EventType,
		Body:       body,
		BodySHA256: sum[:],
		SignatureHeaders: "Webhook-Id: " + id + "\nWebhook-Timestamp: " + strconv.FormatInt(at/1000, 10) +
			"\nWebhook-Signature: v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n",
		Source:         custody.SourceWebhook,
		HandlerVersion: "bench-prefill",
		ReceivedAt:     received,
		Rows: []ledger.UsageRow{{Customer: customer, Meter: "prefill", Quantity: ledger.TotalOf(quantity),
			OccurredAt: received, Properties: "{}"}},
		Status: custody.StatusApplied,
		Attempt: custody.Attempt{RemoteAddr: "127.0.0.1:40000", UserAgent: "hookledger-bench",
			RequestID: strconv.Itoa(i), SignatureAge: &age, StatusCode: 200},
	}
}
