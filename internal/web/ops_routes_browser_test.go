package web_test

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
)

// TestBrowserOpsRoutes: the console's routes (docs/pages.md) open their
// views; a hash it has no page at shows a not-found view naming it and the
// routes there are, not the pool.
func TestBrowserOpsRoutes(t *testing.T) {
	s := startServer(t, taskd.Config{})
	id := s.addTask("news", 1, "A task", map[string]any{"text": "x"})
	tb := newTab(t, 1280, 900)
	tb.opsSignIn(s)
	shown := `["pool", "tasks", "editors", "notfound"].filter(function (v) { return !document.getElementById("view-" + v).hidden; }).join()`
	for _, c := range []struct{ hash, view string }{
		{"#pool", "pool"},
		{"#tasks", "tasks"},
		{"#tasks/" + itoa(id), "tasks"},
		{"#editors", "editors"},
		{"#nonsense", "notfound"},
		{"#tasks/abc", "notfound"},
		{"#tasks/1/2", "notfound"},
		{"#pool/3", "notfound"},
		{"#editors/0", "notfound"},
	} {
		tb.do("go to "+c.hash, chromedp.Navigate(s.base+"/ops"+c.hash))
		tb.waitJS(c.hash+" shows "+c.view, shown+` === "`+c.view+`"`)
		if c.view != "notfound" {
			continue
		}
		if got := eval[string](tb, `document.getElementById("notfound-hash").textContent + " | " + document.title`); got != c.hash+" | No such page · taskd ops" {
			t.Errorf("%s: not-found view says %q", c.hash, got)
		}
	}
	tb.screenshot("ops-notfound")
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.screenshot("ops-notfound-phone")
	tb.do("desktop viewport", chromedp.EmulateViewport(1280, 900))
	tb.do("follow the link to the pool", chromedp.Click(chromedp.CSS(`#view-notfound a[href="#pool"]`)))
	tb.waitJS("the pool", shown+` === "pool"`)
}
