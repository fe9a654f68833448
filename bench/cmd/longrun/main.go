// Command longrun runs serve with Litestream for hours at a steady load and
// records, per window, what a team would watch on its VM (issue 42,
// RELIABILITY.md "A long run"): webhook and ingest latency, the replica's
// size per level against the database's, the WAL Litestream captured, RSS,
// and the compactions that completed. Each window's load is checked through
// the ledger (every event exactly once); at the end the replica is restored,
// latest and to a point an hour back, and the restored ledgers checked.
//
//	go run ./bench/cmd/longrun -minutes 120 -webhooks 200 -ingest 800 > longrun.txt
//
// Serve runs the shipped litestream.yml's settings (a file replica beside
// the data, as its example), on the embedded default configuration.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/bench/cmd/internal/harness"
)

func main() {
	binary := flag.String("binary", "", "hookledger binary (default: build one)")
	minutes := flag.Int("minutes", 120, "how long to run the load")
	webhooks := flag.Int("webhooks", 200, "webhooks per second")
	ingest := flag.Int("ingest", 800, "ingest API events per second")
	batch := flag.Int("batch", 40, "ingest events per request")
	window := flag.Duration("window", time.Minute, "the load's window: each is one verified `hookledger bench` per path, and a line")
	parent := flag.String("dir", "", "where to make the run's directory (default: the system temp dir); it needs room for the database and its replica")
	keep := flag.Bool("keep", false, "keep the run's directory")
	flag.Parse()
	ctx := context.Background()
	h, err := harness.New(ctx, *parent, "hookledger-longrun-", *binary, *keep)
	if err != nil {
		fail(err)
	}
	defer h.Close()
	harness.PrintMachine(os.Stdout)
	r, err := start(ctx, h)
	if err != nil {
		fail(err)
	}
	defer r.srv.Stop()
	fmt.Printf("%d webhooks/s and %d ingest events/s (batches of %d) for %d minutes, windows of %s; shipped litestream.yml settings, file replica\n",
		*webhooks, *ingest, *batch, *minutes, *window)

	samples := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { r.sample(samples) })
	fmt.Println("window,end_utc,webhooks,webhook_p50_ms,webhook_p99_ms,webhook_max_ms,ingest_events,ingest_p99_ms,compactions,db_mb,wal_mb,replica_mb,l0_mb,l1_mb,l2_mb,l3_mb,snapshot_mb,captured_mb,rss_mb")
	deadline := time.Now().Add(time.Duration(*minutes) * time.Minute)
	var windows []windowResult
	for i := 1; time.Now().Before(deadline); i++ {
		w, err := r.window(ctx, i, *window, *webhooks, *ingest, *batch)
		if err != nil {
			fail(fmt.Errorf("window %d: %w", i, err))
		}
		windows = append(windows, w)
		fmt.Println(w.csv(i))
	}
	close(samples)
	wg.Wait()
	summarize(windows)
	if err := r.restore(ctx); err != nil {
		fail(err)
	}
}

// run is the serve under load and what is known of it.
type run struct {
	h       *harness.Harness
	dir     string // the run's directory
	data    string // serve's data directory
	replica string
	srv     *harness.Server
	key     string // the ingest API key

	mu       sync.Mutex
	last     sizes
	captured map[string]int64 // every L0 file seen: the WAL Litestream captured
	start    time.Time
}

