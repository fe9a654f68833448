package invoice_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/customer"
	"github.com/hookledger/hookledger/internal/seed"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/invoice"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// BenchmarkInvoicing10M measures closing a month for every customer of a
// large seeded ledger, with the project's indexes and, in the same run,
// without them (NOT INDEXED); ledger's BenchmarkUsage10M measures one
// customer's month on the same database. Seeding 10M rows takes minutes, so
// it is not part of `go test ./...`: make the database once, then point the
// benchmark at it.
//
//	hookledger dev seed --rows 10000000 --customers 10000 --data /tmp/bench10m
//	HOOKLEDGER_BENCH_DB=/tmp/bench10m/hookledger.db \
//	  go test ./invoice -run '^$' -bench Invoicing10M -benchtime 3x -count 5 -timeout 2h
//
// HOOKLEDGER_BENCH_MONTH picks the month (testenv.BenchLedger). Closes are
// dry runs: all the work of a close, rolled back, so every iteration closes
// the same month afresh.
func BenchmarkInvoicing10M(b *testing.B) {
	ctx := context.Background()
	db, month, label := testenv.BenchLedger(b)
	meters := ledger.NewMeters(seed.Meters)
	var customers, head int64
	db.Read.QueryRowx(`SELECT COUNT(DISTINCT customer_id) FROM metered_usage`).Scan(&customers)
	db.Read.QueryRowx(`SELECT COALESCE(MAX(id), 0) FROM metered_usage`).Scan(&head)
	closeAll := invoice.CloseRequest{Period: month, All: true, Meters: meters, DryRun: true}
	probe, probeArgs, _, _ := invoice.PeriodSQL(closeAll, head, 0, 0)
	var lo, hi, n int64
	if err := db.Read.QueryRowx(probe, probeArgs...).Scan(&lo, &hi, &n); err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: ids %d..%d hold its %d rows of %d customers", label, lo, hi, n, customers)
	_, _, scan, scanArgs := invoice.PeriodSQL(closeAll, head, lo, hi)
	_, _, noIndex, noIndexArgs := invoice.PeriodSQL(closeAll.NoIndex(), head, 0, 0)
	b.Logf("EXPLAIN QUERY PLAN id range probe:\n  %s\n%s", probe, testenv.QueryPlan(b, db, probe, probeArgs...))
	b.Logf("EXPLAIN QUERY PLAN period scan:\n  %s\n%s", scan, testenv.QueryPlan(b, db, scan, scanArgs...))
	b.Logf("EXPLAIN QUERY PLAN period scan, no index:\n  %s\n%s", noIndex, testenv.QueryPlan(b, db, noIndex, noIndexArgs...))

	closeRun := func(req invoice.CloseRequest) func(b *testing.B) {
		return func(b *testing.B) {
			for range b.N {
				res, err := invoice.Close(ctx, db, req)
				if err != nil {
					b.Fatal(err)
				}
				if res.Existing || int64(len(res.Invoices)) < customers/2 {
					b.Fatalf("close produced %d invoices (existing %v)", len(res.Invoices), res.Existing)
				}
			}
		}
	}
	b.Run("close-month-all/index", closeRun(closeAll))
	b.Run("close-month-all/no-index", closeRun(closeAll.NoIndex()))
}

// pricedClosePlan is the configuration of BenchmarkPricedClose10M: the
// meters of `hookledger dev seed --exports` and one plan pricing each.
const pricedClosePlan = "../bench/priced-close.yml"

