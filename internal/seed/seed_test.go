package seed_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/internal/seed"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

func TestSeedWritesAVerifiableLedger(t *testing.T) {
	ctx := context.Background()
	db, err := schema.Open(ctx, filepath.Join(t.TempDir(), schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var progress []int
	err = seed.Run(ctx, db, seed.Options{Rows: 2500, Customers: 20, Months: 2, Chunk: 1000,
		From: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), Progress: func(n int) { progress = append(progress, n) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(progress) != 3 || progress[2] != 2500 {
		t.Fatalf("progress: %v", progress)
	}
	var rows, customers, receipts int
	var minAt, maxAt int64
	db.Read.QueryRowx(`SELECT COUNT(*), COUNT(DISTINCT customer_id), MIN(occurred_at), MAX(occurred_at) FROM metered_usage`).Scan(&rows, &customers, &minAt, &maxAt)
	db.Read.QueryRowx(`SELECT COUNT(*) FROM receipts WHERE status = 'applied'`).Scan(&receipts)
	if rows != 2500 || receipts != 2500 || customers != 20 {
		t.Fatalf("rows %d, receipts %d, customers %d", rows, receipts, customers)
	}
	if minAt < time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixMilli() || maxAt >= time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC).UnixMilli() {
		t.Fatalf("event times %d..%d outside March-April", minAt, maxAt)
	}
	rep, err := invoice.Verify(ctx, db)
	if err != nil || rep.First() != nil {
		t.Fatalf("seeded ledger does not verify: %v %v", rep.First(), err)
	}
	// All three meters and their aggregations show up.
	usage, err := ledger.Query(ctx, db, ledger.UsageQuery{GroupBy: []string{"meter"}, Meters: ledger.NewMeters(seed.Meters)})
	if err != nil || len(usage.Lines) != 3 {
		t.Fatalf("meters: %+v %v", usage, err)
	}
	for _, l := range usage.Lines {
		if l.Meter == "active_users" && (l.Quantity.Cmp(ledger.TotalOf(50*ledger.Scale)) > 0 || l.Quantity.Sign() <= 0) {
			t.Fatalf("active_users unique_count %s, want 1..50", l.Quantity)
		}
	}
	// Seeding again adds rows instead of colliding with the first run's ids.
	if err := seed.Run(ctx, db, seed.Options{Rows: 10, Customers: 2}); err != nil {
		t.Fatal(err)
	}
	db.Read.QueryRowx(`SELECT COUNT(*) FROM metered_usage`).Scan(&rows)
	if rows != 2510 {
		t.Fatalf("second run: %d rows", rows)
	}
}

func TestSeedRejectsBadOptions(t *testing.T) {
	db, err := schema.Open(context.Background(), filepath.Join(t.TempDir(), schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, o := range []seed.Options{{}, {Rows: -1}, {Rows: 1, Customers: -1}, {Rows: 1, Months: -2}} {
		if err := seed.Run(context.Background(), db, o); err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("%+v: err = %v", o, err)
		}
	}
}

func TestSeedExportsAddsAFourthMeter(t *testing.T) {
	ctx := context.Background()
	db, err := schema.Open(ctx, filepath.Join(t.TempDir(), schema.FileName), schema.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	o := seed.Options{Rows: 3000, Customers: 30, Months: 1, Exports: true}
	if err := seed.Run(ctx, db, o); err != nil {
		t.Fatal(err)
	}
	if ms := seed.MetersOf(o); len(ms) != 4 || ms[3].Name != "exports" || len(seed.MetersOf(seed.Options{})) != 3 {
		t.Fatalf("meters: %+v", ms)
	}
	counts := map[string]int{}
	rows, err := db.Read.Queryx(`SELECT meter, COUNT(*), MIN(quantity), MAX(quantity) FROM metered_usage GROUP BY meter`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var meter string
		var n int
		var lo, hi int64
		if err := rows.Scan(&meter, &n, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		counts[meter] = n
		if meter == "exports" && (lo < int64(ledger.Scale) || hi > 10*int64(ledger.Scale)) {
			t.Errorf("exports quantities %d..%d, want 1..10 units", lo, hi)
		}
	}
	rows.Close()
	// One event in ten each for exports; api_requests keeps five in ten.
	if counts["exports"] < 200 || counts["exports"] > 400 || counts["api_requests"] < 1300 || counts["api_requests"] > 1700 || len(counts) != 4 {
		t.Fatalf("rows per meter: %v", counts)
	}
	usage, err := ledger.Query(ctx, db, ledger.UsageQuery{GroupBy: []string{"meter"}, Meters: ledger.NewMeters(seed.MetersOf(o))})
	if err != nil || len(usage.Lines) != 4 {
		t.Fatalf("usage by meter: %+v %v", usage, err)
	}
	rep, err := invoice.Verify(ctx, db)
	if err != nil || rep.First() != nil {
		t.Fatalf("seeded ledger does not verify: %v %v", rep.First(), err)
	}
}
