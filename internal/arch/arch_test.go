// Package arch holds the checks of docs/architecture.md's claims about the
// layout that a test can make.
package arch

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/hookledger/hookledger"

// layers are docs/architecture.md's, from the ground up: a package may
// import its own layer's and those below, never one above. A package not
// listed takes its top directory's layer.
var layers = [][]string{
	{"pricing", "payload", "chainhash", "redact", "csvout", "durable"},
	{"schema"},
	{"ledger", "scheme", "replication"},
	{"customer"},
	{"invoice"},
	{"entitle", "ingest"},
	{"config", "custody"},
	{"stripe", "reconcile", "metrics", "health", "receiver"},
	{"forward", "dispute", "bench"},
	{"admin", "console"},
	{"internal", "e2e", "."},
}

func layerOf(pkg string) (int, bool) {
	top, _, _ := strings.Cut(pkg, "/")
	for i, names := range layers {
		for _, n := range names {
			if n == top {
				return i, true
			}
		}
	}
	return 0, false
}

// Every import of the module's own packages runs down the layers (or stays
// in one): none runs back up.
func TestImportsRunDown(t *testing.T) {
	root := filepath.Join("..", "..")
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "deploy" || d.Name() == "examples") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		from, ok := layerOf(rel)
		if !ok {
			t.Errorf("%s: package %s is in no layer of docs/architecture.md", path, rel)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		files++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			own, ok := strings.CutPrefix(p, module+"/")
			if !ok {
				continue
			}
			to, ok := layerOf(own)
			if !ok {
				t.Errorf("%s imports %s, in no layer", rel, own)
				continue
			}
			if to > from {
				t.Errorf("%s (layer %d) imports %s (layer %d): an import running back up", rel, from, own, to)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d files, want the module's", files)
	}
}

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
