package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// doubleDashFlag finds a flag written --name.
var doubleDashFlag = regexp.MustCompile("(^|[\\s'\"(`])--[a-z]")

// mentionedFlag finds a flag written -name in prose: after a space, a quote
// or a parenthesis, so that "read-only" and "-1s" are not flags.
var mentionedFlag = regexp.MustCompile("(?:^|[\\s'\"(`])-([a-z][a-z0-9-]*[a-z0-9])\\b")

// definedFlag finds a flag in the "Flags:" list flag.PrintDefaults writes.
var definedFlag = regexp.MustCompile(`(?m)^  -([a-z][a-z0-9-]*)`)

// TestHelpWritesFlagsOneWay checks that the help texts and hints write flags
// the Go flag package's way, -name, and that every flag a command's help
// mentions is one of its flags.
func TestHelpWritesFlagsOneWay(t *testing.T) {
	t.Parallel()
	out, _, code := runApp(t, nil, "-help")
	if code != exitOK {
		t.Fatalf("taskd -help: exit %d", code)
	}
	if m := doubleDashFlag.FindString(out); m != "" {
		t.Errorf("taskd -help writes a flag as %q:\n%s", m, out)
	}
	for _, c := range commands() {
		help, _, code := runApp(t, nil, c.name, "-help")
		if code != exitOK {
			t.Errorf("taskd %s -help: exit %d", c.name, code)
			continue
		}
		if m := doubleDashFlag.FindString(help); m != "" {
			t.Errorf("taskd %s -help writes a flag as %q:\n%s", c.name, m, help)
		}
		about, flags, ok := strings.Cut(help, "\nFlags:\n")
		if !ok {
			t.Errorf("taskd %s -help has no Flags: section:\n%s", c.name, help)
			continue
		}
		var defined []string
		for _, m := range definedFlag.FindAllStringSubmatch(flags, -1) {
			defined = append(defined, m[1])
		}
		for _, m := range mentionedFlag.FindAllStringSubmatch(about, -1) {
			if !slices.Contains(defined, m[1]) && m[1] != "help" {
				t.Errorf("taskd %s -help mentions -%s, which is not one of its flags %v", c.name, m[1], defined)
			}
		}
		_, stderr, code := runApp(t, nil, c.name, "-no-such-flag")
		if code != exitUsage || !strings.Contains(stderr, "Run 'taskd "+c.name+" -help' for usage.") {
			t.Errorf("taskd %s -no-such-flag: exit %d, want %d and the hint with -help:\n%s", c.name, code, exitUsage, stderr)
		}
	}
}

// docsCommand finds a taskd command line in the documentation.
var docsCommand = regexp.MustCompile("taskd (serve|work|migrate|import|export|status|pause|resume|cancel|dev)\\b[^`\\n]*")

// TestDocsWriteFlagsOneWay checks that the taskd command lines of README.md
// and docs/*.md write flags as the help does, -name.
func TestDocsWriteFlagsOneWay(t *testing.T) {
	t.Parallel()
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md found")
	}
	n := 0
	for _, path := range append([]string{"../../README.md"}, docs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range docsCommand.FindAllString(string(b), -1) {
			n++
			if m := doubleDashFlag.FindString(line); m != "" {
				t.Errorf("%s writes a flag as %q: %s", strings.TrimPrefix(path, "../../"), m, line)
			}
		}
	}
	if n < 10 {
		t.Fatalf("found %d taskd command lines in README.md and docs/; the pattern no longer matches them", n)
	}
}
