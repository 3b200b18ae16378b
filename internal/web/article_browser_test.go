package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
)

// inView is a JavaScript expression: the task's title is within the
// viewport, top and bottom.
const inView = `(() => { const r = document.getElementById("t-title").getBoundingClientRect(); return r.top >= 0 && r.bottom <= window.innerHeight; })()`

// longArticle is a payload of n paragraphs of some length.
func longArticle(n int) map[string]any {
	paras := make([]string, n)
	for i := range paras {
		paras[i] = fmt.Sprintf("Paragraph %d. ", i+1) + strings.Repeat("The council's committee met again to discuss the budget and its many lines. ", 6)
	}
	return map[string]any{"text": strings.Join(paras, "\n\n")}
}

// TestBrowserLongArticleOpensAtTitle: a long article opens with its title
// in view after sign in, and the next one after a submit from the bottom
// of the page too; keyboard focus is on the title.
func TestBrowserLongArticleOpensAtTitle(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Kim", "news")
	s.addTask("news", 9, "The first long article", longArticle(25))
	s.addTask("news", 1, "The second long article", longArticle(25))

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("The first long article")
	if h := eval[int](tb, `document.documentElement.scrollHeight`); h < 2*900 {
		t.Fatalf("the page is %dpx high: not long enough to test scrolling", h)
	}
	if !eval[bool](tb, inView) {
		t.Errorf("after sign in the title is out of view: scrollY %d", eval[int](tb, `Math.round(window.scrollY)`))
	}
	if got := eval[string](tb, `document.activeElement.id`); got != "t-title" {
		t.Errorf("focus on %q, want the title", got)
	}
	tb.viewportShot("workspace-long-article")

	tb.do("scroll down and submit",
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.documentElement.scrollHeight)`),
		chromedp.Click(chromedp.CSS("#b-submit")),
	)
	tb.showing("The second long article")
	if !eval[bool](tb, inView) {
		t.Errorf("after submit the next title is out of view: scrollY %d", eval[int](tb, `Math.round(window.scrollY)`))
	}
	tb.viewportShot("workspace-long-article-next")
}

// viewportShot writes what the viewport shows as name.png to the artifacts
// directory.
func (tb *tab) viewportShot(name string) {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		tb.t.Fatalf("screenshot: %v", err)
	}
	writeArtifact(tb.t, name, png)
}