// BenchmarkPricedClose10M measures closing a month for every customer with
// prices (bench/priced-close.yml: a fee, a minimum and one price per meter,
// graduated, unit, volume and package) against the same close without
// prices (Pricing nil), the reference, in the same process and rounds. Each
// iteration is one round of both closes, in alternating order, so a slower
// minute of the shared machine falls on both; the per-round figures (wall
// time, and the process's CPU time, which other work on a shared machine
// disturbs less), their medians, ranges and the ratios are logged and
// reported as metrics.
//
//	hookledger migrate --data /tmp/priced10m
//	hookledger dev seed --rows 10000000 --customers 10000 --exports --data /tmp/priced10m
//	HOOKLEDGER_BENCH_DB=/tmp/priced10m/hookledger.db \
//	  go test ./invoice -run '^$' -bench PricedClose10M -benchtime 5x -count 1 -timeout 1h -v
//
// Like BenchmarkInvoicing10M it skips itself without HOOKLEDGER_BENCH_DB and
// closes HOOKLEDGER_BENCH_MONTH (default 2026-06) as dry runs. Pricing is
// loaded as `invoice close` loads it (invoice.LoadPricing: the registry's
// assignments and customers, the default plan), inside the timed part.
func BenchmarkPricedClose10M(b *testing.B) {
	ctx := context.Background()
	db, month, label := testenv.BenchLedger(b)
	cfg, err := config.LoadSecretsOptional(pricedClosePlan)
	if err != nil {
		b.Fatal(err)
	}
	meters := ledger.NewMeters(cfg.Meters)

	type sample struct {
		wall, cpu time.Duration
		allocs    uint64
		bytes     uint64
	}
	closeOnce := func(priced bool) (sample, *invoice.CloseResult) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		cpu0, _ := processCPU()
		start := time.Now()
		req := invoice.CloseRequest{Period: month, All: true, Meters: meters, DryRun: true}
		if priced {
			pr, registered, err := invoice.LoadPricing(ctx, db, cfg.Catalog, cfg.Customers.DefaultPlan)
			if err != nil || pr == nil {
				b.Fatalf("load pricing: %v (%v)", err, pr)
			}
			req.Pricing, req.Registered = pr, registered
		}
		res, err := invoice.Close(ctx, db, req)
		wall := time.Since(start)
		cpu1, _ := processCPU()
		if err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		return sample{wall, cpu1 - cpu0, after.Mallocs - before.Mallocs, after.TotalAlloc - before.TotalAlloc}, res
	}
	// Both closes must bill the same quantities; the priced one must price
	// every line (every meter has a price), the other none.
	check := func(priced, plain *invoice.CloseResult) {
		if len(priced.Invoices) != len(plain.Invoices) || len(plain.Invoices) == 0 {
			b.Fatalf("priced close made %d invoices, unpriced %d", len(priced.Invoices), len(plain.Invoices))
		}
		trueUps := 0
		for i, inv := range priced.Invoices {
			p := plain.Invoices[i]
			if inv.Customer != p.Customer || len(inv.Lines) != len(p.Lines) || inv.Money.Total == "" || p.Money.Total != "" {
				b.Fatalf("invoice %d: %s/%s, %d/%d lines, totals %q/%q", i, inv.Customer, p.Customer, len(inv.Lines), len(p.Lines), inv.Money.Total, p.Money.Total)
			}
			if inv.Money.TrueUp != "0.00" {
				trueUps++
			}
			for j, l := range inv.Lines {
				if !l.Quantity.Equal(p.Lines[j].Quantity) || l.Money.Amount == "" {
					b.Fatalf("invoice %d line %d: %s/%s, amount %q", i, j, l.Quantity, p.Lines[j].Quantity, l.Money.Amount)
				}
			}
		}
		b.Logf("%d invoices, %d lines; %d with a minimum true-up", len(priced.Invoices), countLines(priced), trueUps)
	}

	var priced, plain []sample
	for i := 0; i < b.N; i++ {
		// Alternate which close goes first, so neither always runs right
		// after the other has warmed (or disturbed) the caches.
		var sp, su sample
		var rp, ru *invoice.CloseResult
		if i%2 == 0 {
			sp, rp = closeOnce(true)
			su, ru = closeOnce(false)
		} else {
			su, ru = closeOnce(false)
			sp, rp = closeOnce(true)
		}
		if i == 0 {
			check(rp, ru)
		}
		priced, plain = append(priced, sp), append(plain, su)
		b.Logf("round %d: priced %.3f s (CPU %.3f s, %d allocs, %.0f MB), unpriced %.3f s (CPU %.3f s, %d allocs, %.0f MB), ratio %.2f (CPU %.2f)",
			i+1, sp.wall.Seconds(), sp.cpu.Seconds(), sp.allocs, float64(sp.bytes)/1e6, su.wall.Seconds(), su.cpu.Seconds(), su.allocs, float64(su.bytes)/1e6,
			sp.wall.Seconds()/su.wall.Seconds(), sp.cpu.Seconds()/su.cpu.Seconds())
	}
	secs := func(ss []sample, of func(sample) time.Duration) []float64 {
		out := make([]float64, len(ss))
		for i, s := range ss {
			out[i] = of(s).Seconds()
		}
		return out
	}
	ratios := func(xs, ys []float64) []float64 {
		out := make([]float64, len(xs))
		for i := range xs {
			out[i] = xs[i] / ys[i]
		}
		return out
	}
	wall := func(s sample) time.Duration { return s.wall }
	cpu := func(s sample) time.Duration { return s.cpu }
	ps, us := secs(priced, wall), secs(plain, wall)
	pc, uc := secs(priced, cpu), secs(plain, cpu)
	rs, rc := ratios(ps, us), ratios(pc, uc)
	span := func(xs []float64) string {
		return fmt.Sprintf("%.3f (%.3f–%.3f)", median(xs), slices.Min(xs), slices.Max(xs))
	}
	b.Logf("%s, %d rounds, medians (min–max): wall priced %s s, unpriced %s s, ratio %s; CPU priced %s s, unpriced %s s, ratio %s",
		label, len(priced), span(ps), span(us), span(rs), span(pc), span(uc), span(rc))
	b.ReportMetric(median(ps), "priced-s")
	b.ReportMetric(median(us), "unpriced-s")
	b.ReportMetric(median(rs), "priced/unpriced")
	b.ReportMetric(median(pc), "priced-cpu-s")
	b.ReportMetric(median(uc), "unpriced-cpu-s")
	b.ReportMetric(median(rc), "priced/unpriced-cpu")
	b.ReportMetric(float64(priced[len(priced)-1].allocs), "priced-allocs")
	b.ReportMetric(float64(plain[len(plain)-1].allocs), "unpriced-allocs")
}

