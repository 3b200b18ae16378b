package taskd_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The front of taskd (the HTTP API, the pages and the taskd command) reaches
// the pool through the engine's methods and the domain types of package
// tasks, never through the MySQL store: every write then goes through the
// engine, with its locks and wake-ups.
const (
	module = "github.com/taskd/taskd"
	// storePkg is the MySQL store; storeAPI names the store's API while it
	// still lives in package tasks.
	storePkg = module + "/internal/store"
)

// storeAPI are the identifiers of package tasks that are the store rather
// than its domain types.
var storeAPI = []string{"Store", "Open", "NewStore"}

// storeImport reports whether path is the store or one of its packages
// (migrations included).
func storeImport(path string) bool {
	return path == storePkg || strings.HasPrefix(path, storePkg+"/") || path == module+"/tasks/migrate"
}

// listedPackage is what go list -json says of a package.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Deps       []string
}

// listPackages runs go list -deps=false -json on patterns.
func listPackages(t *testing.T, patterns ...string) []listedPackage {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the packages with")
	}
	out, err := exec.Command(goTool, append([]string{"list", "-json"}, patterns...)...).Output()
	if err != nil {
		t.Fatalf("go list %v: %v", patterns, err)
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("go list: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatalf("go list %v listed nothing", patterns)
	}
	return pkgs
}

func TestFrontImportsNoStore(t *testing.T) {
	t.Parallel()
	// The API and the pages, and the command's own packages, depend on no
	// store package, even through another: they get the engine's values
	// through interfaces of their own.
	for _, p := range listPackages(t, "./internal/api/...", "./internal/web/...", "./internal/wire/...", "./cmd/taskd/internal/...") {
		for _, dep := range p.Deps {
			if storeImport(dep) {
				t.Errorf("%s depends on the store package %s (through its imports %v)", p.ImportPath, dep, p.Imports)
			}
		}
	}
	// The command builds the engine, which holds the store: it may depend on
	// it through package taskd, but not import it.
	for _, p := range listPackages(t, "./cmd/taskd") {
		for _, imp := range p.Imports {
			if storeImport(imp) {
				t.Errorf("%s imports the store package %s; use the engine's methods", p.ImportPath, imp)
			}
		}
	}
}

func TestFrontUsesNoStoreAPI(t *testing.T) {
	t.Parallel()
	pkgs := listPackages(t, "./internal/api/...", "./internal/web/...", "./internal/wire/...", "./cmd/taskd/...")
	fset := token.NewFileSet()
	files := 0
	for _, p := range pkgs {
		for _, name := range p.GoFiles {
			path := filepath.Join(p.Dir, name)
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files++
			tasksName := ""
			for _, imp := range f.Imports {
				if imp.Path.Value == `"`+module+`/tasks"` {
					tasksName = "tasks"
					if imp.Name != nil {
						tasksName = imp.Name.Name
					}
				}
			}
			if tasksName == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == tasksName {
					for _, id := range storeAPI {
						if sel.Sel.Name == id {
							t.Errorf("%s: uses tasks.%s, the store; use the engine's methods", fset.Position(sel.Pos()), id)
						}
					}
				}
				return true
			})
		}
	}
	if files == 0 {
		t.Fatal("no Go files read: the check checked nothing")
	}
}
