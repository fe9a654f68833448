// Package seed generates a synthetic ledger for development and the
// invoicing benchmarks: many customers, three meters with different
// aggregations (four with Exports), events spread over months. Every event goes through the one
// apply path (custody.Delivery inside the writer), so the database it leaves
// has receipts, delivery attempts and a valid hash chain, and verifies clean.
package seed

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// Meters are the meters seeded events use; put them in hookledger.yml to
// aggregate a seeded database the same way.
var Meters = []ledger.Meter{
	{Name: "api_requests", Aggregation: ledger.AggSum, Unit: "requests"},
	{Name: "storage_gb", Aggregation: ledger.AggMax, Unit: "GB"},
	{Name: "active_users", Aggregation: ledger.AggUniqueCount, Property: "user", Properties: []string{"user"}, Unit: "users"},
}

// Exports is the fourth meter Options.Exports adds: a count, so that a plan
// can price four meters with four different models (the priced-close
// benchmark).
var Exports = ledger.Meter{Name: "exports", Aggregation: ledger.AggSum, Unit: "exports"}

// Models are the values of api_requests' model dimension with Options.Models.
var Models = []string{"gpt-4o", "gpt-4o-mini", "o1", "claude"}

// MetersOf are the meters a seed run with o uses.
func MetersOf(o Options) []ledger.Meter {
	ms := slices.Clone(Meters)
	if o.Exports {
		ms = append(ms, Exports)
	}
	if o.Models {
		ms[0].Dimensions, ms[0].Properties = []string{"model"}, []string{"model"}
	}
	return ms
}

// Options describe a seed run. Zero fields take the documented defaults.
type Options struct {
	Rows      int       // usage rows to add, one event each (required)
	Customers int       // default 10,000
	From      time.Time // first event time; default 2026-01-01T00:00:00Z
	Months    int       // events spread evenly over this many months; default 12
	Seed      uint64    // PRNG seed, so a run can be repeated; default 1
	Chunk     int       // events per write transaction; default 20,000
	Provider  string    // receipts' provider; default "seed"
	// Exports adds the meter Exports (sum, 1 to 10 per event), taking one
	// event in ten from api_requests. Without it the data is what it always
	// was for a given Seed.
	Exports bool
	// Models gives api_requests the dimension model: each of its rows has
	// one of Models (the dimensional benchmarks). Without it the data is
	// what it always was for a given Seed.
	Models bool
	// Progress, if set, is called after each chunk with the rows written so far.
	Progress func(done int)
}

// Run appends o.Rows events through a writer of its own. Event ids carry a
// random run id, so seeding twice adds to the ledger instead of colliding.
func Run(ctx context.Context, db *schema.DB, o Options) error {
	if o.Rows <= 0 {
		return errors.New("seed: rows must be positive")
	}
	if o.Customers == 0 {
		o.Customers = 10_000
	}
	if o.Customers < 0 {
		return errors.New("seed: customers must be positive")
	}
	if o.From.IsZero() {
		o.From = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if o.Months == 0 {
		o.Months = 12
	}
	if o.Months < 0 {
		return errors.New("seed: months must be positive")
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.Chunk <= 0 {
		o.Chunk = 20_000
	}
	if o.Provider == "" {
		o.Provider = "seed"
	}
	var runID [4]byte
	if _, err := rand.Read(runID[:]); err != nil {
		return err
	}
	run := hex.EncodeToString(runID[:])

	// A larger page cache keeps the random-order index inserts of a large
	// seed off the disk; it only affects this process's write connection.
	if err := db.GrowWriteCache(ctx, 512<<10); err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	w := writer.New(db, nil) // a bulk loader: no configuration, no hooks
	if err := w.Open(ctx); err != nil {
		return err
	}
	defer w.Close()

	rng := mrand.New(mrand.NewPCG(o.Seed, 0x5eed))
	start := o.From.UnixMilli()
	span := o.From.AddDate(0, o.Months, 0).UnixMilli() - start
	for done := 0; done < o.Rows; {
		n := min(o.Chunk, o.Rows-done)
		ds := make([]*custody.Delivery, n)
		for i := range ds {
			k := done + i
			// Event times rise with k (as real traffic arrives roughly in
			// order) with up to a minute of jitter.
			at := start + int64(float64(span)*float64(k)/float64(o.Rows)) + rng.Int64N(60_000)
			ds[i] = event(rng, o, fmt.Sprintf("seed-%s-%09d", run, k), min(at, start+span-1))
		}
		op := custody.OpFunc(func(ctx context.Context, tx *custody.Tx) error {
			for _, d := range ds {
				if err := d.Apply(ctx, tx); err != nil {
					return err
				}
			}
			return nil
		})
		if err := w.Submit(ctx, op); err != nil {
			return fmt.Errorf("seed: rows %d-%d: %w", done, done+n, err)
		}
		done += n
		if o.Progress != nil {
			o.Progress(done)
		}
	}
	return w.Close()
}

// event builds one applied delivery with the usage row the default mapping
// would extract from its body.
func event(rng *mrand.Rand, o Options, id string, at int64) *custody.Delivery {
	c := rng.IntN(o.Customers)
	customer := fmt.Sprintf("cus_%05d", c)
	occurred := time.UnixMilli(at).UTC()
	row := ledger.UsageRow{Customer: customer, OccurredAt: occurred, Properties: "{}"}
	switch r := rng.IntN(10); {
	case o.Exports && r == 5:
		row.Meter, row.Quantity = Exports.Name, ledger.TotalOf(ledger.Quantity(1+rng.IntN(10))*ledger.Scale)
	case r < 6:
		row.Meter, row.Quantity = "api_requests", ledger.TotalOf(ledger.Quantity(1+rng.IntN(100))*ledger.Scale)
		if o.Models {
			row.Properties = fmt.Sprintf(`{"model":%q}`, Models[rng.IntN(len(Models))])
		}
	case r < 8:
		row.Meter, row.Quantity = "storage_gb", ledger.TotalOf(ledger.Quantity(1+rng.IntN(500_000))*1000) // 0.001 to 500 GB
	default:
		row.Meter, row.Quantity = "active_users", ledger.TotalOf(ledger.Scale)
		row.Properties = fmt.Sprintf(`{"user":"u%03d"}`, rng.IntN(50))
	}
	body := fmt.Appendf(nil, `{"id":%q,"type":"usage.recorded","data":{"customer":%q,"meter":%q,"quantity":%s,"occurred_at":%q,"properties":%s}}`,
		id, customer, row.Meter, row.Quantity, occurred.Format(time.RFC3339Nano), row.Properties)
	sum := sha256.Sum256(body)
	return &custody.Delivery{
		Provider:       o.Provider,
		EventID:        id,
		EventType:      "usage.recorded",
		Body:           body,
		BodySHA256:     sum[:],
		Source:         custody.SourceWebhook,
		HandlerVersion: "hookledger-seed",
		ReceivedAt:     occurred.Add(time.Duration(rng.IntN(2000)) * time.Millisecond),
		Rows:           []ledger.UsageRow{row},
		Status:         custody.StatusApplied,
		Attempt:        custody.Attempt{RemoteAddr: "127.0.0.1:0", UserAgent: "hookledger-seed", StatusCode: 200},
	}
}