func countLines(res *invoice.CloseResult) int {
	n := 0
	for _, inv := range res.Invoices {
		n += len(inv.Lines)
	}
	return n
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// The priced-close benchmark's configuration prices exactly the meters the
// seed writes with --exports, each with a different model, and has a fee
// and a minimum: what the benchmark claims to measure.
// TestDimensionsBenchPlan keeps bench/dimensions-priced.yml in step with
// `hookledger dev seed --models`: its meters are the seed's, and its plan
// prices api_requests by model with a card for some of the seed's models.
func TestDimensionsBenchPlan(t *testing.T) {
	cfg, err := config.LoadSecretsOptional(dimensionsPricedPlan)
	if err != nil {
		t.Fatal(err)
	}
	want := seed.MetersOf(seed.Options{Models: true})
	if len(cfg.Meters) != len(want) {
		t.Fatalf("meters %+v, the seed's %+v", cfg.Meters, want)
	}
	for i, m := range want {
		got := cfg.Meters[i]
		if got.Name != m.Name || got.Aggregation != m.Aggregation || got.Property != m.Property || !slices.Equal(got.Dimensions, m.Dimensions) {
			t.Errorf("meter %d: %+v, the seed's %+v", i, got, m)
		}
	}
	v, err := cfg.Catalog.Version(cfg.Customers.DefaultPlan, "2026-06-01")
	if err != nil {
		t.Fatal(err)
	}
	p := v.Price("api_requests")
	if p == nil || p.By != "model" || len(p.Rates) == 0 || len(p.Rates) >= len(seed.Models) || p.Default == nil {
		t.Errorf("api_requests' price %+v: want it by model, a card for some models and a default", p)
	}
}

func TestPricedCloseBenchPlan(t *testing.T) {
	cfg, err := config.LoadSecretsOptional(pricedClosePlan)
	if err != nil {
		t.Fatal(err)
	}
	want := seed.MetersOf(seed.Options{Exports: true})
	if len(cfg.Meters) != len(want) {
		t.Fatalf("meters %+v, the seed's %+v", cfg.Meters, want)
	}
	for i, m := range want {
		got := cfg.Meters[i]
		if got.Name != m.Name || got.Aggregation != m.Aggregation || got.Property != m.Property {
			t.Errorf("meter %d: %+v, the seed's %+v", i, got, m)
		}
	}
	v, err := cfg.Catalog.Version(cfg.Customers.DefaultPlan, "2026-06-01")
	if err != nil {
		t.Fatal(err)
	}
	if v.Fee == nil || v.Minimum == nil {
		t.Errorf("plan %q: fee %v, minimum %v", v.Name, v.Fee, v.Minimum)
	}
	models := map[pricing.Model]bool{}
	for _, m := range want {
		p := v.Price(m.Name)
		if p == nil {
			t.Fatalf("plan %q does not price %s", v.Name, m.Name)
		}
		models[p.Model] = true
	}
	for _, m := range pricing.Models {
		if !models[m] {
			t.Errorf("no price uses model %s", m)
		}
	}
}

// BenchmarkPriceInvoice is the pricing part of a priced close alone, per
// invoice: a seeded customer's month (four lines, one per meter of
// bench/priced-close.yml, with quantities in the middle of its tiers) priced
// and settled, no database. It runs only with -bench; the 10M benchmark above
// says what the pricing costs a whole close.
//
//	go test ./invoice -run '^$' -bench PriceInvoice -benchmem
func BenchmarkPriceInvoice(b *testing.B) {
	cfg, err := config.LoadSecretsOptional(pricedClosePlan)
	if err != nil {
		b.Fatal(err)
	}
	pr := &invoice.Pricing{Catalog: cfg.Catalog, Plans: customer.NewPlans(cfg.Customers.DefaultPlan, nil)}
	month, err := ledger.MonthPeriod("2026-06", time.UTC)
	if err != nil {
		b.Fatal(err)
	}
	start, end := month.Start.UnixMilli(), month.End.UnixMilli()
	lines := []invoice.InvoiceLine{
		{Meter: "active_users", Quantity: ledger.TotalOf(14 * ledger.Scale)},
		{Meter: "api_requests", Quantity: ledger.TotalOf(2113 * ledger.Scale)},
		{Meter: "exports", Quantity: ledger.TotalOf(46 * ledger.Scale)},
		{Meter: "storage_gb", Quantity: ledger.TotalOf(471_239 * 1000)},
	}
	for i := range lines {
		l := &lines[i]
		l.LineNo, l.Customer, l.Period, l.TZ, l.PeriodStart, l.PeriodEnd, l.Money.BilledBefore = int64(i+1), "cus_00042", "2026-06", "UTC", start, end, "0"
	}
	price := invoice.NewInvoicePricer(pr) // one close: 10,000 invoices share it
	b.ReportAllocs()
	for b.Loop() {
		inv := invoice.Invoice{Customer: "cus_00042", Period: "2026-06", TZ: "UTC", PeriodStart: start, PeriodEnd: end, Lines: slices.Clone(lines)}
		if err := price(&inv); err != nil {
			b.Fatal(err)
		}
		if inv.Money.Total == "" {
			b.Fatal("not priced")
		}
	}
}

// BenchmarkDimensions measures a meter with a dimension against a seeded
// ledger whose api_requests rows carry a model:
//
//	hookledger dev seed --rows 10000000 --customers 10000 --models --data /tmp/dims10m
//	HOOKLEDGER_BENCH_DB=/tmp/dims10m/hookledger.db \
//	  go test ./invoice -run '^$' -bench Dimensions -benchtime 3x -count 5 -timeout 2h
//
// (BENCHMARKS.md records the size it was run at.) It compares one
// customer's month grouped by customer, meter and model with the same query
// ungrouped, and a dry-run close of the month for every customer with
// api_requests declaring the dimension, without, and with storage_gb billed
// time_weighted instead of max.
func BenchmarkDimensions(b *testing.B) {
	ctx := context.Background()
	db, month, label := testenv.BenchLedger(b)
	dims := seed.MetersOf(seed.Options{Models: true})
	for i := range dims {
		if err := dims[i].Normalize(); err != nil {
			b.Fatal(err)
		}
	}
	withDims, plain := ledger.NewMeters(dims), ledger.NewMeters(seed.Meters)
	var total, inMonth, customers int64
	db.Read.QueryRowx(`SELECT COUNT(*) FROM metered_usage`).Scan(&total)
	db.Read.QueryRowx(`SELECT COUNT(*) FROM metered_usage WHERE occurred_at >= ? AND occurred_at < ?`, month.Start.UnixMilli(), month.End.UnixMilli()).Scan(&inMonth)
	db.Read.QueryRowx(`SELECT COUNT(DISTINCT customer_id) FROM metered_usage`).Scan(&customers)
	b.Logf("ledger: %d rows, %d customers; %s holds %d rows", total, customers, label, inMonth)

	calls := 0
	customerMonth := func(groupBy string) func(b *testing.B) {
		return func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				calls++
				p := ledger.UsageParams{From: label, To: month.End.Format(time.RFC3339), Customer: fmt.Sprintf("cus_%05d", (calls*7919)%int(max(customers, 1))), GroupBy: groupBy}
				q, err := p.Query(withDims)
				if err != nil {
					b.Fatal(err)
				}
				rep, err := ledger.Query(ctx, db, q)
				if err != nil || len(rep.Lines) == 0 {
					b.Fatalf("query: %v (%d lines)", err, len(rep.Lines))
				}
			}
		}
	}
	b.Run("customer-month/by-model", customerMonth("customer,meter,model"))
	b.Run("customer-month/plain", customerMonth("customer,meter"))
	closeRun := func(meters ledger.Meters) func(b *testing.B) {
		return func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				res, err := invoice.Close(ctx, db, invoice.CloseRequest{Period: month, All: true, Meters: meters, DryRun: true})
				if err != nil {
					b.Fatal(err)
				}
				if res.Existing || int64(len(res.Invoices)) < customers/2 {
					b.Fatalf("close produced %d invoices (existing %v)", len(res.Invoices), res.Existing)
				}
			}
		}
	}
	gauge := seed.MetersOf(seed.Options{})
	gauge[1].Aggregation = ledger.AggTimeWeighted // storage_gb as GB-hours: the carry-in read and the integral
	b.Run("close-month-all/dimensional", closeRun(withDims))
	b.Run("close-month-all/plain", closeRun(plain))
	b.Run("close-month-all/storage-time-weighted", closeRun(ledger.NewMeters(gauge)))
	// The same close priced, api_requests by model (bench/dimensions-priced.yml):
	// a line per model, each priced by its rate card.
	cfg, err := config.LoadSecretsOptional(dimensionsPricedPlan)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("close-month-all/priced-by-model", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			pr, registered, err := invoice.LoadPricing(ctx, db, cfg.Catalog, cfg.Customers.DefaultPlan)
			if err != nil || pr == nil {
				b.Fatalf("load pricing: %v (%v)", err, pr)
			}
			res, err := invoice.Close(ctx, db, invoice.CloseRequest{Period: month, All: true, Meters: ledger.NewMeters(cfg.Meters), DryRun: true, Pricing: pr, Registered: registered})
			if err != nil {
				b.Fatal(err)
			}
			if res.Existing || int64(len(res.Invoices)) < customers/2 || len(res.Invoices[0].Lines) < len(seed.Models) {
				b.Fatalf("close produced %d invoices (existing %v)", len(res.Invoices), res.Existing)
			}
		}
	})
}

// dimensionsPricedPlan is the configuration of BenchmarkDimensions' priced
// close: the meters of `hookledger dev seed --models`, api_requests priced
// by model.
const dimensionsPricedPlan = "../bench/dimensions-priced.yml"
