package writer

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookledger/hookledger/config"
	"github.com/hookledger/hookledger/ledger"
	"github.com/hookledger/hookledger/pricing"
)

// sourceFiles parses every Go file of the module outside the directories
// skip names (relative to the module's root), tests included when tests is
// set, and calls fn with each file's path and syntax tree.
func sourceFiles(t *testing.T, tests bool, skip []string, fn func(rel string, f *ast.File)) {
	t.Helper()
	root := filepath.Join("..", "..")
	parsed := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || (!tests && strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		for _, dir := range skip {
			if strings.HasPrefix(rel, dir+string(filepath.Separator)) {
				return nil
			}
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		parsed++
		fn(rel, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if parsed < 100 {
		t.Fatalf("read %d files of the module, want all of them", parsed)
	}
}

// uses lists the files of the module that name pkg.name.
func uses(t *testing.T, tests bool, skip []string, pkg, name string) []string {
	var out []string
	sourceFiles(t, tests, skip, func(rel string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == name {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
					out = append(out, rel)
					return false
				}
			}
			return true
		})
	})
	return out
}

// The writer is built in one place: no package but custody and this one
// calls custody.NewWriter, so no command can build a writer that quietly
// leaves a hook out.
func TestOneConstructor(t *testing.T) {
	if callers := uses(t, false, []string{"custody", filepath.Join("internal", "writer")}, "custody", "NewWriter"); len(callers) > 0 {
		t.Errorf("custody.NewWriter called outside internal/writer: %v (use writer.New)", callers)
	}
}

// One write path in the code: no package but schema and custody holds the
// storage batch (schema.Batch); the others write through custody's typed
// operations (custody/ops.go), tests included.
func TestOnlyCustodyHoldsTheBatch(t *testing.T) {
	if holders := uses(t, true, []string{"schema", "custody"}, "schema", "Batch"); len(holders) > 0 {
		t.Errorf("schema.Batch named outside schema and custody: %v (use custody's typed operations)", holders)
	}
}

// New wires every hook the configuration asks for, and none without one.
func TestNewWiresEveryHook(t *testing.T) {
	limit := pricing.MustDecimal("100")
	cfg := &config.Config{
		Destinations: []config.Destination{{Name: "app", URL: "http://127.0.0.1:1/hooks"}},
		Meters: []config.Meter{{Name: "api_requests", Aggregation: ledger.AggSum,
			Stripe: &ledger.StripeMeter{EventName: "api_requests", Mode: ledger.StripeStream}}},
		Stripe:    &config.Stripe{Customers: config.StripeIdentity},
		Providers: []config.Provider{{Name: "stripe", Scheme: "stripe"}},
	}
	plan := pricing.Plan{Name: "free", Currency: "USD", EffectiveFrom: "2026-01-01",
		Limits: []pricing.Limit{{Meter: "api_requests", Limit: limit, Kind: pricing.LimitHard, Alerts: []string{"80%"}}}}
	if err := plan.Validate(); err != nil {
		t.Fatal(err)
	}
	cat, err := pricing.NewCatalog([]pricing.Plan{plan})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Catalog, cfg.Customers.DefaultPlan = cat, "free"
	w := New(nil, cfg)
	if w.Route == nil || w.Push == nil || w.Receipt == nil || w.Limits == nil {
		t.Errorf("hooks route %v, push %v, receipt %v, limits %v: want all", w.Route != nil, w.Push != nil, w.Receipt != nil, w.Limits != nil)
	}
	if w := New(nil, nil); w.Route != nil || w.Push != nil || w.Receipt != nil || w.Limits != nil {
		t.Error("a bulk loader's writer has hooks")
	}
}
