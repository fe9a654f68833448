package cli

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
	"golang.org/x/term"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/ingest"
	"github.com/hookledger/hookledger/internal/server"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
	"github.com/hookledger/hookledger/scheme"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "load-test a webhook receiver with signed deliveries (and check the ledger afterwards)",
		Description: "Signs -n usage events (plus --dup duplicate deliveries, half of them racing their original)\n" +
			"before the clock starts, sends them over -k keep-alive connections and prints requests/s,\n" +
			"latency percentiles and status counts. Works against hookledger or any receiver that\n" +
			"speaks the provider's scheme. With --verify --data DIR it then checks hookledger's ledger:\n" +
			"every event exactly once with the right quantity, and nothing added by duplicates.\n" +
			"--batch N sends to the ingest API (POST /v1/events, with --key) instead: N generic usage events\n" +
			"per request, duplicates included; it reports durable events/s beside requests/s.\n" +
			"--ids random makes Stripe-like event ids, which land all over the receiver's index where\n" +
			"sequential ones (the default) append at its end.\n" +
			"`hookledger bench reference-server` runs a receiver that verifies and parses but stores\n" +
			"nothing, for comparison; `hookledger bench prefill` fills a database for scale tests.",
		Flags: append(signerFlags("receiver base URL", "data directory: holds the generated default secret, and the database --verify reads"),
			&cli.IntFlag{Name: "events", Aliases: []string{"n"}, Value: 10000, EnvVars: []string{"HOOKLEDGER_BENCH_EVENTS"},
				Usage: "number of unique events"},
			&cli.IntFlag{Name: "connections", Aliases: []string{"k"}, Value: 32, EnvVars: []string{"HOOKLEDGER_BENCH_CONNECTIONS"},
				Usage: "concurrent keep-alive connections"},
			&cli.Float64Flag{Name: "dup", Value: 0.1, EnvVars: []string{"HOOKLEDGER_BENCH_DUP"},
				Usage: "extra duplicate deliveries as a fraction of -n; half race their original, half are late retries"},
			&cli.IntFlag{Name: "customers", Value: 100, EnvVars: []string{"HOOKLEDGER_BENCH_CUSTOMERS"},
				Usage: "number of customers the events are spread over"},
			&cli.Uint64Flag{Name: "seed", Value: 1, EnvVars: []string{"HOOKLEDGER_BENCH_SEED"},
				Usage: "random seed for customers, quantities and which events get duplicates"},
			&cli.StringFlag{Name: "run-id", EnvVars: []string{"HOOKLEDGER_BENCH_RUN_ID"},
				Usage: "tag in every event id (hashed into random ones, see --ids) and in the run's meter name bench_RUNID (default: random)"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, EnvVars: []string{"HOOKLEDGER_BENCH_TIMEOUT"},
				Usage: "per-request timeout"},
			&cli.Float64Flag{Name: "rate", EnvVars: []string{"HOOKLEDGER_BENCH_RATE"},
				Usage: "requests per second to send at, steadily, over the -k connections (0: as fast as the receiver answers)"},
			&cli.BoolFlag{Name: "verify", EnvVars: []string{"HOOKLEDGER_BENCH_VERIFY"},
				Usage: "after the run, check the ledger in --data (read-only; the server may keep running)"},
			&cli.StringFlag{Name: "database", EnvVars: []string{"HOOKLEDGER_DATABASE"},
				Usage: "with --verify: the PostgreSQL database (postgres://…) to check instead of --data's hookledger.db"},
			&cli.StringFlag{Name: "format", Value: "text", EnvVars: []string{"HOOKLEDGER_BENCH_FORMAT"}, Usage: "text or json"},
			&cli.IntFlag{Name: "batch", EnvVars: []string{"HOOKLEDGER_BENCH_BATCH"},
				Usage: "send to the ingest API (POST /v1/events) instead, this many events per request, with --key"},
			&cli.StringFlag{Name: "key", EnvVars: []string{"HOOKLEDGER_API_KEY"}, Usage: "with --batch: the API key (hl_…)"},
			idsFlag("event ids: sequential (bench-RUNID-00000042) or random (Stripe-like evt_ and 24 base62 characters, derived from --run-id)"),
		),
		Action: runBench,
		Subcommands: []*cli.Command{
			referenceServerCommand(),
			prefillCommand(),
		},
	}
}

