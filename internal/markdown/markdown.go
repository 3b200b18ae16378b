// Package markdown renders the Markdown an operator writes (a category's
// instructions) to HTML that is safe to put in a page: raw HTML in the text is
// never passed through (it is dropped), links keep only the http, https and
// mailto schemes or a relative address (any other link shows as its text) and
// open with rel="noopener noreferrer", and images show as their text, since
// the pages' Content-Security-Policy loads none from elsewhere. It uses
// goldmark (CommonMark, plus GitHub's tables, strikethrough and autolinks)
// without its unsafe option.
package markdown

import (
	"bytes"
	"fmt"
	"html/template"
	"net/url"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// md is safe for concurrent use: goldmark's Markdown holds no state per call.
var md = goldmark.New(
	goldmark.WithExtensions(extension.Table, extension.Strikethrough, extension.Linkify),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(linkRules{}, 0))),
)

// Render turns src into HTML fit to insert into a page as it is.
func Render(src string) (template.HTML, error) {
	var buf bytes.Buffer
	if err := md.Convert([]byte(src), &buf); err != nil {
		return "", fmt.Errorf("render markdown: %w", err)
	}
	// goldmark leaves a comment where it dropped raw HTML; say nothing.
	out := strings.ReplaceAll(buf.String(), "<!-- raw HTML omitted -->", "")
	return template.HTML(out), nil //nolint:gosec // built by goldmark without WithUnsafe, links checked by linkRules
}

// SafeURL reports whether a link may point at dest: http, https and mailto,
// or an address with no scheme (relative to the page).
func SafeURL(dest string) bool {
	u, err := url.Parse(strings.TrimSpace(dest))
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "mailto":
		return true
	case "":
		// No scheme: and nothing a browser might still read as one.
		return !strings.ContainsAny(dest, ":\\")
	}
	return false
}

// linkRules checks every link and image of a document: see the package
// documentation.
type linkRules struct{}

func (linkRules) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	var unsafe, images []ast.Node
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			if !SafeURL(string(n.Destination)) {
				unsafe = append(unsafe, n)
				break
			}
			n.SetAttributeString("rel", []byte("noopener noreferrer"))
		case *ast.AutoLink:
			if !SafeURL(string(n.URL(reader.Source()))) {
				unsafe = append(unsafe, n)
				break
			}
			n.SetAttributeString("rel", []byte("noopener noreferrer"))
		case *ast.Image:
			images = append(images, n)
		}
		return ast.WalkContinue, nil
	})
	for _, n := range append(unsafe, images...) {
		unwrap(n, reader.Source())
	}
}

// unwrap replaces n by its children (a link or image by its text); an
// autolink, which has none, by its address as text.
func unwrap(n ast.Node, src []byte) {
	parent := n.Parent()
	if parent == nil {
		return
	}
	if al, ok := n.(*ast.AutoLink); ok {
		parent.ReplaceChild(parent, n, ast.NewString(al.Label(src)))
		return
	}
	for c := n.FirstChild(); c != nil; {
		next := c.NextSibling()
		parent.InsertBefore(parent, n, c)
		c = next
	}
	parent.RemoveChild(parent, n)
}
