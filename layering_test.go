package taskd_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// The front of taskd (the HTTP API, the pages and the taskd command) reaches
// the pool through the engine's methods and the domain types of package
// tasks, never through the MySQL store: every write then goes through the
// engine, with its locks and wake-ups.
const (
	module = "github.com/taskd/taskd"
	// storePkg is the MySQL store.
	storePkg = module + "/internal/store"
)

// storeImport reports whether path is the store or one of its packages
// (migrations included).
func storeImport(path string) bool {
	return path == storePkg || strings.HasPrefix(path, storePkg+"/")
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
	// The API and the pages depend on no store package, even through
	// another: they get the engine's values through interfaces of their own.
	for _, p := range listPackages(t, "./internal/api/...", "./internal/web/...", "./internal/wire/...") {
		for _, dep := range p.Deps {
			if storeImport(dep) {
				t.Errorf("%s depends on the store package %s (through its imports %v)", p.ImportPath, dep, p.Imports)
			}
		}
	}
	// The command builds the engine, which holds the store, and its handlers
	// are written as an embedder's, against package taskd: they may depend on
	// the store through package taskd, but not import it.
	for _, p := range listPackages(t, "./cmd/taskd/...") {
		for _, imp := range p.Imports {
			if storeImport(imp) {
				t.Errorf("%s imports the store package %s; use the engine's methods", p.ImportPath, imp)
			}
		}
	}
}