func runBench(c *cli.Context) error {
	format := c.String("format")
	if format != "text" && format != "json" {
		return usageErrorf(c, "--format: %q is not one of text, json", format)
	}
	batch := c.Int("batch")
	if batch < 0 {
		return usageErrorf(c, "--batch must not be negative, got %d", batch)
	}
	var s scheme.Scheme
	var key []byte
	var apiKeyText string
	var err error
	var url string
	if batch > 0 {
		if apiKeyText, err = apiKey(c); err != nil {
			return err
		}
		url, err = eventsURL(c)
	} else {
		if s, key, _, err = signer(c); err != nil {
			return err
		}
		url, err = serverURL(c, "/webhooks/", "/webhooks/"+c.String("provider"))
	}
	if err != nil {
		return err
	}
	ids, err := parseIDs(c)
	if err != nil {
		return err
	}
	runID := c.String("run-id")
	if runID == "" {
		var b [4]byte
		rand.Read(b[:])
		runID = hex.EncodeToString(b[:])
	}
	load := bench.Load{
		URL: url, Scheme: s, Key: key,
		Events: c.Int("events"), Connections: c.Int("connections"), Dup: c.Float64("dup"),
		Customers: c.Int("customers"), Seed: c.Uint64("seed"), RunID: runID, Timeout: c.Duration("timeout"),
		Batch: batch, APIKey: apiKeyText, IDs: ids, Rate: c.Float64("rate"),
	}
	provider := c.String("provider")
	var db *schema.DB
	if c.Bool("verify") {
		// Open before the run: a wrong --data should fail before minutes of load, not after.
		target := schema.Path(c.String("data"))
		if d := c.String("database"); d != "" {
			target = d
		}
		db, err = openDB(c.Context, target, schema.Options{ReadOnly: true})
		if err != nil {
			return fmt.Errorf("--verify: %w", err)
		}
		defer db.Close()
		if batch > 0 { // the events are stored under the key's scope
			sum := sha256.Sum256([]byte(apiKeyText))
			k, err := db.APIKeyBySHA256(c.Context, sum[:])
			if err != nil {
				return fmt.Errorf("--verify: the API key is not in %s: %w", db.Path, err)
			}
			provider = ingest.Scope(k.Name)
		}
	}
	plan, err := load.Plan(time.Now())
	if err != nil {
		return err
	}

	ctx, stop := signalContext(c)
	defer stop()
	var done atomic.Int64
	stopBar := progress(plan.Requests(), "sending", &done)
	out, err := plan.Run(ctx, &done)
	stopBar()
	if ctx.Err() != nil {
		return interrupted(fmt.Sprintf("%d of %d requests sent; no report, and --verify did not run (the ledger holds what was acknowledged)",
			done.Load(), plan.Requests()))
	}
	if err != nil {
		return err
	}
	res := out.Result
	if db != nil {
		if res.Verify, err = bench.Verify(c.Context, db, provider, plan, out); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	if format == "json" {
		enc := json.NewEncoder(c.App.Writer)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		res.WriteText(c.App.Writer)
	}
	switch {
	case res.Verify != nil && !res.Verify.OK():
		return errors.New("verify failed: the ledger does not hold every event exactly once")
	case !res.OK():
		return errors.New("some requests were not answered 2xx")
	}
	return nil
}

// progress draws a bar on an interactive terminal only, so piped output and
// CI logs stay clean. The returned func stops and clears it.
func progress(total int, what string, done *atomic.Int64) func() {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return func() {}
	}
	bar := progressbar.NewOptions(total,
		progressbar.OptionSetWriter(os.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				bar.Set(int(done.Load()))
			case <-stop:
				bar.Finish()
				return
			}
		}
	}()
	return func() { close(stop); <-finished }
}

func referenceServerCommand() *cli.Command {
	return &cli.Command{
		Name:  "reference-server",
		Usage: "run a receiver that verifies and parses like serve but stores nothing, or only a log (the benchmark baselines)",
		Description: "Uses the same configuration, providers, signature verification, JSON validation and usage\n" +
			"mapping as `hookledger serve`, then answers 200 without writing anything. The difference\n" +
			"between the two under the same load is the cost of durable custody.\n\n" +
			"With --durable it is the minimal durable receiver instead: one goroutine appends each batch\n" +
			"of raw bodies to a pre-allocated log (DATA/reference.log, truncated at start), fdatasyncs it,\n" +
			"then replies; duplicates are found in memory. No ledger, no index, nothing to query: the\n" +
			"disk's own limit, which serve's write path is measured against.",
		Flags: append(referenceConfigFlags(),
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8081", EnvVars: []string{"HOOKLEDGER_BENCH_LISTEN"},
				Usage: "address to listen on (port 0 picks a free port; the address is logged)"},
			&cli.BoolFlag{Name: "durable", Usage: "append every new event to DATA/reference.log and fdatasync before replying"},
		),
		Action: referenceServer,
	}
}

