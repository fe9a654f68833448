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

// The writer is built in one place: no package but custody (its own tests)
// and this one calls custody.NewWriter, so no command can build a writer
// that quietly leaves a hook out.
func TestOneConstructor(t *testing.T) {
	root := filepath.Join("..", "..")
	var callers []string
	parsed := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if strings.HasPrefix(rel, "custody"+string(filepath.Separator)) || strings.HasPrefix(rel, filepath.Join("internal", "writer")) {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		parsed++
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewWriter" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "custody" {
					callers = append(callers, rel)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if parsed < 100 {
		t.Fatalf("read %d files of the module, want all of them", parsed)
	}
	if len(callers) > 0 {
		t.Errorf("custody.NewWriter called outside internal/writer: %v (use writer.New)", callers)
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
