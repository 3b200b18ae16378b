package taskd_test

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// mdLink finds an inline Markdown link or image, [text](target) or
// ![alt](target), capturing the target.
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// mdHeading is an ATX heading line.
var mdHeading = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// inlineCode is a code span, whose text is not Markdown.
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// markdownLines returns the lines of a Markdown text outside fenced code
// blocks, with code spans blanked.
func markdownLines(text string) []string {
	var lines []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			lines = append(lines, "")
			continue
		}
		if fenced {
			lines = append(lines, "")
			continue
		}
		lines = append(lines, line)
	}
	return lines
}

// anchors returns the anchors GitHub makes for the headings of a Markdown
// text: lower case, spaces made hyphens, every other character dropped but
// letters, marks, numbers, - and connectors such as _, and -1, -2, … added
// to repeats.
func anchors(text string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, line := range markdownLines(text) {
		m := mdHeading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.Pc):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// brokenLinks returns, for the Markdown file at name (slash-separated,
// relative to root), each relative link whose file does not exist under
// root, or whose #anchor names no heading of its Markdown file.
func brokenLinks(root fs.FS, name string) ([]string, error) {
	text, err := fs.ReadFile(root, name)
	if err != nil {
		return nil, err
	}
	var broken []string
	for i, line := range markdownLines(string(text)) {
		line = inlineCode.ReplaceAllString(line, "``")
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			where := name
			if file != "" {
				where = path.Join(path.Dir(name), file)
				if strings.HasPrefix(where, "../") {
					broken = append(broken, name+":"+strconv.Itoa(i+1)+": "+target+" (outside the repository)")
					continue
				}
				if _, err := fs.Stat(root, strings.TrimSuffix(where, "/")); err != nil {
					broken = append(broken, name+":"+strconv.Itoa(i+1)+": "+target+" (no such file)")
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(where, ".md") {
				broken = append(broken, name+":"+strconv.Itoa(i+1)+": "+target+" (an anchor into a file that is not Markdown)")
				continue
			}
			to, err := fs.ReadFile(root, where)
			if err != nil {
				return nil, err
			}
			if !anchors(string(to))[anchor] {
				broken = append(broken, name+":"+strconv.Itoa(i+1)+": "+target+" (no such heading)")
			}
		}
	}
	return broken, nil
}

// TestDocsLinksResolve checks every relative link and image of the
// repository's Markdown files: the file exists, and an #anchor names one of
// its headings.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	root := os.DirFS(".")
	var files []string
	err := fs.WalkDir(root, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && name != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "bin") {
			return fs.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(name, ".md") {
			files = append(files, name)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"README.md", "docs/api.md", "docs/design.md"} {
		if !slices.Contains(files, want) {
			t.Fatalf("found %v, not %s", files, want)
		}
	}
	links := 0
	for _, name := range files {
		b, err := fs.ReadFile(root, name)
		if err != nil {
			t.Fatal(err)
		}
		links += len(mdLink.FindAllString(string(b), -1))
		broken, err := brokenLinks(root, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			t.Errorf("broken link: %s", b)
		}
	}
	if links < 50 {
		t.Fatalf("found %d links in %d Markdown files; the pattern no longer matches them", links, len(files))
	}
}

// TestBrokenLinksFindsBrokenLinks holds the link check to a made-up tree:
// it must report exactly the broken links.
func TestBrokenLinksFindsBrokenLinks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A page\n\n## Keys, run_after and due_at\n\n## Twice\n\n## Twice\n\n### The `deploy/` folder\n\n## Scale — out, ×2\n")
	write("docs/shot.png", "")
	write("README.md", strings.Join([]string{
		"[ok](docs/a.md) [ok](docs/a.md#keys-run_after-and-due_at) [ok](docs/a.md#twice-1)",
		"![ok](docs/shot.png) [ok](#read-on) [ok](https://example.com/x.md) [ok](docs/a.md#the-deploy-folder) [ok](docs/a.md#scale--out-2)",
		"[missing file](docs/b.md) [missing heading](docs/a.md#keys) [missing here](#nowhere)",
		"[third twice](docs/a.md#twice-2) [anchor into png](docs/shot.png#x) [outside](../x.md)",
		"`[in code](nowhere.md)`",
		"```",
		"[in a block](nowhere.md)",
		"```",
		"## Read on",
	}, "\n"))
	got, err := brokenLinks(os.DirFS(dir), "README.md")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:3: docs/b.md (no such file)",
		"README.md:3: docs/a.md#keys (no such heading)",
		"README.md:3: #nowhere (no such heading)",
		"README.md:4: docs/a.md#twice-2 (no such heading)",
		"README.md:4: docs/shot.png#x (an anchor into a file that is not Markdown)",
		"README.md:4: ../x.md (outside the repository)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("brokenLinks found\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestReadmeIsAFrontDoor holds README.md to what it is for: under 1,500
// words (as wc -w counts them, code included), the two commands that work
// on a fresh machine on its first screen, one screenshot, a Go block cut
// from Example, and a link to every page of docs/.
func TestReadmeIsAFrontDoor(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	if n := len(strings.Fields(readme)); n >= 1500 {
		t.Errorf("README.md has %d words, want under 1,500: move the detail to docs/", n)
	}
	lines := strings.Split(readme, "\n")
	firstScreen := strings.Join(lines[:min(len(lines), 30)], "\n")
	for _, cmd := range []string{"\nmake run ", "\nmake test "} {
		if !strings.Contains(firstScreen, cmd) {
			t.Errorf("README.md's first 30 lines have no line starting %q", strings.TrimSpace(cmd))
		}
	}
	var shots []string
	for _, m := range mdLink.FindAllStringSubmatch(readme, -1) {
		if strings.HasPrefix(m[0], "!") {
			shots = append(shots, m[1])
		}
	}
	if len(shots) != 1 || !strings.HasPrefix(shots[0], "docs/screenshots/") {
		t.Errorf("README.md shows images %v, want one screenshot from docs/screenshots/", shots)
	}
	// The Go block is cut from Example: every line of code in it is a line of
	// example_test.go, so that it changes when Example does.
	_, block, ok := strings.Cut(readme, "```go\n")
	if !ok {
		t.Fatal("README.md has no Go block")
	}
	block, _, _ = strings.Cut(block, "```")
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example := map[string]bool{}
	for _, line := range strings.Split(string(src), "\n") {
		example[strings.TrimSpace(line)] = true
	}
	code := 0
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		code++
		if !example[line] {
			t.Errorf("README.md's Go block has a line Example (example_test.go) lacks: %s", line)
		}
	}
	if code < 8 {
		t.Errorf("README.md's Go block has %d lines of code, want the handler, New, Start and Insert", code)
	}

	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 6 {
		t.Fatalf("docs/ has %d pages, want at least 6 (api, operations, library, deployment, performance, design)", len(pages))
	}
	for _, p := range pages {
		if !strings.Contains(readme, "]("+filepath.ToSlash(p)+")") {
			t.Errorf("README.md does not link to %s", p)
		}
	}
}
