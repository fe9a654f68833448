// Command stripebench measures the Stripe rail in stream mode
// (BENCHMARKS.md, "Stripe keeps up"): serve at full webhook speed with one
// meter pushed to a fake Stripe that answers every call after
// -stripe-latency, as a VM's distance from Stripe's API. It reports serve's
// requests per second and its CPU time per request over the load, how long each push took to reach Stripe (from its
// first ledger row to Stripe's acknowledgement, p50/p99/max: a push
// carries the rows its customer appended until the relay claimed it), the calls
// Stripe got per second, and how long after the load's end the last push
// was acknowledged; every round checks that Stripe's totals are the
// ledger's. Each round also runs serve without the meter pushed, in
// alternating order, as the reference.
//
//	go run ./bench/cmd/stripebench -rounds 3 -n 20000 -customers 100
//
// With -features the pushed serve also prices the meter, with a soft limit
// and a soft spend cap that alert: issue 42's "limits, spend and Stripe
// stream sync all configured", against the mapping alone.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/big"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/stripe/fakestripe"
)

const stripeKey = "sk_test_stripebench0123456789"

// drain is how long a round waits for the last push after the load.
var drain *time.Duration

// features, with -features: the pushed round's serve also prices the meter
// in a plan every customer is on, with a soft limit and a soft spend cap
// that alert (issue 42: limits, spend and Stripe stream sync all
// configured), against a reference on the embedded default's mapping alone.
var features *bool

const featuresConfig = `plans:
  - name: metered
    currency: USD
    effective_from: 2026-01-01
    prices:
      - {meter: bench_%[1]s, model: graduated, tiers: [{up_to: 1000, unit: "0"}, {unit: "0.001"}]}
    limits:
      - {meter: bench_%[1]s, limit: 100000000, period: month, kind: soft, alerts: ["80%%", "100%%"]}
    spend: {limit: "1000000.00", period: month, kind: soft, alerts: ["500000.00", "80%%"]}
customers:
  default_plan: metered
`

func main() {
	binary := flag.String("binary", "", "hookledger binary (default: build one)")
	rounds := flag.Int("rounds", 3, "rounds")
	events := flag.Int("n", 20000, "events per round")
	conns := flag.Int("k", 32, "connections")
	customers := flag.Int("customers", 100, "customers the events are spread over")
	latency := flag.Duration("stripe-latency", 150*time.Millisecond, "how long the fake Stripe takes to answer a call")
	keep := flag.Bool("keep", false, "keep the temporary directory")
	drain = flag.Duration("drain", 5*time.Minute, "how long to wait for the last push after the load")
	features = flag.Bool("features", false, "the pushed serve also prices the meter with a soft limit and a soft spend cap that alert (the reference: the mapping alone)")
	flag.Parse()
	ctx := context.Background()
	h, err := harness.New(ctx, "", "hookledger-stripebench-", *binary, *keep)
	if err != nil {
		fail(err)
	}
	defer h.Close()
	harness.PrintMachine(os.Stdout)
	fmt.Printf("serve, one meter pushed in stream mode (default interval and rate limit), Stripe answering in %s; %d events over %d customers, %d connections\n",
		*latency, *events, *customers, *conns)
	var rps, ref, cpu, refCPU, p50, p99, calls []float64
	for r := 1; r <= *rounds; r++ {
		for _, pushed := range [][]bool{{true, false}, {false, true}}[r%2] {
			res, err := round(ctx, h, fmt.Sprintf("round%d-%v", r, pushed), *events, *conns, *customers, *latency, pushed)
			if err != nil {
				fail(err)
			}
			if !pushed {
				fmt.Printf("round %d, reference (no meter pushed): %5.0f req/s, %3.0f us CPU per request\n", r, res.rps, res.cpu)
				ref, refCPU = append(ref, res.rps), append(refCPU, res.cpu)
				continue
			}
			fmt.Printf("round %d: %s\n", r, res)
			rps, cpu = append(rps, res.rps), append(cpu, res.cpu)
			p50, p99, calls = append(p50, res.lagP50.Seconds()), append(p99, res.lagP99.Seconds()), append(calls, res.callsPerSec)
		}
	}
	fmt.Printf("median: %.0f req/s (reference %.0f, %.2fx), %.0f us CPU per request (reference %.0f, %.2fx), Stripe lag p50 %.2f s, p99 %.2f s, %.1f calls/s\n",
		harness.Median(rps), harness.Median(ref), harness.Median(rps)/harness.Median(ref),
		harness.Median(cpu), harness.Median(refCPU), harness.Median(refCPU)/harness.Median(cpu),
		harness.Median(p50), harness.Median(p99), harness.Median(calls))
}

