package ledger_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/hookledger/hookledger/internal/seed"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
)

// BenchmarkUsage10M measures one customer's month against a large seeded
// ledger, with the project's indexes and, in the same run, without them
// (NOT INDEXED), and the count of the month's rows a close starts from
// (invoice's BenchmarkInvoicing10M closes the month). Seeding 10M rows takes
// minutes, so it is not part of `go test ./...`: make the database once,
// then point the benchmark at it.
//
//	hookledger dev seed --rows 10000000 --customers 10000 --data /tmp/bench10m
//	HOOKLEDGER_BENCH_DB=/tmp/bench10m/hookledger.db \
//	  go test ./ledger -run '^$' -bench Usage10M -benchtime 3x -count 5 -timeout 2h
//
// HOOKLEDGER_BENCH_MONTH picks the month (testenv.BenchLedger).
func BenchmarkUsage10M(b *testing.B) {
	ctx := context.Background()
	db, month, label := testenv.BenchLedger(b)
	meters := ledger.NewMeters(seed.Meters)
	var customers, inMonth int64
	db.Read.QueryRowx(`SELECT COUNT(DISTINCT customer_id) FROM metered_usage`).Scan(&customers)
	db.Read.QueryRowx(`SELECT COUNT(*) FROM metered_usage WHERE occurred_at >= ? AND occurred_at < ?`, month.Start.UnixMilli(), month.End.UnixMilli()).Scan(&inMonth)
	b.Logf("%s holds %d rows of %d customers", label, inMonth, customers)
	customerQuery := func(i int) ledger.UsageQuery {
		return ledger.UsageQuery{From: month.Start, To: month.End, Customer: fmt.Sprintf("cus_%05d", (i*7919)%int(max(customers, 1))), Meters: meters}
	}
	for _, q := range []struct {
		name string
		q    ledger.UsageQuery
	}{{"customer-month", customerQuery(0)}, {"customer-month, no index", customerQuery(0).NoIndex()}} {
		sql, args := ledger.UsageSQL(q.q)
		b.Logf("EXPLAIN QUERY PLAN %s:\n  %s\n%s", q.name, sql, testenv.QueryPlan(b, db, sql, args...))
	}

	// A different customer on every call, across samples, so repeated
	// samples do not just re-read the same customer's cached pages.
	calls := 0
	b.Run("customer-month/index", func(b *testing.B) {
		for range b.N {
			calls++
			rep, err := ledger.Query(ctx, db, customerQuery(calls))
			if err != nil || len(rep.Lines) == 0 {
				b.Fatalf("query: %v (%d lines)", err, len(rep.Lines))
			}
		}
	})
	b.Run("customer-month/no-index", func(b *testing.B) {
		for range b.N {
			calls++
			if _, err := ledger.Query(ctx, db, customerQuery(calls).NoIndex()); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The SQL a close starts from: finding the month's rows (COUNT over the
	// event-time index) against scanning the table for them.
	for _, c := range []struct{ name, sql string }{
		{"month-rows-count/index", `SELECT COUNT(*) FROM metered_usage WHERE occurred_at >= ? AND occurred_at < ?`},
		{"month-rows-count/no-index", `SELECT COUNT(*) FROM metered_usage NOT INDEXED WHERE occurred_at >= ? AND occurred_at < ?`},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				var n int64
				if err := db.Read.QueryRowx(c.sql, month.Start.UnixMilli(), month.End.UnixMilli()).Scan(&n); err != nil || n != inMonth {
					b.Fatalf("count: %d %v", n, err)
				}
			}
		})
	}
}
