package replication

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/benbjohnson/litestream"
	"github.com/benbjohnson/litestream/file"
	"github.com/hookledger/hookledger/internal/testenv/fakes3"
)

func s3Config(t testing.TB, dir, dbPath, endpoint string) *Config {
	t.Setenv("HL_TEST_S3_SECRET", "fake-secret")
	t.Setenv("AWS_CA_BUNDLE", "") // see newReplicaClient
	return writeConfig(t, dir, fmt.Sprintf(`dbs:
  - path: %s
    %s      type: s3
      bucket: hookledger
      path: prod/ledger
      endpoint: %s
      region: us-east-1
      access-key-id: fake-key
      secret-access-key: ${HL_TEST_S3_SECRET}
`, dbPath, fast, endpoint))
}

// The S3 replica round-trips, and the same LTX files restore through the
// file client too: the two backends differ only in layout, not format.
func TestS3ReplicaAndFileClient(t *testing.T) {
	ctx := context.Background()
	endpoint, _ := fakes3.Serve(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hookledger.db")
	cfg := s3Config(t, dir, dbPath, endpoint)
	want := replicateAndLose(t, cfg, dbPath)

	res := mustRestore(t, cfg, RestoreOptions{})
	if got, n := digest(t, dbPath); got != want {
		t.Fatalf("restored %d rows from s3 with the wrong digest", n)
	}

	// Copy every level from S3 into a file replica, then restore from that.
	src, err := newReplicaClient(&cfg.DB.Replica)
	if err != nil {
		t.Fatal(err)
	}
	copyDir := filepath.Join(t.TempDir(), "copy")
	dst := file.NewReplicaClient(copyDir)
	for level := 0; level <= litestream.SnapshotLevel; level++ {
		itr, err := src.LTXFiles(ctx, level, 0, false)
		if err != nil {
			t.Fatal(err)
		}
		for itr.Next() {
			info := itr.Item()
			rc, err := src.OpenLTXFile(ctx, level, info.MinTXID, info.MaxTXID, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dst.WriteLTXFile(ctx, level, info.MinTXID, info.MaxTXID, rc); err != nil {
				t.Fatal(err)
			}
			rc.Close()
		}
		if err := itr.Close(); err != nil {
			t.Fatal(err)
		}
	}
	fileCfg := *cfg
	fileCfg.DB.Replica = ReplicaConfig{Type: "file", Path: copyDir}
	out := filepath.Join(t.TempDir(), "from-file.db")
	fromFile := mustRestore(t, &fileCfg, RestoreOptions{OutputPath: out})
	if got, _ := digest(t, out); got != want || fromFile.TXID != res.TXID {
		t.Fatalf("file copy of the s3 replica restored txid %s (s3: %s) with digest match %v", fromFile.TXID, res.TXID, got == want)
	}
}

// A replica that stops answering must fail Sync, show in Status, and not
// hold Close past ShutdownSyncTimeout.
func TestUnreachableReplica(t *testing.T) {
	ctx := context.Background()
	endpoint, hang := fakes3.Serve(t)
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "hookledger.db")
	cfg := s3Config(t, dir, dbPath, endpoint)
	app := openApp(t, dbPath)
	r, err := NewReplicator(cfg, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	r.ShutdownSyncTimeout = 500 * time.Millisecond
	if err := r.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	hang.Store(true)
	insert(t, app, 0, 5)
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := r.Sync(sctx); err == nil {
		t.Fatal("Sync succeeded against a hung replica")
	}
	if st, _ := r.Status(sctx); st.Healthy() || st.LastError == "" {
		t.Fatalf("status does not show the failure: %+v", st)
	}
	app.Close()
	begin := time.Now()
	err = r.Close(ctx)
	if elapsed := time.Since(begin); err == nil || elapsed > 3*time.Second {
		t.Fatalf("Close against a hung replica: %v after %v; want an error within ~%v", err, elapsed, r.ShutdownSyncTimeout)
	}
}

// The stock CLI restores what the embedded Replicator wrote, from the same
// litestream.yml. Runs when a litestream v0.5 binary is on PATH (or in
// $LITESTREAM_BIN); CI can install one.
func TestStockLitestreamRestores(t *testing.T) {
	bin := os.Getenv("LITESTREAM_BIN")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("litestream"); err != nil {
			t.Skip("no litestream binary on PATH")
		}
	}
	endpoint, _ := fakes3.Serve(t)
	for _, kind := range []string{"file", "s3"} {
		t.Run(kind, func(t *testing.T) {
			cfg, dbPath := setup(t, fast)
			if kind == "s3" {
				cfg = s3Config(t, filepath.Dir(dbPath), dbPath, endpoint)
			}
			want := replicateAndLose(t, cfg, dbPath)
			out := filepath.Join(t.TempDir(), "stock.db")
			cmd := exec.Command(bin, "restore", "-config", cfg.File, "-integrity-check", "full", "-o", out, dbPath)
			cmd.Env = append(os.Environ(), "AWS_CA_BUNDLE=", "HL_TEST_S3_SECRET=fake-secret")
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", cmd, err, b)
			}
			if got, n := digest(t, out); got != want {
				t.Fatalf("stock litestream restored %d rows with a different digest", n)
			}
		})
	}
}
