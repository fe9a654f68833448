package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/internal/writer"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/receiver"
	"github.com/hookledger/hookledger/schema"
)

const benchTestSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func runBenchCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	t.Setenv("HOOKLEDGER_SECRET", "")
	var out, errOut bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &out, &errOut
	err := app.Run(append([]string{"hookledger", "bench"}, args...))
	return out.String(), err
}

func benchReference(t *testing.T) *httptest.Server {
	t.Helper()
	t.Setenv("HOOKLEDGER_SECRET", benchTestSecret)
	cfg, _, err := config.Default(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	providers, err := receiver.NewProviders(cfg.Providers)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	(&bench.Reference{Providers: providers, Mapper: ledger.NewMapper(cfg.Usage, cfg.MeterNames())}).Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestBenchAgainstReferenceServer(t *testing.T) {
	srv := benchReference(t)
	out, err := runBenchCLI(t, "--url", srv.URL, "--secret", benchTestSecret, "-n", "30", "-k", "3", "--dup", "0.1", "--format", "json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var r bench.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if r.Requests != 33 || r.Events != 30 || r.Duplicates != 3 || r.Connections != 3 || r.Status["200"] != 33 {
		t.Fatalf("result %+v", r)
	}
	if r.URL != srv.URL+"/webhooks/default" {
		t.Fatalf("url %q: the path /webhooks/PROVIDER should be added to a base URL", r.URL)
	}

	text, err := runBenchCLI(t, "--url", srv.URL+"/webhooks/default", "--secret", benchTestSecret, "-n", "5", "-k", "1")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	for _, want := range []string{"requests     6 (5 events + 1 duplicates) over 1 connections", "requests/s", "p99", "status       200: 6"} {
		if !strings.Contains(text, want) {
			t.Fatalf("text output lacks %q:\n%s", want, text)
		}
	}
}

func TestBenchReportsFailedRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	out, err := runBenchCLI(t, "--url", "http://"+addr, "--secret", benchTestSecret, "-n", "4", "-k", "2", "--dup", "0")
	if err == nil || !strings.Contains(err.Error(), "some requests were not answered 2xx") {
		t.Fatalf("error %v, want a failure", err)
	}
	if !strings.Contains(out, "error: 4") || !strings.Contains(out, "first error") {
		t.Fatalf("output does not show the transport errors:\n%s", out)
	}
}

func TestBenchRefusals(t *testing.T) {
	empty := t.TempDir()
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"bad format":        {[]string{"--secret", benchTestSecret, "--format", "xml"}, `--format: "xml" is not one of text, json`},
		"stray argument":    {[]string{"--secret", benchTestSecret, "oops"}, `unexpected argument "oops"`},
		"no secret":         {[]string{"--data", empty}, "no secret: pass --secret or set HOOKLEDGER_SECRET"},
		"unknown scheme":    {[]string{"--secret", "s3cret", "--scheme", "nope"}, `unknown signature scheme "nope"`},
		"bad standard key":  {[]string{"--secret", "whsec_***"}, "secret: standard secret must be base64"},
		"no events":         {[]string{"--secret", benchTestSecret, "-n", "0"}, "events must be at least 1"},
		"dup out of range":  {[]string{"--secret", benchTestSecret, "--dup", "2"}, "dup must be between 0 and 1"},
		"verify, no db":     {[]string{"--secret", benchTestSecret, "--verify", "--data", filepath.Join(empty, "missing")}, "--verify: no database at " + filepath.Join(empty, "missing", "hookledger.db")},
		"missing config":    {[]string{"--config", filepath.Join(empty, "nope.yml")}, "read config"},
		"prefill none":      {[]string{"prefill", "--data", empty, "--receipts", "0"}, "--receipts must be at least 1"},
		"unknown ids":       {[]string{"--secret", benchTestSecret, "--ids", "uuid"}, `--ids: "uuid" is not one of sequential, random`},
		"prefill bad ids":   {[]string{"prefill", "--data", empty, "--ids", "uuid"}, `--ids: "uuid" is not one of sequential, random`},
		"prefill no --data": {[]string{"prefill"}, `--data or --database is required`},
		"prefill not a URL": {[]string{"prefill", "--database", empty}, `--database must be a postgres:// or postgresql:// URL`},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runBenchCLI(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q\n%s", err, tc.want, out)
			}
		})
	}
}

