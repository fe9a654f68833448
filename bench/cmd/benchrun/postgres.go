package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/hookledger/hookledger/bench"
	"github.com/hookledger/hookledger/schema"
)

// With -postgres, serve runs on a fresh PostgreSQL database for every run,
// as it runs on a fresh SQLite file without it: an empty one, or a copy of
// a pre-filled one made with CREATE DATABASE … TEMPLATE (the server's file
// copy, checkpointed, so the load does not start behind the copy's dirty
// pages, as copyDB syncs SQLite's). The pre-filled databases are made once
// per kind and size by `hookledger bench prefill --database`, which ends
// with VACUUM (ANALYZE), so every copy starts with its statistics and
// visibility map. Each run's database is dropped after its load is verified.

// prefilledNote marks a pre-filled database whose pre-fill finished (its
// comment), so that -prefilled reuses it and an interrupted one is made
// again.
const prefilledNote = "hookledger bench prefill: done"

// pgPrefill makes the database of n receipts with ids of kind ids, named
// hookledger_bench_KIND_N. With -prefilled an existing finished one is
// reused and a new one kept; without, it is dropped at the end (dropAll).
func (h *runner) pgPrefill(ctx context.Context, ids bench.IDs, n int) (string, time.Duration, error) {
	name := fmt.Sprintf("hookledger_bench_%s_%d", ids, n)
	if h.o.prefilled != "" {
		note, ok, err := schema.PostgresDatabaseNote(ctx, h.o.postgres, name)
		if err != nil {
			return "", 0, err
		}
		if ok && note == prefilledNote {
			fmt.Fprintf(os.Stderr, "using the pre-filled database %s\n", name)
			return name, 0, nil
		}
	} else {
		h.dbs = append(h.dbs, name)
	}
	if err := schema.DropPostgresDatabase(ctx, h.o.postgres, name); err != nil { // an interrupted pre-fill
		return "", 0, err
	}
	dsn, err := schema.CreatePostgresDatabase(ctx, h.o.postgres, name)
	if err != nil {
		return "", 0, err
	}
	fmt.Fprintf(os.Stderr, "pre-filling %d events (%s ids) into the database %s\n", n, ids, name)
	cmd := exec.CommandContext(ctx, h.Bin, "bench", "prefill", "--database", dsn, "--receipts", strconv.Itoa(n), "--ids", ids.String())
	cmd.Env = h.Env
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("prefill: %w", err)
	}
	took := time.Since(start)
	if h.o.prefilled != "" {
		if err := schema.SetPostgresDatabaseNote(ctx, h.o.postgres, name, prefilledNote); err != nil {
			return "", 0, err
		}
	}
	return name, took, nil
}

// pgDatabase makes a run's database, a copy of template when it is set,
// and returns its URL and name.
func (h *runner) pgDatabase(ctx context.Context, template string) (dsn, name string, err error) {
	var b [4]byte
	rand.Read(b[:])
	name = "hookledger_bench_run_" + hex.EncodeToString(b[:])
	if template != "" {
		dsn, err = schema.CopyPostgresDatabase(ctx, h.o.postgres, name, template)
	} else {
		dsn, err = schema.CreatePostgresDatabase(ctx, h.o.postgres, name)
	}
	return dsn, name, err
}

// dropAll drops the pre-filled databases this run made and did not keep.
func (h *runner) dropAll() {
	if h.o.keep {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, name := range h.dbs {
		if err := schema.DropPostgresDatabase(ctx, h.o.postgres, name); err != nil {
			fmt.Fprintf(os.Stderr, "drop %s: %v\n", name, err)
		}
	}
}

// dropDatabase drops a run's database, with its own deadline (the run's
// context may be done).
func dropDatabase(server, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := schema.DropPostgresDatabase(ctx, server, name); err != nil {
		fmt.Fprintf(os.Stderr, "drop %s: %v\n", name, err)
	}
}