// referenceConfigFlags are serve's --config and --data; the reference stores
// nothing, so its data directory only holds the generated default secret.
func referenceConfigFlags() []cli.Flag {
	flags := configFlags()
	flags[1] = &cli.StringFlag{Name: "data", EnvVars: []string{"HOOKLEDGER_DATA"},
		Usage: "data directory holding the generated default secret, as for serve; nothing is stored (default: the config's data, else ./data)"}
	return flags
}

func referenceServer(c *cli.Context) error {
	cfg, _, err := loadConfig(c)
	if err != nil {
		return err
	}
	providers, err := receiver.NewProviders(cfg.Providers)
	if err != nil {
		return err
	}
	ref := &bench.Reference{Providers: providers, Mapper: ledger.NewMapper(cfg.Usage, cfg.MeterNames())}
	kind := "stores nothing"
	if c.Bool("durable") {
		if err := os.MkdirAll(cfg.Data, 0o700); err != nil {
			return err
		}
		path := filepath.Join(cfg.Data, "reference.log")
		l, err := bench.OpenDurableLog(path)
		if err != nil {
			return err
		}
		defer l.Close() // after the HTTP server has drained
		ref.Custody, kind = l, "durable log "+path
	}
	mux := http.NewServeMux()
	ref.Routes(mux)
	// The same server settings as serve, so the two differ only in storage.
	hs := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	ln, err := net.Listen("tcp", c.String("listen"))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	log.Info("reference server ("+kind+")", "addr", ln.Addr().String(), "config", cfg.SourceName())
	return server.ServeHTTP(ctx, log, []*http.Server{hs}, []net.Listener{ln}, server.DefaultShutdownTimeout)
}

func prefillCommand() *cli.Command {
	return &cli.Command{
		Name:  "prefill",
		Usage: "write N applied events straight into a database, for measuring against a large ledger",
		Description: "Benchmark fixture only: inserts receipts, delivery attempts and hash-chained usage rows\n" +
			"(meter \"prefill\") through the writer and the webhook path's Delivery.Apply, 100,000 per\n" +
			"transaction, without HTTP or signatures.\n" +
			"Never run it against a database whose ledger you bill from.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data", EnvVars: []string{"HOOKLEDGER_DATA"},
				Usage: "data directory of the database to fill (created if missing); --data or --database is required"},
			&cli.StringFlag{Name: "database", EnvVars: []string{"HOOKLEDGER_DATABASE"},
				Usage: "the PostgreSQL database (postgres://…) to fill instead of --data's hookledger.db (migrated first)"},
			&cli.IntFlag{Name: "receipts", Value: 1_000_000, EnvVars: []string{"HOOKLEDGER_BENCH_RECEIPTS"},
				Usage: "number of events to write"},
			&cli.StringFlag{Name: "provider", Value: "default", EnvVars: []string{"HOOKLEDGER_PROVIDER"},
				Usage: "provider the events are recorded under"},
			idsFlag("event ids: sequential (prefill-42) or random (Stripe-like evt_ and 24 base62 characters)"),
		},
		Action: prefill,
	}
}

func prefill(c *cli.Context) error {
	n := c.Int("receipts")
	if n < 1 {
		return fmt.Errorf("--receipts must be at least 1, got %d", n)
	}
	ids, err := parseIDs(c)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
	defer stop()
	target := c.String("database")
	switch {
	case target != "" && !schema.IsPostgres(target):
		return usageErrorf(c, "--database must be a postgres:// or postgresql:// URL")
	case target == "" && c.String("data") == "":
		return usageErrorf(c, "--data or --database is required")
	case target == "":
		target = schema.Path(c.String("data"))
	}
	db, err := schema.Open(ctx, target, schema.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	w := writer.New(db, nil) // a bulk loader's: no configuration, no hooks
	if err := w.Open(ctx); err != nil {
		return err
	}
	start := time.Now()
	var done atomic.Int64
	stopBar := progress(n, "prefill", &done)
	err = bench.Prefill(ctx, db, w, c.String("provider"), ids, n, start, &done)
	stopBar()
	if err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "wrote %d events (%s ids) to %s in %s\n", n, ids, db.Path, time.Since(start).Round(time.Millisecond))
	return nil
}

// idsFlag is --ids, shared by the load and the prefill.
func idsFlag(usage string) cli.Flag {
	return &cli.StringFlag{Name: "ids", Value: "sequential", EnvVars: []string{"HOOKLEDGER_BENCH_IDS"}, Usage: usage}
}

func parseIDs(c *cli.Context) (bench.IDs, error) {
	ids, err := bench.ParseIDs(c.String("ids"))
	if err != nil {
		return ids, usageErrorf(c, "--%v", err)
	}
	return ids, nil
}