type result struct {
	rps                    float64
	cpu                    float64 // serve's CPU time per request over the load, in microseconds
	pushes                 int
	lagP50, lagP99, lagMax time.Duration
	calls                  int
	callsPerSec            float64 // over the load and its drain
	tail                   time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("%5.0f req/s, %3.0f us CPU per request, %d pushes, lag p50 %5.2f s p99 %5.2f s max %5.2f s, %d calls (%.1f/s), last ack %5.2f s after the load",
		r.rps, r.cpu, r.pushes, r.lagP50.Seconds(), r.lagP99.Seconds(), r.lagMax.Seconds(), r.calls, r.callsPerSec, r.tail.Seconds())
}

func round(ctx context.Context, h *harness.Harness, name string, n, k, customers int, latency time.Duration, pushed bool) (result, error) {
	var res result
	dir := filepath.Join(h.Dir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return res, err
	}
	fake := fakestripe.New(stripeKey)
	fake.Latency = latency
	srv := httptest.NewServer(fake)
	defer srv.Close()
	const runID = "sb"
	push, plans := "    stripe: {event_name: requests, mode: stream}\n", ""
	if !pushed {
		push = ""
	} else if *features {
		plans = fmt.Sprintf(featuresConfig, runID)
	}
	cfg := filepath.Join(dir, "hookledger.yml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `data: %s
providers:
  - name: default
    scheme: standard
    secrets: [%q]
stripe:
  api_key: %s
  api_base: %s
  customers: identity
meters:
  - name: bench_%s
%susage:
  - type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
%s`, filepath.Join(dir, "data"), h.Secret(), stripeKey, srv.URL, runID, push, plans), 0o600); err != nil {
		return res, err
	}
	proc, err := h.Start(ctx, "serve", dir, filepath.Join(dir, "serve.log"), "serve", "--config", cfg, "--no-replication")
	if err != nil {
		return res, err
	}
	defer proc.Stop()
	cpu0, err := proc.CPU()
	if err != nil {
		return res, err
	}
	begin := time.Now()
	load, err := h.Load(ctx, proc.URL, k, n, 0, "--customers", fmt.Sprint(customers), "--run-id", runID)
	if err != nil {
		return res, err
	}
	end := time.Now()
	cpu1, err := proc.CPU()
	if err != nil {
		return res, err
	}
	res.rps, res.cpu = load.RPS, float64(cpu1-cpu0)/float64(time.Microsecond)/float64(load.Requests)
	if !pushed {
		return res, nil
	}
	db, err := schema.Open(ctx, filepath.Join(dir, "data", "hookledger.db"), schema.Options{ReadOnly: true, MustExist: true})
	if err != nil {
		return res, err
	}
	defer db.Close()
	deadline := time.Now().Add(*drain)
	for {
		sum, err := db.OutboxSummary(ctx, []string{"stripe"})
		if err != nil {
			return res, err
		}
		var pending int64
		for _, d := range sum {
			pending += d.Pending + d.Dead
		}
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("%d pushes not acknowledged %s after the load (%.0f req/s)", pending, *drain, res.rps)
		}
		time.Sleep(100 * time.Millisecond)
	}
	pushes, err := db.StripePushes(ctx, schema.StripePushFilter{})
	if err != nil {
		return res, err
	}
	var lags []time.Duration
	var last int64
	for _, p := range pushes {
		lags, last = append(lags, time.Duration(p.DeliveredAt-p.CreatedAt)*time.Millisecond), max(last, p.DeliveredAt)
	}
	res.pushes = len(lags)
	slices.Sort(lags)
	if len(lags) > 0 {
		res.lagP50, res.lagP99, res.lagMax = lags[len(lags)/2], lags[len(lags)*99/100], lags[len(lags)-1]
	}
	res.tail = max(0, time.UnixMilli(last).Sub(end))
	fake.Mu.Lock()
	res.calls = fake.Calls
	fake.Mu.Unlock()
	res.callsPerSec = float64(res.calls) / time.UnixMilli(last).Sub(begin).Seconds()
	return res, checkTotals(pushes, fake)
}

// checkTotals compares what Stripe holds per customer with the whole
// numbers the ledger pushed: each customer's last push of each period
// carries the period's sum.
func checkTotals(pushes []schema.StripePush, fake *fakestripe.Stripe) error {
	type key struct {
		customer string
		period   int64
	}
	lastOf := map[key]string{}
	for _, p := range pushes { // in push order: the last one stays
		lastOf[key{p.CustomerID, p.PeriodStart}] = p.Pushed
	}
	want := map[string]*big.Int{}
	for k, pushed := range lastOf {
		v, ok := new(big.Int).SetString(pushed, 10)
		if !ok {
			return fmt.Errorf("pushed %q for %s", pushed, k.customer)
		}
		if want[k.customer] == nil {
			want[k.customer] = new(big.Int)
		}
		want[k.customer].Add(want[k.customer], v)
	}
	got := fake.Totals()
	for c, w := range want {
		if g := got[[2]string{c, "requests"}]; g == nil || g.Cmp(w) != 0 {
			return fmt.Errorf("the fake Stripe holds %v for %s, the ledger pushed %s", g, c, w)
		}
	}
	return nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "stripebench:", err)
	os.Exit(1)
}
