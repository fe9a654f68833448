package server

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/custody"
	"github.com/hookledger/hookledger/internal/await"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/schema"
)

// jobsConfig is one provider reconciled from a JSONL export, with retention.
const jobsConfig = `data: %s
providers:
  - name: acme
    scheme: standard
    secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]
    replay_horizon: 3d
    reconcile:
      source: file
      file: export.jsonl
      time_path: data.occurred_at
retention:
  payload: 30d
  keys: 35d
usage:
  - provider: acme
    type: usage.recorded
    customer: data.customer
    meter: data.meter
    quantity: data.quantity
    occurred_at: data.occurred_at
`

// serve's periodic jobs: reconcile and prune run at start and on their
// interval, log what they did, and stop before the writer closes.
func TestBackgroundJobs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hookledger.yml")
	if err := os.WriteFile(path, fmt.Appendf(nil, jobsConfig, filepath.Join(dir, "data")), 0o600); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Hour).Format(time.RFC3339)
	var lines []string
	for i := 1; i <= 3; i++ {
		lines = append(lines, fmt.Sprintf(`{"id":"evt_%d","type":"usage.recorded","data":{"customer":"cus_1","meter":"api","quantity":%d,"occurred_at":%q}}`, i, i, at))
	}
	if err := os.WriteFile(filepath.Join(dir, "export.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Providers[0].Reconcile.Interval.Duration = 50 * time.Millisecond
	cfg.Retention.Interval.Duration = 50 * time.Millisecond
	ctx := context.Background()
	created, err := schema.Open(ctx, cfg.DBPath(), schema.Options{}) // as serve does before its jobs start
	if err != nil {
		t.Fatal(err)
	}
	created.Close()
	db, err := schema.Open(ctx, cfg.DBPath(), schema.Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	w := custody.NewWriter(db)
	if err := w.Open(ctx); err != nil {
		t.Fatal(err)
	}
	var logs testenv.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	mapper := ledger.NewMapper(cfg.Usage, cfg.MeterNames())
	stop, err := startBackground(ctx, log, cfg, db, w, mapper, custody.HandlerVersion("dev", mapper), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	await.Eventually(t, 10*time.Second, "the background jobs running", func() bool {
		if err := db.Read.Get(&n, `SELECT COUNT(*) FROM receipts WHERE source = 'reconcile' AND status = 'applied'`); err != nil {
			t.Fatal(err)
		}
		return n == 3 && strings.Count(logs.String(), `"msg":"prune"`) >= 2 && strings.Count(logs.String(), `"msg":"reconcile"`) >= 2
	})
	stop()
	w.Close()
	db.Close()
	out := logs.String()
	if !strings.Contains(out, `"msg":"reconcile","provider":"acme","seen":3,"already_present":0,"inserted":3`) {
		t.Errorf("first reconcile not logged with its counts:\n%s", out)
	}
	if strings.Contains(out, `"level":"WARN"`) {
		t.Errorf("a job failed:\n%s", out)
	}
}
