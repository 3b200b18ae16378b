package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
)

// TestBrowserOpsCreate: the console creates an editor, showing its token
// once (the token works, and is gone from the page once dismissed), and adds
// a task, refusing a payload that is not JSON.
func TestBrowserOpsCreate(t *testing.T) {
	s := startServer(t, taskd.Config{})
	tb := newTab(t, 1280, 1000)
	tb.opsSignIn(s)

	tb.do("the editors", chromedp.Navigate(s.base+"/ops#editors"))
	tb.do("open the form", chromedp.Click(chromedp.CSS("#new-editor-box summary")))
	tb.do("a new editor",
		chromedp.SendKeys(chromedp.CSS("#ne-name"), "Eddie"),
		chromedp.SendKeys(chromedp.CSS("#ne-cats"), "news, sport"),
		chromedp.Click(chromedp.CSS(`#new-editor-form button[type="submit"]`)))
	tb.waitJS("the token, once", `!document.getElementById("ne-token").hidden && document.getElementById("ne-token-value").textContent.length > 20`)
	tb.waitJS("listed", `Array.from(document.querySelectorAll("#editors-table tbody tr")).some(function (r) { return r.textContent.includes("Eddie"); })`)
	token := eval[string](tb, `document.getElementById("ne-token-value").textContent`)
	if got := eval[string](tb, `document.getElementById("ne-token-name").textContent`); got != "Eddie" {
		t.Errorf("token shown for %q, want Eddie", got)
	}
	tb.screenshot("ops-new-editor")
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.screenshot("ops-new-editor-phone")
	tb.do("desktop viewport", chromedp.EmulateViewport(1280, 1000))
	var me struct {
		Name       string   `json:"name"`
		Categories []string `json:"categories"`
	}
	editorGet(t, s, token, "/v1/me", &me)
	if me.Name != "Eddie" || strings.Join(me.Categories, ",") != "news,sport" {
		t.Errorf("the new token's editor: %+v, want Eddie of news and sport", me)
	}
	tb.do("done with the token", chromedp.Click(chromedp.CSS("#ne-token-done")))
	tb.waitJS("the token gone", `document.getElementById("ne-token").hidden && document.getElementById("ne-token-value").textContent === "" && !document.body.textContent.includes(`+js(token)+`)`)

	tb.do("the tasks", chromedp.Navigate(s.base+"/ops#tasks"))
	tb.do("open the form", chromedp.Click(chromedp.CSS("#new-task-box summary")))
	tb.do("a task with a bad payload",
		chromedp.SendKeys(chromedp.CSS("#nt-category"), "news"),
		chromedp.SendKeys(chromedp.CSS("#nt-title"), "Harbour budget"),
		chromedp.SetValue(chromedp.CSS("#nt-payload"), `{"text": `),
		chromedp.Click(chromedp.CSS(`#new-task-form button[type="submit"]`)))
	tb.waitJS("refused", `document.getElementById("status").textContent.startsWith("Add a task: the payload is not JSON")`)
	tb.do("a good payload",
		chromedp.SetValue(chromedp.CSS("#nt-payload"), `{"text": "The council voted."}`),
		chromedp.Click(chromedp.CSS(`#new-task-form button[type="submit"]`)))
	tb.waitJS("added", `/^Task #\d+ added to news\.$/.test(document.getElementById("status").textContent)`)
	tb.waitJS("listed", `Array.from(document.querySelectorAll("#tasks-table tbody tr")).some(function (r) { return r.textContent.includes("Harbour budget"); })`)
	tb.screenshot("ops-new-task")
	var page struct {
		Tasks []struct {
			Category string `json:"category"`
			Title    string `json:"title"`
		} `json:"tasks"`
	}
	s.admin("GET", "/v1/tasks", nil, http.StatusOK, &page)
	if len(page.Tasks) != 1 || page.Tasks[0].Category != "news" || page.Tasks[0].Title != "Harbour budget" {
		t.Errorf("tasks %+v, want the one added", page.Tasks)
	}
}

// editorGet calls GET path with an editor's token and decodes the answer.
func editorGet(t *testing.T, s *server, token, path string, out any) {
	t.Helper()
	editorCall(t, s, token, "GET", path, "", http.StatusOK, out)
}
