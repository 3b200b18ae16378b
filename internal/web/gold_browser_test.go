package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
)

// TestBrowserGold: an editor is served a gold task as any other, nothing on
// the page telling it apart, and submits it with a wrong decision; under the
// floor it is paused from news, and the console's Gold view shows its
// accuracy and the pause's reason, at desktop and phone width; Lift ends the
// pause.
func TestBrowserGold(t *testing.T) {
	s := startServer(t, taskd.Config{Categories: []taskd.CategoryConfig{
		{Name: "news", Gold: taskd.GoldConfig{Rule: "decision", Rate: 1, MinAccuracy: 0.5, MinAnswers: 1}},
	}})
	id, token := s.editor("Ada Editor", "news")
	s.admin("POST", "/v1/tasks", []map[string]any{{
		"category": "news", "title": "Mayor opens the bridge", "payload": map[string]any{"text": "The bridge opened on Monday."},
		"gold": map[string]any{"decision": "reject"},
	}}, http.StatusCreated, nil)
	s.addTask("news", 0, "Harbour reopens", map[string]any{"text": "Ships are back."})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Mayor opens the bridge")
	if html := eval[string](tb, `document.documentElement.outerHTML.toLowerCase()`); strings.Contains(html, "gold") {
		t.Error("the workspace's page names gold while a gold copy is shown")
	}
	tb.do("submit, approving", chromedp.Click(chromedp.CSS("#b-submit")))
	// Paused from news by the wrong answer: nothing more for Ada.
	tb.waitJS("the waiting state", `document.body.dataset.state === "waiting"`)

	tb.opsSignIn(s)
	tb.do("open the gold view", chromedp.Navigate(s.base+"/ops#gold"))
	tb.waitJS("Ada's row", `document.querySelectorAll("#gold-rows tr").length === 1`)
	got := eval[[]string](tb, `Array.from(document.querySelectorAll("#gold-rows td")).map(td => td.textContent)`)
	if len(got) != 6 || got[0] != "Ada Editor" || got[1] != "news" || got[2] != "1" || got[3] != "0" || got[4] != "0%" ||
		!strings.HasPrefix(got[5], "Paused: gold accuracy 0% < 50% over last 1") {
		t.Errorf("gold row %q", got)
	}
	tb.screenshot("ops-gold")
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.waitJS("laid out at phone width", `window.innerWidth === 390`)
	tb.screenshot("ops-gold-phone")

	tb.do("lift the pause", chromedp.Click(chromedp.CSS(".gold-lift")))
	tb.waitJS("the pause lifted", `document.getElementById("status").textContent.startsWith("Lifted the pause of Ada Editor from news") && document.querySelector(".gold-lift") === null`)
	var g struct {
		Pauses []any `json:"pauses"`
	}
	s.admin("GET", "/v1/admin/gold", nil, http.StatusOK, &g)
	if len(g.Pauses) != 0 {
		t.Errorf("pauses after the lift: %v", g.Pauses)
	}
	_ = id
}