func TestBenchPrefill(t *testing.T) {
	for _, ids := range []string{"sequential", "random"} {
		t.Run(ids, func(t *testing.T) {
			dir := t.TempDir()
			out, err := runBenchCLI(t, "prefill", "--data", dir, "--receipts", "20", "--ids", ids)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if !strings.Contains(out, "wrote 20 events ("+ids+" ids) to "+filepath.Join(dir, "hookledger.db")) {
				t.Fatalf("output %q", out)
			}
			db, err := schema.Open(context.Background(), filepath.Join(dir, schema.FileName), schema.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, table := range []string{"receipts", "metered_usage"} {
				var n int
				if err := db.Read.Get(&n, "SELECT COUNT(*) FROM "+table); err != nil || n != 20 {
					t.Errorf("%s: %d rows (%v), want 20", table, n, err)
				}
			}
			if n, err := db.CountAttempts(context.Background()); err != nil || n != 20 {
				t.Errorf("%d delivery attempts (%v), want 20", n, err)
			}
			// hookledger verify finds the prefilled ledger whole.
			var vout bytes.Buffer
			app := newApp()
			app.Writer, app.ErrWriter = &vout, &vout
			if err := app.Run([]string{"hookledger", "verify", "--data", dir}); err != nil || strings.Contains(vout.String(), "BROKEN") {
				t.Fatalf("verify: %v\n%s", err, vout.String())
			}
		})
	}
}

// bench prefill --database fills a PostgreSQL database as --data fills a
// SQLite file: the rows, whole for verify.
func TestBenchPrefillPostgres(t *testing.T) {
	dsn := testenv.PostgresDatabase(t)
	out, err := runBenchCLI(t, "prefill", "--database", dsn, "--receipts", "20", "--ids", "random")
	if err != nil || !strings.Contains(out, "wrote 20 events (random ids) to postgres://") {
		t.Fatalf("%v\n%s", err, out)
	}
	db, err := schema.Open(context.Background(), dsn, schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, table := range []string{"receipts", "metered_usage"} {
		var n int
		if err := db.Read.Get(&n, "SELECT COUNT(*) FROM "+table); err != nil || n != 20 {
			t.Errorf("%s: %d rows (%v), want 20", table, n, err)
		}
	}
	var vout bytes.Buffer
	app := newApp()
	app.Writer, app.ErrWriter = &vout, &vout
	if err := app.Run([]string{"hookledger", "verify", "--database", dsn}); err != nil || strings.Contains(vout.String(), "BROKEN") {
		t.Fatalf("verify: %v\n%s", err, vout.String())
	}
}

// TestBenchVerifiesRandomIDs runs the load with random ids against the real
// receiver, on top of a random-id prefill, and lets --verify check the ledger
// (a SQLite file, for --data; bench's own tests run Verify on both backends).
func TestBenchVerifiesRandomIDs(t *testing.T) {
	e := testenv.New(t, testenv.Options{RealTime: true, Backend: "sqlite"})
	w := writer.New(e.DB, nil)
	if err := w.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := bench.Prefill(context.Background(), e.DB, w, "default", bench.Random, 200, time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	for _, batch := range []string{"0", "25"} {
		t.Run("batch "+batch, func(t *testing.T) {
			args := []string{"--url", e.HTTP.URL, "--secret", testenv.Secret, "-n", "120", "-k", "4", "--dup", "0.2",
				"--ids", "random", "--verify", "--data", e.Dir, "--format", "json", "--batch", batch}
			if batch != "0" {
				key, _ := e.CreateKey("bench-"+batch, 0, 0)
				args = append(args, "--key", key)
			}
			out, err := runBenchCLI(t, args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			var r bench.Result
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if v := r.Verify; v == nil || !v.OK() || v.ExactlyOnce != 120 || v.Receipts != 120 || v.Duplicate != 24 {
				t.Fatalf("verify %+v", r.Verify)
			}
		})
	}
}
