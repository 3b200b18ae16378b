package markdown_test

import (
	"html"
	"regexp"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/markdown"
)

func TestRenderMarkdown(t *testing.T) {
	t.Parallel()
	got, err := markdown.Render("# Rules\n\nBe *kind*, see [the guide](https://example.com/guide) or <mailto:desk@example.com>.\n\n- one\n- two\n")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"<h1>Rules</h1>",
		"<em>kind</em>",
		`<a href="https://example.com/guide" rel="noopener noreferrer">the guide</a>`,
		`<a href="mailto:desk@example.com" rel="noopener noreferrer">mailto:desk@example.com</a>`,
		"<li>one</li>",
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("render: %s\nwant it to contain %s", got, want)
		}
	}
}

var hrefRE = regexp.MustCompile(`(?i)href="([^"]*)"`)

// TestRenderHostileMarkdown: raw HTML, scripts, event handlers and links of
// other schemes render inert.
func TestRenderHostileMarkdown(t *testing.T) {
	t.Parallel()
	for _, src := range []string{
		`<script>alert(1)</script>`,
		"text <script>alert(1)</script> more",
		`<img src=x onerror="alert(1)">`,
		`<a href="https://example.com" onclick="alert(1)">x</a>`,
		`<div><p><b onmouseover="alert(1)">nested</b></p></div>`,
		`<iframe src="javascript:alert(1)"></iframe>`,
		`<svg><script>alert(1)</script></svg>`,
		`[click](javascript:alert(1))`,
		`[click](JaVaScRiPt:alert(1))`,
		`[click](&#106;avascript:alert(1))`,
		`[click](java&#x09;script:alert(1))`,
		`[click](vbscript:msgbox(1))`,
		`[click](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)`,
		`[click](<javascript:alert(1)>)`,
		`<javascript:alert(1)>`,
		`![x](javascript:alert(1))`,
		`![x](https://evil.example/p.png "t")`,
		`[x](https://a.example "a\" onmouseover=\"alert(1)")`,
		"```html\n<script>alert(1)</script>\n```",
		`<style>body{display:none}</style>`,
		`<form action="https://evil.example"><input name=a></form>`,
		`[x]: javascript:alert(1)` + "\n\n[y][x]",
	} {
		out, err := markdown.Render(src)
		if err != nil {
			t.Fatalf("render %q: %v", src, err)
		}
		low := strings.ToLower(string(out))
		for _, bad := range []string{"<script", "<img", "<iframe", "<svg", "<style", "<form", "<input", "<div", "<b ", " onerror", " onclick", " onmouseover=\"", " src="} {
			if strings.Contains(low, bad) {
				t.Errorf("render %q = %q: contains %q", src, out, bad)
			}
		}
		for _, m := range hrefRE.FindAllStringSubmatch(string(out), -1) {
			if dest := html.UnescapeString(m[1]); !markdown.SafeURL(dest) {
				t.Errorf("render %q = %q: a link to %q", src, out, dest)
			}
		}
		if strings.Contains(low, "<a ") && !strings.Contains(low, `rel="noopener noreferrer"`) {
			t.Errorf("render %q = %q: a link without rel", src, out)
		}
	}
}

func TestSafeURL(t *testing.T) {
	t.Parallel()
	for dest, want := range map[string]bool{
		"https://example.com": true, "http://example.com/a?b=c": true, "mailto:a@example.com": true,
		"guide.html": true, "/docs/guide": true, "#part": true,
		"javascript:alert(1)": false, " javascript:alert(1)": false, "JAVASCRIPT:x": false,
		"data:text/html,x": false, "file:///etc/passwd": false, "ftp://example.com": false,
		"java\tscript:x": false, "/\\evil.example": false, "x:y": false,
	} {
		if got := markdown.SafeURL(dest); got != want {
			t.Errorf("SafeURL(%q) = %v, want %v", dest, got, want)
		}
	}
}
