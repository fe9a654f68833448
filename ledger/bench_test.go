package ledger_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/ledger/seed"
	"github.com/hookledger/hookledger/schema"
)

// BenchmarkInvoicing10M measures the invoicing queries against a large seeded
// ledger, each with the project's indexes and, in the same run, without them
// (NOT INDEXED). Seeding 10M rows takes minutes, so it is not part of
// `go test ./...`: make the database once, then point the benchmark at it.
//
//	hookledger dev seed --rows 10000000 --customers 10000 --data /tmp/bench10m
//	HOOKLEDGER_BENCH_DB=/tmp/bench10m/hookledger.db \
//	  go test ./ledger -run '^$' -bench Invoicing10M -benchtime 3x -count 5 -timeout 2h
//
// HOOKLEDGER_BENCH_MONTH picks the month (default 2026-06, mid-way through
// the seed's default 12 months). Closes are dry runs: all the work of a
// close, rolled back, so every iteration closes the same month afresh.
func BenchmarkInvoicing10M(b *testing.B) {
	path := os.Getenv("HOOKLEDGER_BENCH_DB")
	if path == "" {
		b.Skip("set HOOKLEDGER_BENCH_DB to a database made by `hookledger dev seed` (see the comment)")
	}
	ctx := context.Background()
	db, err := schema.Open(ctx, path, schema.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	label := os.Getenv("HOOKLEDGER_BENCH_MONTH")
	if label == "" {
		label = "2026-06"
	}
	month, err := ledger.MonthPeriod(label, time.UTC)
	if err != nil {
		b.Fatal(err)
	}
	meters := ledger.NewMeters(seed.Meters)
	var total, inMonth, customers int64
	db.Read.QueryRowx(`SELECT COUNT(*) FROM metered_usage`).Scan(&total)
	db.Read.QueryRowx(`SELECT COUNT(*) FROM metered_usage WHERE occurred_at >= ? AND occurred_at < ?`, month.Start.UnixMilli(), month.End.UnixMilli()).Scan(&inMonth)
	db.Read.QueryRowx(`SELECT COUNT(DISTINCT customer_id) FROM metered_usage`).Scan(&customers)
	b.Logf("ledger: %d rows, %d customers; %s holds %d rows", total, customers, label, inMonth)

	customerQuery := func(i int) ledger.UsageQuery {
		return ledger.UsageQuery{From: month.Start, To: month.End, Customer: fmt.Sprintf("cus_%05d", (i*7919)%int(max(customers, 1))), Meters: meters}
	}
	closeAll := ledger.CloseRequest{Period: month, All: true, Meters: meters, DryRun: true}
	var head int64
	db.Read.QueryRowx(`SELECT COALESCE(MAX(id), 0) FROM metered_usage`).Scan(&head)
	type plan struct {
		name string
		sql  string
		args []any
	}
	var plans []plan
	add := func(name string) func(string, []any) {
		return func(sql string, args []any) { plans = append(plans, plan{name, sql, args}) }
	}
	add("customer-month")(ledger.UsageSQL(customerQuery(0)))
	add("customer-month, no index")(ledger.UsageSQL(customerQuery(0).NoIndex()))
	probe, probeArgs, _, _ := ledger.PeriodSQL(closeAll, head, 0, 0)
	var lo, hi, n int64
	if err := db.Read.QueryRowx(probe, probeArgs...).Scan(&lo, &hi, &n); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: ids %d..%d hold its %d rows", label, lo, hi, n)
	_, _, scan, scanArgs := ledger.PeriodSQL(closeAll, head, lo, hi)
	add("close-month-all, id range probe")(probe, probeArgs)
	add("close-month-all, period scan")(scan, scanArgs)
	_, _, scan, scanArgs = ledger.PeriodSQL(closeAll.NoIndex(), head, 0, 0)
	add("close-month-all, period scan, no index")(scan, scanArgs)
	for _, c := range plans {
		b.Logf("EXPLAIN QUERY PLAN %s:\n  %s\n%s", c.name, c.sql, explain(b, db.Read, c.sql, c.args))
	}

	run := func(name string, fn func(i int)) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				fn(i)
			}
		})
	}
	// A different customer on every call, across samples, so repeated
	// samples do not just re-read the same customer's cached pages.
	calls := 0
	run("customer-month/index", func(int) {
		calls++
		rep, err := ledger.Query(ctx, db, customerQuery(calls))
		if err != nil || len(rep.Lines) == 0 {
			b.Fatalf("query: %v (%d lines)", err, len(rep.Lines))
		}
	})
	run("customer-month/no-index", func(int) {
		calls++
		if _, err := ledger.Query(ctx, db, customerQuery(calls).NoIndex()); err != nil {
			b.Fatal(err)
		}
	})
	// The SQL part of a close alone: finding the month's rows (COUNT over
	// the event-time index) against scanning the table for them.
	monthCount := func(noIndex bool) func(int) {
		q := `SELECT COUNT(*) FROM metered_usage WHERE occurred_at >= ? AND occurred_at < ?`
		if noIndex {
			q = `SELECT COUNT(*) FROM metered_usage NOT INDEXED WHERE occurred_at >= ? AND occurred_at < ?`
		}
		return func(int) {
			var n int64
			if err := db.Read.QueryRowx(q, month.Start.UnixMilli(), month.End.UnixMilli()).Scan(&n); err != nil || n != inMonth {
				b.Fatalf("count: %d %v", n, err)
			}
		}
	}
	run("month-rows-count/index", monthCount(false))
	run("month-rows-count/no-index", monthCount(true))
	closeRun := func(req ledger.CloseRequest) func(int) {
		return func(int) {
			res, err := ledger.Close(ctx, db, req)
			if err != nil {
				b.Fatal(err)
			}
			if res.Existing || int64(len(res.Invoices)) < customers/2 {
				b.Fatalf("close produced %d invoices (existing %v)", len(res.Invoices), res.Existing)
			}
		}
	}
	run("close-month-all/index", closeRun(closeAll))
	run("close-month-all/no-index", closeRun(closeAll.NoIndex()))
}

func explain(b *testing.B, db *sqlx.DB, query string, args []any) string {
	rows, err := db.Queryx("EXPLAIN QUERY PLAN "+query, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			b.Fatal(err)
		}
		out = append(out, "  "+detail)
	}
	return strings.Join(out, "\n")
}
