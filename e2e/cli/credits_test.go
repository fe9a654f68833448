package cli_test

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hookledger/hookledger/e2e/internal/e2e"
	"github.com/hookledger/hookledger/internal/testenv"
	"github.com/hookledger/hookledger/schema"
)

// 32 `credits grant` processes with one --id at once make one grant: every
// one exits 0, one says it granted and the others that it was a duplicate,
// and the credit ledger holds one row. The same id with another amount is
// refused (exit 2) and writes nothing.
func TestCreditsGrantConcurrentOnce(t *testing.T) {
	bin := testenv.Binary(t)
	dir := t.TempDir()
	e2e.MustRun(t, bin, dir, "migrate")
	args := []string{"credits", "grant", "cus_1", "250.00", "--currency", "USD", "--id", "wire-2026-12",
		"--reason", "prepaid by wire", "--actor", "ops"}
	results := make([]e2e.Result, 32)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e2e.Run(t, bin, dir, args...)
		}()
	}
	wg.Wait()
	granted, duplicates := 0, 0
	for _, r := range results {
		switch {
		case r.Code != 0:
			t.Fatalf("credits grant exited %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
		case strings.Contains(r.Stdout, "wire-2026-12 granted: 250.00 USD"):
			granted++
		case strings.Contains(r.Stdout, "was granted before (a duplicate: nothing written)"):
			duplicates++
		default:
			t.Fatalf("unexpected output: %s", r.Stdout)
		}
	}
	db, err := schema.Open(context.Background(), filepath.Join(dir, "data", "hookledger.db"), schema.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	es, err := db.CreditEntries(context.Background(), schema.CreditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if granted != 1 || duplicates != 31 || len(es) != 1 || es[0].Amount != "250.00" {
		t.Fatalf("%d granted, %d duplicates, %d rows stored: want 1, 31 and 1", granted, duplicates, len(es))
	}

	r := e2e.Run(t, bin, dir, "credits", "grant", "cus_1", "300.00", "--currency", "USD", "--id", "wire-2026-12", "--reason", "prepaid by wire")
	if r.Code != 2 || !strings.Contains(r.Stderr, `grant id already used: "wire-2026-12" is a grant of 250.00 USD`) {
		t.Fatalf("the same id with another amount: exit %d\n%s", r.Code, r.Stderr)
	}
	if es, _ := db.CreditEntries(context.Background(), schema.CreditFilter{}); len(es) != 1 {
		t.Fatalf("a refused grant wrote: %d rows", len(es))
	}
	if out := e2e.MustRun(t, bin, dir, "verify"); !strings.Contains(out, "credits                  1        ok") {
		t.Errorf("verify:\n%s", out)
	}
}