func start(ctx context.Context, h *harness.Harness) (*run, error) {
	r := &run{h: h, dir: h.Dir, data: filepath.Join(h.Dir, "data"), replica: filepath.Join(h.Dir, "replica"), captured: map[string]int64{}}
	shipped, err := os.ReadFile("litestream.yml")
	if err != nil {
		return nil, fmt.Errorf("run from the repository root (the shipped litestream.yml): %w", err)
	}
	yml := strings.NewReplacer("./data/hookledger.db", filepath.Join(r.data, "hookledger.db"), "./data/replica", r.replica).Replace(string(shipped))
	if err := os.WriteFile(filepath.Join(h.Dir, "litestream.yml"), []byte(yml), 0o600); err != nil {
		return nil, err
	}
	if _, err := r.cli(ctx, "migrate", "--data", r.data); err != nil {
		return nil, err
	}
	key, err := r.cli(ctx, "keys", "create", "longrun", "--quiet", "--data", r.data)
	if err != nil {
		return nil, err
	}
	r.key = strings.TrimSpace(string(key))
	r.srv, err = h.Start(ctx, "serve", h.Dir, filepath.Join(h.Dir, "serve.log"), "serve", "--listen", "127.0.0.1:0",
		"--data", r.data, "--litestream-config", filepath.Join(h.Dir, "litestream.yml"))
	if err != nil {
		return nil, err
	}
	r.start = time.Now()
	return r, nil
}

type windowResult struct {
	end         time.Time
	web, ingest *bench.Result
	compactions []compaction
	sizes       sizes
}

func (w windowResult) csv(i int) string {
	var levels []string
	for _, c := range w.compactions {
		levels = append(levels, fmt.Sprintf("L%d:%.0fMB", c.level, mb(c.size)))
	}
	s := w.sizes
	return fmt.Sprintf("%d,%s,%d,%.2f,%.2f,%.1f,%d,%.2f,%s,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.1f",
		i, w.end.UTC().Format("15:04:05"), w.web.Requests, w.web.Latency.P50, w.web.Latency.P99, w.web.Latency.Max,
		w.ingest.Events, w.ingest.Latency.P99, strings.Join(levels, " "),
		mb(s.db), mb(s.wal), mb(s.replica), mb(s.level[0]), mb(s.level[1]), mb(s.level[2]), mb(s.level[3]), mb(s.level[9]),
		mb(s.captured), s.rss)
}

// window sends one window's webhooks and ingest events at their rates, each
// load verified through the ledger, and collects what happened meanwhile.
func (r *run) window(ctx context.Context, i int, d time.Duration, webhooks, ingest, batch int) (windowResult, error) {
	w := windowResult{}
	secs := d.Seconds()
	begin := time.Now()
	var wg sync.WaitGroup
	var webErr, ingestErr error
	wg.Go(func() {
		w.web, webErr = r.h.Load(ctx, r.srv.URL, 8, int(float64(webhooks)*secs), 0, "--rate", strconv.Itoa(webhooks),
			"--run-id", fmt.Sprintf("w%d", i), "--verify", "--data", r.data)
	})
	wg.Go(func() {
		w.ingest, ingestErr = r.h.Load(ctx, r.srv.URL, 4, int(float64(ingest)*secs), 0, "--rate", strconv.Itoa(ingest/batch),
			"--batch", strconv.Itoa(batch), "--key", r.key, "--run-id", fmt.Sprintf("i%d", i), "--verify", "--data", r.data)
	})
	wg.Wait()
	for _, err := range []error{webErr, ingestErr} {
		if err != nil {
			return w, err
		}
	}
	w.end = time.Now()
	cs, err := r.compactions()
	if err != nil {
		return w, err
	}
	for _, c := range cs {
		if !c.at.Before(begin) && c.at.Before(w.end) && c.level >= 2 {
			w.compactions = append(w.compactions, c)
		}
	}
	r.mu.Lock()
	w.sizes = r.last
	r.mu.Unlock()
	return w, nil
}

// sizes is one sample of the disk and memory serve uses.
type sizes struct {
	db, wal, replica int64
	level            [10]int64
	captured         int64
	rss              float64
}

// sample measures every 10 s until done is closed.
func (r *run) sample(done <-chan struct{}) {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		s := sizes{db: fileSize(filepath.Join(r.data, "hookledger.db")), wal: fileSize(filepath.Join(r.data, "hookledger.db-wal"))}
		s.rss, _, _ = r.srv.Memory()
		r.mu.Lock()
		filepath.WalkDir(r.replica, func(path string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return nil
			}
			info, err := e.Info()
			if err != nil {
				return nil
			}
			s.replica += info.Size()
			if l, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil && l >= 0 && l < len(s.level) {
				s.level[l] += info.Size()
				if l == 0 {
					r.captured[e.Name()] = info.Size()
				}
			}
			return nil
		})
		for _, n := range r.captured {
			s.captured += n
		}
		r.last = s
		r.mu.Unlock()
		select {
		case <-done:
			return
		case <-tick.C:
		}
	}
}

