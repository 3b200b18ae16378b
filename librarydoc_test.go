package taskd_test

import (
	"go/format"
	"os"
	"regexp"
	"strings"
	"testing"
)

// addressLine is the line of a program that says where a store is: the
// program of docs/library.md and Example differ only there.
var addressLine = regexp.MustCompile(`(?m)^\t(dsn|redisAddr) := .*$`)

// libraryDoc is the page that walks an embedder through a program of its
// own: Example, as a main package.
const libraryDoc = "docs/library.md"

// TestLibraryDocProgramIsTheExample checks that the program of
// docs/library.md is Example (example_test.go) as a main package, but for
// the stores' addresses, and that it is gofmt-formatted, so that it
// compiles as it stands.
func TestLibraryDocProgramIsTheExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(libraryDoc)
	if err != nil {
		t.Fatal(err)
	}
	var programs []string
	for _, block := range strings.Split(string(doc), "```go\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.HasPrefix(block, "package main\n") {
			programs = append(programs, block)
		}
	}
	if len(programs) != 1 {
		t.Fatalf("%s has %d go blocks starting with package main, want 1", libraryDoc, len(programs))
	}
	program := programs[0]
	if formatted, err := format.Source([]byte(program)); err != nil {
		t.Fatalf("%s's program does not parse: %v", libraryDoc, err)
	} else if string(formatted) != program {
		t.Errorf("%s's program is not gofmt-formatted; gofmt makes it:\n%s", libraryDoc, formatted)
	}

	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example := asProgram(t, string(src))
	got, want := addressLine.ReplaceAllString(program, "\t$1 := …"), addressLine.ReplaceAllString(example, "\t$1 := …")
	if n := len(addressLine.FindAllString(program, -1)); n != 2 {
		t.Errorf("%s's program has %d address lines (dsn :=, redisAddr :=), want 2", libraryDoc, n)
	}
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "(none)", "(none)"
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s's program and Example (example_test.go) differ at line %d:\ndoc:     %q\nExample: %q", libraryDoc, i+1, g, w)
			}
		}
	}
}

// asProgram turns example_test.go into the main package docs/library.md shows:
// package main, Example's doc comment and output comment dropped, Example
// renamed main.
func asProgram(t *testing.T, src string) string {
	t.Helper()
	src, ok := strings.CutPrefix(src, "package taskd_test\n")
	if !ok {
		t.Fatal("example_test.go does not start with package taskd_test")
	}
	head, body, ok := strings.Cut(src, "\nfunc Example() {\n")
	if !ok {
		t.Fatal("example_test.go has no func Example")
	}
	lines := strings.Split(head, "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[len(lines)-1], "//") {
		lines = lines[:len(lines)-1] // the doc comment
	}
	body = strings.Replace(body, "\t// Output: hello, Ada\n", "", 1)
	return "package main\n" + strings.Join(lines, "\n") + "\nfunc main() {\n" + body
}