func fileSize(path string) int64 {
	info, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return info.Size()
}

func mb(n int64) float64 { return float64(n) / (1 << 20) }

// compaction is a Litestream "compaction complete" line of serve's log.
type compaction struct {
	at    time.Time
	level int
	size  int64
}

func (r *run) compactions() ([]compaction, error) {
	f, err := os.Open(filepath.Join(r.dir, "serve.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cs []compaction
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if !strings.Contains(sc.Text(), "compaction complete") {
			continue
		}
		// Litestream's "level" attribute follows slog's own: decoded into
		// a map, the later one wins.
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"]))
		level, _ := l["level"].(float64)
		size, _ := l["size"].(float64)
		cs = append(cs, compaction{at: at, level: int(level), size: int64(size)})
	}
	return cs, sc.Err()
}

// summarize prints the webhook p99 in windows where a compaction of level 2
// or above completed against the others, and the replica against the
// database at its largest.
func summarize(ws []windowResult) {
	var during, outside []float64
	var worst float64
	var worstAt int
	for i, w := range ws {
		if len(w.compactions) > 0 {
			during = append(during, w.web.Latency.P99)
		} else {
			outside = append(outside, w.web.Latency.P99)
		}
		if w.sizes.db > 0 {
			if ratio := float64(w.sizes.replica) / float64(w.sizes.db); ratio > worst {
				worst, worstAt = ratio, i+1
			}
		}
	}
	last := ws[len(ws)-1].sizes
	fmt.Printf("webhook p99 per window: median %.2f ms outside compactions (%d windows, max %.2f), median %.2f ms in windows where one of level ≥ 2 completed (%d windows, max %.2f)\n",
		median(outside), len(outside), maxOf(outside), median(during), len(during), maxOf(during))
	fmt.Printf("replica at the end %.0f MB for a %.0f MB database (%.2fx), at most %.2fx (window %d); WAL captured %.0f MB\n",
		mb(last.replica), mb(last.db), float64(last.replica)/float64(last.db), worst, worstAt, mb(last.captured))
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return harness.Median(xs)
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// restore stops serve (its final sync), restores the replica's latest state
// and its state an hour back (or at half the run, if shorter), and checks
// each with hookledger verify.
func (r *run) restore(ctx context.Context) error {
	back := min(time.Hour, time.Since(r.start)/2)
	at := time.Now().Add(-back)
	r.srv.Stop()
	for _, c := range []struct{ name, ts string }{{"latest", ""}, {"past", at.UTC().Format(time.RFC3339)}} {
		out := filepath.Join(r.dir, "restored-"+c.name)
		args := []string{"restore", "--litestream-config", filepath.Join(r.dir, "litestream.yml"), "--output", filepath.Join(out, "hookledger.db")}
		if c.ts != "" {
			args = append(args, "--timestamp", c.ts)
		}
		began := time.Now()
		if _, err := r.cli(ctx, args...); err != nil {
			return err
		}
		took := time.Since(began)
		head, err := r.cli(ctx, "ledger", "head", "--data", out)
		if err != nil {
			return err
		}
		fmt.Printf("restore %s%s: %.0f s, %s", c.name, map[bool]string{true: "", false: " to " + c.ts}[c.ts == ""], took.Seconds(), head)
		if _, err := r.cli(ctx, "verify", "--data", out); err != nil {
			return err
		}
	}
	return nil
}

// cli runs a hookledger command in the run's directory, with its environment.
func (r *run) cli(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.h.Bin, args...)
	cmd.Dir, cmd.Env = r.dir, r.h.Env
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return out, fmt.Errorf("hookledger %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return out, nil
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "longrun:", err)
	os.Exit(1)
}
